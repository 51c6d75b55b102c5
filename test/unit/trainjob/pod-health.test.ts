import { describe, expect, it } from 'vitest';
import { decide } from '../../../lib/orchestration/decide.ts';
import { failureOf } from '../../../lib/orchestration/steps.ts';
import {
  DEFAULT_POD_HEALTH,
  type PodHealth,
  podHealth,
  podsByRun,
  START_ERROR_ANNOTATION,
  type StartErrorSighting,
  startErrorPatch,
  startErrorSighting,
  withPodHealth,
} from '../../../lib/trainjob/pod-health.ts';
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
  it.each<[string, Pod[], PodHealth, StartErrorSighting?]>([
    ['no pods', [], { pods: 0, running: 0 }],
    ['one running pod', [pod('p0', RUNNING)], { pods: 1, running: 1 }],
    ['a pod still creating its container', [pod('p0', CREATING)], { pods: 1, running: 0 }],
    [
      'ImagePullBackOff first seen now: within the grace, with the kubelet message and when Gantry gives up',
      [pod('p0', waiting('ImagePullBackOff', 'Back-off pulling image "acme/train:nope"'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ImagePullFailed',
          message:
            'image pull failing for 0 s: pod p0: ImagePullBackOff: Back-off pulling image "acme/train:nope"; Gantry gives up after 600 s',
          fatal: false,
          since: NOW.toISOString(),
        },
      },
    ],
    [
      'ErrImagePull seen a minute ago: still within the grace',
      [pod('p0', waiting('ErrImagePull', 'not found'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ImagePullFailed',
          message:
            'image pull failing for 60 s: pod p0: ErrImagePull: not found; Gantry gives up after 600 s',
          fatal: false,
          since: T9,
        },
      },
      { reason: 'ImagePullFailed', since: T9 },
    ],
    [
      'ErrImagePull seen ten minutes ago: past the 600 s grace, fails with the kubelet message',
      [pod('p0', waiting('ErrImagePull', 'not found'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ImagePullFailed',
          message: 'pod p0: ErrImagePull: not found (image pull failing for 600 s)',
          fatal: true,
          since: T0,
        },
      },
      { reason: 'ImagePullFailed', since: T0 },
    ],
    [
      'RegistryUnavailable is retried too',
      [pod('p0', waiting('RegistryUnavailable', '503'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ImagePullFailed',
          message: 'pod p0: RegistryUnavailable: 503 (image pull failing for 600 s)',
          fatal: true,
          since: T0,
        },
      },
      { reason: 'ImagePullFailed', since: T0 },
    ],
    [
      'a sighting of another class does not count: a config error seen long ago, a pull error now',
      [pod('p0', waiting('ErrImagePull', 'not found'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ImagePullFailed',
          message: 'image pull failing for 0 s: pod p0: ErrImagePull: not found; Gantry gives up after 600 s',
          fatal: false,
          since: NOW.toISOString(),
        },
      },
      { reason: 'ContainerConfigError', since: T0 },
    ],
    [
      'InvalidImageName: terminal at first sight, whatever the grace',
      [pod('p0', waiting('InvalidImageName', 'couldn\'t parse image name "Acme/Train"'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ImagePullFailed',
          message: 'pod p0: InvalidImageName: couldn\'t parse image name "Acme/Train"',
          fatal: true,
        },
      },
    ],
    [
      'ErrImageNeverPull: terminal at first sight',
      [pod('p0', waiting('ErrImageNeverPull', 'image is not present with pull policy of Never'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ImagePullFailed',
          message: 'pod p0: ErrImageNeverPull: image is not present with pull policy of Never',
          fatal: true,
        },
      },
    ],
    [
      'CreateContainerConfigError first seen now: within the grace (a Secret may be created later)',
      [pod('p0', waiting('CreateContainerConfigError', 'secret "creds" not found'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ContainerConfigError',
          message:
            'container config failing for 0 s: pod p0: CreateContainerConfigError: secret "creds" not found; Gantry gives up after 600 s',
          fatal: false,
          since: NOW.toISOString(),
        },
      },
    ],
    [
      'CreateContainerConfigError seen ten minutes ago: fatal',
      [pod('p0', waiting('CreateContainerConfigError', 'secret "creds" not found'))],
      {
        pods: 1,
        running: 0,
        problem: {
          reason: 'ContainerConfigError',
          message:
            'pod p0: CreateContainerConfigError: secret "creds" not found (container config failing for 600 s)',
          fatal: true,
          since: T0,
        },
      },
      { reason: 'ContainerConfigError', since: T0 },
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
      [pod('p0', waiting('ErrImagePull', 'denied')), pod('p1', unschedulable(T0))],
      {
        pods: 2,
        running: 0,
        problem: {
          reason: 'Unschedulable',
          message: 'pod p1: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu.',
          fatal: true,
        },
      },
    ],
    [
      'finished pods are not problems',
      [pod('p0', { ...waiting('ErrImagePull'), phase: 'Failed' })],
      { pods: 1, running: 0 },
    ],
    ['malformed pods are skipped', [{ metadata: 3 } as Pod, pod('p1', RUNNING)], { pods: 2, running: 1 }],
  ])('%s', (_name, pods, expected, sighting?: StartErrorSighting) => {
    expect(podHealth(pods, NOW, DEFAULT_POD_HEALTH, sighting)).toEqual(expected);
  });

  it('takes the graces and the restart limit from the options', () => {
    const opts = {
      ...DEFAULT_POD_HEALTH,
      unschedulableGraceSeconds: 30,
      crashLoopRestartLimit: 2,
      containerStartGraceSeconds: 60,
    };
    expect(podHealth([pod('p0', unschedulable(T9))], NOW, opts).problem?.fatal).toBe(true);
    expect(podHealth([pod('p0', waiting('CrashLoopBackOff', 'x', 2))], NOW, opts).problem?.fatal).toBe(true);
    const pull = [pod('p0', waiting('ErrImagePull', 'x'))];
    const seen = { reason: 'ImagePullFailed' as const, since: T9 };
    expect(podHealth(pull, NOW, opts, seen).problem?.fatal).toBe(true);
    expect(podHealth(pull, NOW, { ...opts, containerStartGraceSeconds: 61 }, seen).problem?.fatal).toBe(
      false,
    );
    // A grace of 0 is the old behaviour: fatal at first sight.
    expect(podHealth(pull, NOW, { ...opts, containerStartGraceSeconds: 0 }).problem?.fatal).toBe(true);
  });

  it('keeps the first sighting on the job: set when a retried error appears, removed when it is gone', () => {
    const job = (annotations: Record<string, string> = {}) => ({ metadata: { name: 'run-a', annotations } });
    const failing = podHealth([pod('p0', waiting('ErrImagePull', 'x'))], NOW);
    expect(startErrorPatch(job(), failing)).toEqual({
      [START_ERROR_ANNOTATION]: `ImagePullFailed ${NOW.toISOString()}`,
    });
    const kept = job({ [START_ERROR_ANNOTATION]: `ImagePullFailed ${T9}` });
    expect(startErrorSighting(kept)).toEqual({ reason: 'ImagePullFailed', since: T9 });
    const again = podHealth(
      [pod('p0', waiting('ImagePullBackOff', 'x'))],
      NOW,
      DEFAULT_POD_HEALTH,
      startErrorSighting(kept),
    );
    expect(again.problem?.since).toBe(T9);
    expect(startErrorPatch(kept, again)).toBeUndefined();
    expect(startErrorPatch(kept, podHealth([pod('p0', RUNNING)], NOW))).toEqual({
      [START_ERROR_ANNOTATION]: null,
    });
    expect(startErrorPatch(kept, undefined)).toBeUndefined(); // pods not listed: say nothing
    expect(startErrorPatch(job(), podHealth([pod('p0', RUNNING)], NOW))).toBeUndefined();
    // Malformed annotations are no sighting.
    for (const bad of [
      'ImagePullFailed',
      'CrashLoopBackOff 2026-01-01T00:00:00Z',
      'ImagePullFailed yesterday',
    ])
      expect(startErrorSighting(job({ [START_ERROR_ANNOTATION]: bad }))).toBeUndefined();
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
/** Pod health at NOW; `pullSince`: when a pull error was first seen (default: now). */
const health = (pods: Pod[], pullSince?: string) =>
  podHealth(
    pods,
    NOW,
    DEFAULT_POD_HEALTH,
    pullSince ? { reason: 'ImagePullFailed', since: pullSince } : undefined,
  );
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
      'image pull failing within the grace: Pending ImagePullFailed, saying how long and when Gantry gives up',
      runningView,
      health([pod('p0', waiting('ImagePullBackOff', 'Back-off pulling image "x"'))], T9),
      undefined,
      {
        phase: 'Pending',
        reason: 'ImagePullFailed',
        message:
          'image pull failing for 60 s: pod p0: ImagePullBackOff: Back-off pulling image "x"; Gantry gives up after 600 s',
        finished: false,
      },
    ],
    [
      'image pull failing past the grace: Failed ImagePullFailed with the pod message',
      runningView,
      health([pod('p0', waiting('ImagePullBackOff', 'Back-off pulling image "x"'))], T0),
      undefined,
      {
        phase: 'Failed',
        reason: 'ImagePullFailed',
        message: 'pod p0: ImagePullBackOff: Back-off pulling image "x" (image pull failing for 600 s)',
        finished: true,
      },
    ],
    [
      'an invalid image name: Failed at once',
      runningView,
      health([pod('p0', waiting('InvalidImageName', 'invalid reference format'))]),
      undefined,
      {
        phase: 'Failed',
        reason: 'ImagePullFailed',
        message: 'pod p0: InvalidImageName: invalid reference format',
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
    const after = withPodHealth(before, health([pod('p0', waiting('ErrImagePull', 'denied'))], T0), job);
    expect(after.phase).toBe('Failed');
  });
});

describe('withPodHealth: repeated PodsReadyTimeout evictions fail the run', () => {
  const evicted = (requeues?: number, reason = 'PodsReadyTimeout'): JobView => ({
    phase: 'Pending',
    reason,
    message: 'Kueue evicted the job',
    admission: {
      state: 'Evicted',
      source: 'kueue',
      reason,
      message: 'Exceeded the PodsReady timeout team-a/run-a',
      ...(requeues === undefined ? {} : { requeues }),
    },
    finished: false,
  });
  it.each<[string, JobView, number, Partial<JobView>]>([
    ['first eviction: Pending, requeued', evicted(1), 3, { phase: 'Pending', reason: 'PodsReadyTimeout' }],
    ['second eviction: Pending', evicted(2), 3, { phase: 'Pending', reason: 'PodsReadyTimeout' }],
    [
      'third eviction at a limit of 3: Failed',
      evicted(3),
      3,
      { phase: 'Failed', reason: 'PodsReadyTimeout', finished: true },
    ],
    ['a limit of 1 fails the first', evicted(1), 1, { phase: 'Failed', reason: 'PodsReadyTimeout' }],
    ['no count on the Workload: Pending', evicted(undefined), 1, { phase: 'Pending' }],
    ['another eviction reason is not counted', evicted(5, 'ClusterQueueStopped'), 1, { phase: 'Pending' }],
  ])('%s', (_name, view, limit, expected) => {
    expect(withPodHealth(view, undefined, undefined, { podsReadyTimeoutLimit: limit })).toMatchObject(
      expected,
    );
  });

  it('names waitForPodsReady, the initializers and the count; decide fails it with PodStartFailedError', () => {
    const failed = withPodHealth(evicted(3), health([]), undefined, DEFAULT_POD_HEALTH);
    expect(failed.message).toMatch(
      /^Kueue evicted the job 3 times because its pods were not all ready within waitForPodsReady's timeout \(Gantry gives up after 3\): the dataset\/model initializer pods are slow/,
    );
    expect(failed.message).toContain('(Exceeded the PodsReady timeout team-a/run-a)');
    expect(decide('completion', failed)).toMatchObject({
      kind: 'fail',
      error: 'PodStartFailedError',
      reason: 'PodsReadyTimeout',
    });
  });
});

describe('decide and failureOf with pod problems', () => {
  it.each([
    ['ImagePullFailed', 'PodStartFailedError'],
    ['ContainerConfigError', 'PodStartFailedError'],
    ['CrashLoopBackOff', 'PodStartFailedError'],
    ['Unschedulable', 'UnschedulableError'],
    ['PodsReadyTimeout', 'PodStartFailedError'],
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
