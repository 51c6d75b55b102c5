import { describe, expect, it } from 'vitest';
import { decide } from '../../../lib/orchestration/decide.ts';
import { failureOf } from '../../../lib/orchestration/steps.ts';
import { type PodHealth, podHealth, podsByRun, withPodHealth } from '../../../lib/trainjob/pod-health.ts';
import { type JobView, toRunPhase } from '../../../lib/trainjob/status.ts';

const NOW = new Date('2026-01-01T00:10:00Z');
const T0 = '2026-01-01T00:00:00Z'; // ten minutes before NOW
const T9 = '2026-01-01T00:09:00Z'; // one minute before NOW

type Pod = Record<string, unknown>;

function pod(name: string, status: Record<string, unknown>, runId = 'run-a'): Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'team-a', labels: { 'gantry.dev/run-id': runId }, creationTimestamp: T0 },
    status,
  };
}
const waiting = (reason: string, message?: string, restartCount = 0) => ({
  phase: reason === 'CrashLoopBackOff' ? 'Running' : 'Pending',
  containerStatuses: [
    {
      name: 'node',
      ready: false,
      restartCount,
      state: { waiting: { reason, ...(message ? { message } : {}) } },
    },
  ],
});
const unschedulable = (
  since: string,
  message = '0/4 nodes are available: 4 Insufficient nvidia.com/gpu.',
) => ({
  phase: 'Pending',
  conditions: [
    { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message, lastTransitionTime: since },
  ],
});
const RUNNING = {
  phase: 'Running',
  conditions: [{ type: 'Ready', status: 'True' }],
  containerStatuses: [{ name: 'node', ready: true, restartCount: 0, state: { running: { startedAt: T0 } } }],
};
const CREATING = waiting('ContainerCreating');

describe('podHealth', () => {
  it.each<[string, Pod[], PodHealth]>([
    ['no pods', [], { pods: 0, running: 0 }],
    ['one running pod', [pod('p0', RUNNING)], { pods: 1, running: 1 }],
    ['a pod still creating its container', [pod('p0', CREATING)], { pods: 1, running: 0 }],
    [
      'ImagePullBackOff: terminal, with the kubelet message',
      [pod('p0', waiting('ImagePullBackOff', 'Back-off pulling image "acme/train:nope"'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ImagePullFailed',
          message: 'pod p0: ImagePullBackOff: Back-off pulling image "acme/train:nope"',
          fatal: true,
        },
      },
    ],
    [
      'ErrImagePull: terminal',
      [pod('p0', waiting('ErrImagePull', 'not found'))],
      {
        pods: 1,
        running: 0,
        problem: { reason: 'ImagePullFailed', message: 'pod p0: ErrImagePull: not found', fatal: true },
      },
    ],
    [
      'CreateContainerConfigError: terminal',
      [pod('p0', waiting('CreateContainerConfigError', 'secret "creds" not found'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ContainerConfigError',
          message: 'pod p0: CreateContainerConfigError: secret "creds" not found',
          fatal: true,
        },
      },
    ],
    [
      'CrashLoopBackOff below the restart limit: shown, not fatal; the pod counts as running',
      [pod('p0', waiting('CrashLoopBackOff', 'back-off 20s', 2))],
      {
        pods: 1,
        running: 1,
        problem: {
          reason: 'CrashLoopBackOff',
          message: 'pod p0: CrashLoopBackOff: back-off 20s (restarted 2 times)',
          fatal: false,
        },
      },
    ],
    [
      'CrashLoopBackOff at the restart limit: fatal',
      [pod('p0', waiting('CrashLoopBackOff', 'back-off 5m0s', 5))],
      {
        pods: 1,
        running: 1,
        problem: {
          reason: 'CrashLoopBackOff',
          message: 'pod p0: CrashLoopBackOff: back-off 5m0s (restarted 5 times)',
          fatal: true,
        },
      },
    ],
    [
      'Unschedulable for a minute: shown, within the grace',
      [pod('p0', unschedulable(T9))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'Unschedulable',
          message: 'pod p0: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.',
          fatal: false,
        },
      },
    ],
    [
      'Unschedulable for ten minutes: past the 300 s grace',
      [pod('p0', unschedulable(T0))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'Unschedulable',
          message: 'pod p0: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.',
          fatal: true,
        },
      },
    ],
    [
      'a fatal problem wins over one that is not',
      [pod('p0', unschedulable(T9)), pod('p1', waiting('ErrImagePull', 'denied'))],
      {
        pods: 2,
        running: 0,
        problem: { reason: 'ImagePullFailed', message: 'pod p1: ErrImagePull: denied', fatal: true },
      },
    ],
    [
      'finished pods are not problems',
      [pod('p0', { ...waiting('ErrImagePull'), phase: 'Failed' })],
      { pods: 1, running: 0 },
    ],
    ['malformed pods are skipped', [{ metadata: 3 } as Pod, pod('p1', RUNNING)], { pods: 2, running: 1 }],
  ])('%s', (_name, pods, expected) => {
    expect(podHealth(pods, NOW)).toEqual(expected);
  });

  it('takes the grace and the restart limit from the options', () => {
    const opts = { unschedulableGraceSeconds: 30, crashLoopRestartLimit: 2 };
    expect(podHealth([pod('p0', unschedulable(T9))], NOW, opts).problem?.fatal).toBe(true);
    expect(podHealth([pod('p0', waiting('CrashLoopBackOff', 'x', 2))], NOW, opts).problem?.fatal).toBe(true);
  });

  it('groups pods by their run label and drops pods without one', () => {
    const byRun = podsByRun([
      pod('a0', RUNNING, 'run-a'),
      pod('b0', RUNNING, 'run-b'),
      pod('a1', RUNNING, 'run-a'),
      {},
    ]);
    expect([...byRun.keys()]).toEqual(['run-a', 'run-b']);
    expect(byRun.get('run-a')).toHaveLength(2);
  });
});

