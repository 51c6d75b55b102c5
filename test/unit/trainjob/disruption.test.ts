import { describe, expect, it } from 'vitest';
import { decide } from '../../../lib/orchestration/decide.ts';
import {
  attemptOf,
  eventDisruption,
  needsEvents,
  podDisruption,
  withDisruption,
} from '../../../lib/trainjob/disruption.ts';
import type { JobView } from '../../../lib/trainjob/status.ts';

const pod = (
  name: string,
  status: Record<string, unknown>,
  labels: Record<string, string> = {},
  node = 'node-a',
) => ({ metadata: { name, labels }, spec: { nodeName: node }, status });

const disrupted = (reason: string, message = 'm') => ({
  phase: 'Running',
  conditions: [
    { type: 'Ready', status: 'True' },
    { type: 'DisruptionTarget', status: 'True', reason, message },
  ],
});

const failedView: JobView = {
  phase: 'Failed',
  reason: 'TrainingFailed',
  message: 'jobset failed due to one or more job failures',
  admission: { state: 'Admitted', source: 'kueue' },
  finished: true,
};

describe('podDisruption: what the pods of a failed job say about the infrastructure', () => {
  it.each<[string, unknown[], string | undefined]>([
    ['no pods', [], undefined],
    ['pods that failed on their own (exit code)', [pod('p0', { phase: 'Failed' })], undefined],
    ['taint manager (NotReady node)', [pod('p0', disrupted('DeletionByTaintManager'))], 'NodeLost'],
    ['pod GC (node deleted)', [pod('p0', disrupted('DeletionByPodGC'))], 'NodeLost'],
    ['scheduler preemption', [pod('p0', disrupted('PreemptionByScheduler'))], 'Preempted'],
    ['scheduler preemption, pre-1.27 name', [pod('p0', disrupted('PreemptionByKubeScheduler'))], 'Preempted'],
    ['Eviction API (drain, spot handler)', [pod('p0', disrupted('EvictionByEvictionAPI'))], 'Evicted'],
    ['kubelet (node pressure, shutdown)', [pod('p0', disrupted('TerminationByKubelet'))], 'Evicted'],
    ['an unknown DisruptionTarget reason', [pod('p0', disrupted('SomethingNew'))], 'Evicted'],
    [
      'status.reason Evicted (kubelet eviction)',
      [pod('p0', { phase: 'Failed', reason: 'Evicted' })],
      'Evicted',
    ],
    ['status.reason NodeLost', [pod('p0', { phase: 'Running', reason: 'NodeLost' })], 'NodeLost'],
    [
      'status.reason Terminated (graceful node shutdown)',
      [pod('p0', { phase: 'Failed', reason: 'Terminated' })],
      'Evicted',
    ],
    [
      'status.reason Preempting (kubelet)',
      [pod('p0', { phase: 'Failed', reason: 'Preempting' })],
      'Preempted',
    ],
    [
      'DisruptionTarget False is no disruption',
      [pod('p0', { phase: 'Failed', conditions: [{ type: 'DisruptionTarget', status: 'False' }] })],
      undefined,
    ],
    [
      'a lost node explains an eviction of its neighbour',
      [pod('p0', disrupted('EvictionByEvictionAPI')), pod('p1', disrupted('DeletionByTaintManager'))],
      'NodeLost',
    ],
    [
      'malformed pods are skipped',
      [null, 'x', { metadata: {} }, pod('p0', disrupted('DeletionByPodGC'))],
      'NodeLost',
    ],
  ])('%s → %s', (_, pods, reason) => {
    expect(podDisruption(pods)?.reason).toBe(reason);
  });

  it('names the pod, its node and the condition in the message', () => {
    expect(
      podDisruption([pod('p0', disrupted('DeletionByTaintManager', 'Taint manager: deleting'))]),
    ).toEqual({
      reason: 'NodeLost',
      message: 'pod p0 on node node-a: DeletionByTaintManager: Taint manager: deleting',
    });
  });

  it("reads only the pods of the job's attempt: a pod of an earlier attempt may linger Terminating", () => {
    const old = pod('old', disrupted('DeletionByTaintManager'));
    const mine = pod('new', { phase: 'Failed' }, { 'gantry.dev/attempt': '2' });
    expect(podDisruption([old, mine], 2)).toBeUndefined();
    expect(podDisruption([old, mine], 1)?.reason).toBe('NodeLost');
    expect(attemptOf(mine)).toBe(2);
    expect(attemptOf(old)).toBe(1);
    expect(attemptOf({ metadata: { labels: { 'gantry.dev/attempt': 'x' } } })).toBe(1);
  });
});

