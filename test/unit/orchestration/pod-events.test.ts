import { describe, expect, it } from 'vitest';
import { ClusterAccessDeniedError, ClusterUnavailableError, NotFoundError } from '../../../lib/errors.ts';
import { withDisruptionEvidence } from '../../../lib/orchestration/pod-events.ts';
import type { JobView } from '../../../lib/trainjob/status.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

const failed: JobView = {
  phase: 'Failed',
  reason: 'TrainingFailed',
  message: 'jobset failed due to one or more job failures',
  admission: { state: 'Admitted', source: 'kueue' },
  finished: true,
};
const job = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: { name: 'run1', namespace: 'demo', creationTimestamp: '2026-01-01T00:00:00Z' },
} as K8sObject;
const taintEviction = {
  involvedObject: { kind: 'Pod', name: 'run1-node-0-0-abcde', namespace: 'demo' },
  reason: 'TaintManagerEviction',
  message: 'Marking for deletion Pod demo/run1-node-0-0-abcde',
  lastTimestamp: '2026-01-01T00:01:00Z',
} as unknown as K8sObject;

/** A gateway whose listPodEvents answers `answer` (or throws it) and counts its calls. */
function gateway(answer: K8sObject[] | Error) {
  const calls: string[] = [];
  return {
    calls,
    listPodEvents: async (namespace: string) => {
      calls.push(namespace);
      if (answer instanceof Error) throw answer;
      return answer;
    },
  };
}

describe('withDisruptionEvidence: the Events of a failed job whose disrupted pods are gone', () => {
  it('reads the namespace Events of a TrainingFailed job with no disrupted pod: NodeLost', async () => {
    const gw = gateway([taintEviction]);
    const view = await withDisruptionEvidence(gw, failed, [], job);
    expect(view.reason).toBe('NodeLost');
    expect(view.message).toMatch(
      /^pod run1-node-0-0-abcde: Event TaintManagerEviction: Marking for deletion/,
    );
    expect(gw.calls).toEqual(['demo']);
  });

  it.each<[string, JobView]>([
    [
      'a running job',
      { phase: 'Running', admission: { state: 'Admitted', source: 'kueue' }, finished: false },
    ],
    ['a deadline', { ...failed, reason: 'DeadlineExceeded' }],
    [
      'a succeeded job',
      { phase: 'Succeeded', admission: { state: 'Admitted', source: 'kueue' }, finished: true },
    ],
  ])('does not list Events for %s', async (_, view) => {
    const gw = gateway([taintEviction]);
    expect(await withDisruptionEvidence(gw, view, [], job)).toBe(view);
    expect(gw.calls).toEqual([]);
  });

  it('does not list Events when a pod shows the disruption', async () => {
    const gw = gateway([taintEviction]);
    const pod = {
      metadata: { name: 'p0' },
      status: { conditions: [{ type: 'DisruptionTarget', status: 'True', reason: 'PreemptionByScheduler' }] },
    };
    expect((await withDisruptionEvidence(gw, failed, [pod], job)).reason).toBe('Preempted');
    expect(gw.calls).toEqual([]);
  });

  it.each<[string, Error]>([
    ['RBAC without list on events', new ClusterAccessDeniedError('events is forbidden')],
    ['a namespace that is gone', new NotFoundError('namespaces "demo" not found')],
  ])('judges by the pods alone after %s', async (_, err) => {
    expect((await withDisruptionEvidence(gateway(err), failed, [], job)).reason).toBe('TrainingFailed');
  });

  it('lets a cluster that is down be retried (the failure is not decided without the Events)', async () => {
    await expect(
      withDisruptionEvidence(gateway(new ClusterUnavailableError('503')), failed, [], job),
    ).rejects.toBeInstanceOf(ClusterUnavailableError);
  });

  it('a gateway without the call judges by the pods', async () => {
    expect((await withDisruptionEvidence({}, failed, [], job)).reason).toBe('TrainingFailed');
  });
});
