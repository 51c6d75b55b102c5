import { describe, expect, it } from 'vitest';
import { ClusterAccessDeniedError, ClusterUnavailableError } from '../../../lib/errors.ts';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RecordChange } from '../../../lib/run/record.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { ANNOTATION, LABEL, MANAGED_SELECTOR } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * The reconciler's pod LIST (health after admission), with object-literal fakes: one LIST per
 * cluster per tick by Gantry's label, a pod problem fails the waiting token, and a cluster that
 * does not let Gantry list pods is reconciled from the jobs alone.
 */
const API = {
  group: 'trainer.kubeflow.org',
  version: 'v1alpha1',
  plural: 'trainjobs',
  kind: 'TrainJob',
} as JobApi;
const RUN_ID = 'run-bbbbbbbbbbbbbbbbbbbb';
/** An admitted (unsuspended) TrainJob waiting for its admission answer. */
const job: K8sObject = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: {
    name: RUN_ID,
    namespace: 'team-a',
    uid: 'u1',
    creationTimestamp: '2026-01-01T00:00:00Z',
    labels: { [LABEL.runId]: RUN_ID },
    annotations: { [ANNOTATION.admissionToken]: 'tok' },
  },
  spec: { suspend: false },
  status: { conditions: [{ type: 'Suspended', status: 'False', reason: 'Resumed' }] },
} as K8sObject;
const pullFailure = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: `${RUN_ID}-node-0-0-abcde`, namespace: 'team-a', labels: { [LABEL.runId]: RUN_ID } },
  status: {
    phase: 'Pending',
    containerStatuses: [{ name: 'node', state: { waiting: { reason: 'ErrImagePull', message: 'denied' } } }],
  },
};

function setup(listPods: ClusterGateway['listPods']) {
  const calls: string[] = [];
  const selectors: string[] = [];
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: (selector: string) => {
      selectors.push(selector);
      return listPods(selector);
    },
    listManagedJobs: async () => [job],
    annotateJob: async () => {
      calls.push('annotateJob');
      return job;
    },
  } as unknown as ClusterGateway;
  const workflow = {
    sendTaskSuccess: async () => {
      calls.push('success');
      return true;
    },
    sendTaskFailure: async (_t: string, error: string, cause: string) => {
      calls.push(`failure ${error} ${cause}`);
      return true;
    },
    sendTaskHeartbeat: async () => {
      calls.push('heartbeat');
      return true;
    },
  } as unknown as WorkflowEngine;
  const changes: RecordChange[] = [];
  const records = {
    getMany: async (ids: string[]) =>
      new Map(ids.map((id) => [id, { value: { runId: id, updatedAt: 'a' }, version: '1' }])),
    updateFrom: async (_read: unknown, change: RecordChange) => {
      changes.push(change);
      return { record: { runId: RUN_ID, updatedAt: 'b' }, changed: true };
    },
  } as unknown as RunRecords;
  const reconciler = makeReconciler({
    clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
    workflow,
    records,
    clock: { now: () => new Date('2026-01-01T00:01:00Z') },
  });
  return { reconciler, calls, selectors, changes };
}

describe('reconciler: health after admission', () => {
  it('lists Gantry pods once per tick and fails a run whose image name is invalid', async () => {
    const invalid = {
      ...pullFailure,
      status: {
        phase: 'Pending',
        containerStatuses: [
          {
            name: 'node',
            state: { waiting: { reason: 'InvalidImageName', message: 'invalid reference format' } },
          },
        ],
      },
    };
    const { reconciler, calls, selectors, changes } = setup(async () => [invalid as never]);
    const report = await reconciler.tick();
    expect(selectors).toEqual([MANAGED_SELECTOR]);
    expect(calls[0]).toBe(
      `failure PodStartFailedError ${JSON.stringify({ reason: 'ImagePullFailed', message: `pod ${RUN_ID}-node-0-0-abcde: InvalidImageName: invalid reference format` })}`,
    );
    expect(report).toMatchObject({ failed: 1, answered: 0, errors: 0 });
    expect(changes[0]?.admission).toMatchObject({ reason: 'ImagePullFailed' });
  });

  it('keeps a run whose pull fails waiting within the grace, and keeps the first sighting on the job', async () => {
    const { reconciler, calls, changes } = setup(async () => [pullFailure as never]);
    const report = await reconciler.tick();
    expect(calls).toContain('annotateJob');
    expect(calls.some((c) => c.startsWith('failure'))).toBe(false);
    expect(report).toMatchObject({ failed: 0, errors: 0 });
    expect(changes[0]?.admission).toMatchObject({
      reason: 'ImagePullFailed',
      message: `image pull failing for 0 s: pod ${RUN_ID}-node-0-0-abcde: ErrImagePull: denied; Gantry gives up after 600 s`,
    });
  });

  it('keeps an admitted job without a running pod waiting (no jobsStatus, no pods: the job decides)', async () => {
    const { reconciler, calls } = setup(async () => [
      { ...pullFailure, status: { phase: 'Pending', containerStatuses: [] } } as never,
    ]);
    await reconciler.tick();
    expect(calls).toEqual(['heartbeat']);
  });

  it('reconciles from the jobs alone when RBAC does not allow listing pods', async () => {
    const { reconciler, calls } = setup(async () => {
      throw new ClusterAccessDeniedError('pods is forbidden');
    });
    const report = await reconciler.tick();
    expect(calls[0]).toBe('success');
    expect(report.errors).toBe(0);
  });

  it('treats a failed pod LIST like an unreachable cluster: nothing is answered this tick', async () => {
    const { reconciler, calls } = setup(async () => {
      throw new ClusterUnavailableError('503');
    });
    const report = await reconciler.tick();
    expect(calls).toEqual([]);
    expect(report.errors).toBe(1);
  });
});