describe('withDisruption and decide: an infrastructure failure is InfrastructureFailureError, a code failure is not', () => {
  it.each<[string, JobView, unknown[], string, string]>([
    [
      'node lost',
      failedView,
      [pod('p0', disrupted('DeletionByTaintManager'))],
      'InfrastructureFailureError',
      'NodeLost',
    ],
    [
      'preempted, no requeue',
      failedView,
      [pod('p0', disrupted('PreemptionByScheduler'))],
      'InfrastructureFailureError',
      'Preempted',
    ],
    [
      'evicted',
      failedView,
      [pod('p0', disrupted('EvictionByEvictionAPI'))],
      'InfrastructureFailureError',
      'Evicted',
    ],
    ['non-zero exit', failedView, [pod('p0', { phase: 'Failed' })], 'TrainingFailedError', 'TrainingFailed'],
    [
      'a deadline is not made an infrastructure failure by a disrupted pod',
      { ...failedView, reason: 'DeadlineExceeded' },
      [pod('p0', disrupted('DeletionByTaintManager'))],
      'TrainingFailedError',
      'DeadlineExceeded',
    ],
  ])('%s', (_, view, pods, error, reason) => {
    const decision = decide('completion', withDisruption(view, pods, {}));
    expect(decision).toMatchObject({ kind: 'fail', error, reason });
  });

  it('leaves a running job alone, whatever its pods say (Kueue may requeue it; the job decides)', () => {
    const running: JobView = {
      phase: 'Running',
      admission: { state: 'Admitted', source: 'kueue' },
      finished: false,
    };
    expect(withDisruption(running, [pod('p0', disrupted('DeletionByTaintManager'))])).toBe(running);
    expect(withDisruption(failedView, undefined)).toBe(failedView);
  });
});

/** A core/v1 Event about a pod, as the controllers write them. */
const event = (pod: string, reason: string, message: string, at = '2026-01-01T00:01:00Z', kind = 'Pod') => ({
  involvedObject: { kind, name: pod, namespace: 'demo' },
  reason,
  message,
  lastTimestamp: at,
});
const JOB = 'run1';
const POD = 'run1-node-0-0-abcde';

describe('eventDisruption: the Events on the pods of a failed job whose pods are gone', () => {
  it.each<[string, unknown[], string | undefined]>([
    ['no events', [], undefined],
    [
      'taint-eviction controller (kube-controller-manager)',
      [event(POD, 'TaintManagerEviction', `Marking for deletion Pod demo/${POD}`)],
      'NodeLost',
    ],
    [
      'taint-eviction cancelled later (the taint went in time)',
      [
        event(POD, 'TaintManagerEviction', `Marking for deletion Pod demo/${POD}`),
        event(POD, 'TaintManagerEviction', `Cancelling deletion of Pod demo/${POD}`, '2026-01-01T00:02:00Z'),
      ],
      undefined,
    ],
    [
      'kube-scheduler preemption',
      [event(POD, 'Preempted', 'Preempted by pod 1b2c3d4e-0000-4000-8000-000000000000 on node kwok-gpu-0')],
      'Preempted',
    ],
    [
      'kubelet critical pod admission',
      [event(POD, 'Preempting', 'Preempted in order to admit critical pod')],
      'Preempted',
    ],
    [
      'kubelet node-pressure eviction',
      [event(POD, 'Evicted', 'The node was low on resource: memory.')],
      'Evicted',
    ],
    [
      'events of no disruption',
      [event(POD, 'Killing', 'Stopping container node'), event(POD, 'Scheduled', 'x')],
      undefined,
    ],
    [
      "another job's pod",
      [
        event(
          'run10-node-0-0-abcde',
          'TaintManagerEviction',
          'Marking for deletion Pod demo/run10-node-0-0-abcde',
        ),
      ],
      undefined,
    ],
    [
      "a later attempt's pod",
      [event('run1-a2-node-0-0-abcde', 'Preempted', 'Preempted by pod u on node n')],
      undefined,
    ],
    [
      'an event about something else than a pod',
      [event(POD, 'Preempted', 'Preempted to accommodate a workload', undefined, 'Workload')],
      undefined,
    ],
    [
      'from before the job was created',
      [event(POD, 'TaintManagerEviction', 'Marking for deletion Pod demo/x', '2025-12-31T23:00:00Z')],
      undefined,
    ],
    [
      'a lost node explains a preemption',
      [
        event(POD, 'Preempted', 'Preempted by pod u on node n'),
        event(
          'run1-node-0-1-fghij',
          'TaintManagerEviction',
          'Marking for deletion Pod demo/run1-node-0-1-fghij',
        ),
      ],
      'NodeLost',
    ],
    ['malformed events are skipped', [null, 'x', {}, { involvedObject: { kind: 'Pod' } }], undefined],
  ])('%s → %s', (_, events, reason) => {
    expect(eventDisruption(events, JOB, '2026-01-01T00:00:00Z')?.reason).toBe(reason);
  });

  it('names the pod, the Event reason and its message', () => {
    expect(
      eventDisruption([event(POD, 'TaintManagerEviction', `Marking for deletion Pod demo/${POD}`)], JOB),
    ).toEqual({
      reason: 'NodeLost',
      message: `pod ${POD}: Event TaintManagerEviction: Marking for deletion Pod demo/${POD}`,
    });
  });

  it('reads the events.k8s.io/v1 shape too (regarding, eventTime)', () => {
    const ev = {
      regarding: { kind: 'Pod', name: POD },
      reason: 'Preempted',
      note: 'n',
      eventTime: '2026-01-01T00:01:00Z',
    };
    expect(eventDisruption([ev], JOB, '2026-01-01T00:00:00Z')?.reason).toBe('Preempted');
  });
});

