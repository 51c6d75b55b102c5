import { describe, expect, it } from 'vitest';
import { decide } from '../../../lib/orchestration/decide.ts';
import { attemptOf, podDisruption, withDisruption } from '../../../lib/trainjob/disruption.ts';
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