const admitted = { state: 'Admitted' as const, source: 'kueue' as const };
const runningView: JobView = { phase: 'Running', admission: admitted, finished: false };
const queuedView: JobView = {
  phase: 'Pending',
  admission: { state: 'Queued', source: 'kueue' },
  finished: false,
};
const health = (pods: Pod[]) => podHealth(pods, NOW);
const unsuspended = (jobsStatus?: unknown[]) => ({
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: { name: 'run-a' },
  spec: {},
  status: jobsStatus ? { jobsStatus } : {},
});

describe('withPodHealth: Running means a pod runs', () => {
  it.each<[string, JobView, PodHealth | undefined, unknown, Partial<JobView>]>([
    ['pods not listed: the job status decides', runningView, undefined, undefined, { phase: 'Running' }],
    ['a running pod: Running', runningView, health([pod('p0', RUNNING)]), undefined, { phase: 'Running' }],
    [
      'admitted, pods still creating: Pending, PodsStarting',
      runningView,
      health([pod('p0', CREATING)]),
      undefined,
      { phase: 'Pending', reason: 'PodsStarting' },
    ],
    [
      'image pull failure: Failed ImagePullFailed with the pod message',
      runningView,
      health([pod('p0', waiting('ImagePullBackOff', 'Back-off pulling image "x"'))]),
      undefined,
      {
        phase: 'Failed',
        reason: 'ImagePullFailed',
        message: 'pod p0: ImagePullBackOff: Back-off pulling image "x"',
        finished: true,
      },
    ],
    [
      'unschedulable within the grace: Pending Unschedulable',
      runningView,
      health([pod('p0', unschedulable(T9))]),
      undefined,
      { phase: 'Pending', reason: 'Unschedulable' },
    ],
    [
      'unschedulable past the grace: Failed Unschedulable',
      runningView,
      health([pod('p0', unschedulable(T0))]),
      undefined,
      { phase: 'Failed', reason: 'Unschedulable' },
    ],
    [
      'crash loop below the limit: Running, explained',
      runningView,
      health([pod('p0', waiting('CrashLoopBackOff', 'back-off', 1))]),
      undefined,
      { phase: 'Running', reason: 'CrashLoopBackOff' },
    ],
    [
      'still queued: the gate decides even with unschedulable pods (a PodGroup waiting for room)',
      queuedView,
      health([pod('p0', unschedulable(T0))]),
      undefined,
      { phase: 'Pending', admission: { state: 'Queued', source: 'kueue' } },
    ],
    [
      'no labelled pods, jobsStatus has a ready job: Running',
      runningView,
      health([]),
      unsuspended([{ name: 'node', ready: 1, active: 1, succeeded: 0, failed: 0, suspended: 0 }]),
      { phase: 'Running' },
    ],
    [
      'no labelled pods, jobsStatus has none ready: Pending PodsStarting',
      runningView,
      health([]),
      unsuspended([{ name: 'node', ready: 0, active: 1, succeeded: 0, failed: 0, suspended: 0 }]),
      { phase: 'Pending', reason: 'PodsStarting' },
    ],
    [
      'no labelled pods, no jobsStatus: the job status decides',
      runningView,
      health([]),
      unsuspended(),
      { phase: 'Running' },
    ],
  ])('%s', (_name, view, h, job, expected) => {
    expect(withPodHealth(view, h, job)).toMatchObject(expected);
  });

  it('changes what the old interpretation said about an unsuspended TrainJob with stuck pods', () => {
    // Before: an unsuspended TrainJob was Running, whatever its pods did.
    const job = unsuspended([{ name: 'node', ready: 0, active: 1, succeeded: 0, failed: 0, suspended: 0 }]);
    const before = toRunPhase(job as never);
    expect(before.phase).toBe('Running');
    const after = withPodHealth(before, health([pod('p0', waiting('ErrImagePull', 'denied'))]), job);
    expect(after.phase).toBe('Failed');
  });
});

describe('decide and failureOf with pod problems', () => {
  it.each([
    ['ImagePullFailed', 'PodStartFailedError'],
    ['ContainerConfigError', 'PodStartFailedError'],
    ['CrashLoopBackOff', 'PodStartFailedError'],
    ['Unschedulable', 'UnschedulableError'],
    ['TrainingFailed', 'TrainingFailedError'],
  ])('a run failed with %s is failed with %s, keeping the reason', (reason, error) => {
    const v: JobView = {
      phase: 'Failed',
      reason,
      message: 'pod p0: why',
      admission: admitted,
      finished: true,
    };
    const d = decide('admission', v);
    expect(d).toEqual({ kind: 'fail', error, reason, message: 'pod p0: why' });
    const cause = JSON.stringify({ reason, message: 'pod p0: why' });
    expect(failureOf({ run: {} as never, error: { Error: error, Cause: cause } })).toEqual({
      reason,
      message: 'pod p0: why',
    });
    // Thrown by the heartbeat fallback (checkJob): Lambda wraps the same JSON in errorMessage.
    const thrown = JSON.stringify({ errorType: error, errorMessage: cause });
    expect(failureOf({ run: {} as never, error: { Error: error, Cause: thrown } })).toEqual({
      reason,
      message: 'pod p0: why',
    });
  });
});