describe('withDisruption with Events: a failed job whose disrupted pods are gone', () => {
  const job = { metadata: { name: JOB, creationTimestamp: '2026-01-01T00:00:00Z' } };
  const lost = [event(POD, 'TaintManagerEviction', `Marking for deletion Pod demo/${POD}`)];

  it.each<[string, JobView, unknown[] | undefined, unknown[] | undefined, string]>([
    ['no pods left, the taint-eviction Event → NodeLost', failedView, [], lost, 'NodeLost'],
    ['pods not listed (RBAC), the Event still counts', failedView, undefined, lost, 'NodeLost'],
    [
      'the pod condition wins over the Events',
      failedView,
      [pod('p0', disrupted('PreemptionByScheduler'))],
      lost,
      'Preempted',
    ],
    ['no Events about the job → TrainingFailed', failedView, [], [], 'TrainingFailed'],
    ['Events not read → TrainingFailed', failedView, [], undefined, 'TrainingFailed'],
    [
      'a deadline stays a deadline',
      { ...failedView, reason: 'DeadlineExceeded' },
      [],
      lost,
      'DeadlineExceeded',
    ],
  ])('%s', (_, view, pods, events, reason) => {
    expect(withDisruption(view, pods, job, events).reason).toBe(reason);
  });

  it.each<[string, JobView, unknown[] | undefined, boolean]>([
    ['failed, no pods', failedView, [], true],
    ['failed, pods not listed', failedView, undefined, true],
    ['failed, a disrupted pod in sight', failedView, [pod('p0', disrupted('DeletionByTaintManager'))], false],
    ['failed by a deadline', { ...failedView, reason: 'DeadlineExceeded' }, [], false],
    [
      "failed, a pod's code exited 1 (an earlier disrupted pod was replaced): the code failed",
      failedView,
      [
        pod('p1', {
          phase: 'Failed',
          containerStatuses: [{ name: 'node', state: { terminated: { exitCode: 1, reason: 'Error' } } }],
        }),
      ],
      false,
    ],
    [
      'failed, a pod Failed with exit 0 and no disruption in sight: the Events may say',
      failedView,
      [
        pod('p1', {
          phase: 'Failed',
          containerStatuses: [{ name: 'node', state: { terminated: { exitCode: 0 } } }],
        }),
      ],
      true,
    ],
    [
      'running',
      { phase: 'Running', admission: { state: 'Admitted', source: 'kueue' }, finished: false },
      [],
      false,
    ],
  ])('needsEvents: %s → %s', (_, view, pods, want) => {
    expect(needsEvents(view, pods, job)).toBe(want);
  });
});
