import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../../../lib/errors.ts';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * The reconciler's cleanup of a job whose execution was stopped (ABORTED), with object-literal
 * fakes: the order of the record write and the delete is what is under test (the real-apiserver
 * integration tests cover the same path end to end).
 */
const API = {
  group: 'trainer.kubeflow.org',
  version: 'v1alpha1',
  plural: 'trainjobs',
  kind: 'TrainJob',
} as JobApi;
const RUN_ID = 'run-aaaaaaaaaaaaaaaaaaaa';
const job: K8sObject = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: {
    name: RUN_ID,
    namespace: 'team-a',
    uid: 'u1',
    creationTimestamp: '2026-01-01T00:00:00Z',
    labels: { [LABEL.runId]: RUN_ID },
  },
};

function setup(
  update: RunRecords['update'],
  deleteJob: () => Promise<void> = async () => {},
  listed: K8sObject = job,
) {
  const calls: string[] = [];
  let deleted = false;
  const unused = () => Promise.reject(new Error('not expected'));
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: async () => [],
    // The job is listed until a delete goes through.
    listManagedJobs: async () => (deleted ? [] : [listed]),
    deleteJob: async () => {
      calls.push('deleteJob');
      await deleteJob();
      deleted = true;
    },
  } as unknown as ClusterGateway;
  const workflow = {
    status: async () => 'ABORTED',
    sendTaskSuccess: unused,
    sendTaskFailure: unused,
    sendTaskHeartbeat: unused,
  } as unknown as WorkflowEngine;
  const records = {
    get: async () => undefined,
    getMany: async () => new Map(),
    create: unused,
    update: async (...args: Parameters<RunRecords['update']>) => {
      calls.push(`update ${JSON.stringify(args[1])}`);
      return update(...args);
    },
  } as unknown as RunRecords;
  const clock = { at: Date.parse('2026-01-02T00:00:00Z') };
  const reconciler = makeReconciler({
    clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
    workflow,
    records,
    clock: { now: () => new Date(clock.at) },
  });
  return { reconciler, calls, clock };
}

const CANCELLING = 'update {"phase":"Cancelling","reason":"Cancelled"}';
const CANCELLED = 'update {"phase":"Cancelled","reason":"Cancelled"}';

describe('reconciler: a job whose execution was stopped', () => {
  it('marks the run Cancelling before it deletes the job, and Cancelled once the job is deleted', async () => {
    // Prepare
    const { reconciler, calls } = setup(async () => ({}) as never);
    // Act
    const report = await reconciler.tick();
    // Assess
    expect(calls).toEqual([CANCELLING, 'deleteJob', CANCELLED]);
    expect(report).toMatchObject({ cancelled: 1, orphansDeleted: 1, errors: 0 });
  });

  it('retries a failed delete with back-off, the run Cancelling meanwhile, not at every pass', async () => {
    // Prepare: the cluster refuses the first three deletes.
    let refusals = 3;
    const { reconciler, calls, clock } = setup(
      async () => ({}) as never,
      async () => {
        if (refusals-- > 0) throw new Error('503 Service Unavailable');
      },
    );
    const deletes = () => calls.filter((c) => c === 'deleteJob').length;
    // Act: passes every 200 ms for 10 s.
    const at: number[] = [];
    for (let ms = 0; ms <= 10_000; ms += 200) {
      const before = deletes();
      await reconciler.tick();
      if (deletes() > before) at.push(ms);
      clock.at += 200;
    }
    // Assess: 1 s, 2 s, 4 s apart (DELETE_BACKOFF), not 50 tries; Cancelled only after the delete.
    expect(at).toEqual([0, 1000, 3000, 7000]);
    expect(calls.filter((c) => c === CANCELLED)).toHaveLength(1);
    expect(calls.at(-1)).toBe(CANCELLED);
    expect(calls.at(-2)).toBe('deleteJob');
  });

  it('keeps the job when the record cannot be written, so the next tick tries again', async () => {
    // Prepare
    const { reconciler, calls } = setup(async () => {
      throw new Error('S3 unavailable');
    });
    // Act
    const report = await reconciler.tick();
    // Assess
    expect(calls).toEqual([CANCELLING]);
    expect(report).toMatchObject({ cancelled: 0, orphansDeleted: 0, errors: 1 });
  });

  it('still deletes a job that has no run record', async () => {
    // Prepare
    const { reconciler, calls } = setup(async () => {
      throw new NotFoundError(`run ${RUN_ID} has no record`);
    });
    // Act
    const report = await reconciler.tick();
    // Assess
    expect(calls).toEqual([CANCELLING, 'deleteJob', CANCELLED]);
    expect(report).toMatchObject({ orphansDeleted: 1, errors: 0 });
  });

  it("deletes an evaluation job left by a stopped execution, leaving the run's record alone", async () => {
    // Prepare: the run's execution was stopped while it scored its candidate (steps/evaluate.ts).
    const evaluation: K8sObject = {
      ...job,
      metadata: { ...job.metadata, name: `${RUN_ID}-ev2`, labels: { [LABEL.evaluationOf]: RUN_ID } },
    };
    const { reconciler, calls } = setup(async () => ({}) as never, undefined, evaluation);
    // Act
    const report = await reconciler.tick();
    // Assess
    expect(calls).toEqual(['deleteJob']);
    expect(report).toMatchObject({ cancelled: 0, orphansDeleted: 1, errors: 0 });
  });
});

describe('reconciler: Kueue preemption and a stalled admission', () => {
  const NOW = new Date('2026-01-02T00:10:00Z');
  const suspendedJob = (token: string): K8sObject => ({
    ...job,
    metadata: { ...job.metadata, annotations: { [ANNOTATION.completionToken]: token } },
    spec: { suspend: true },
    status: { conditions: [{ type: 'Suspended', status: 'True', reason: 'Suspended' }] },
  });
  const gate = (conditions: Array<Record<string, string>>): K8sObject => ({
    apiVersion: 'kueue.x-k8s.io/v1beta2',
    kind: 'Workload',
    metadata: { name: 'wl', namespace: 'team-a', ownerReferences: [{ uid: 'u1' } as never] },
    status: { conditions },
  });

  function run(jobObj: K8sObject, gateObj: K8sObject, grace?: number) {
    const calls: string[] = [];
    const gateway = {
      listAdmissionGates: async () => [gateObj],
      listManagedJobs: async () => [jobObj],
      listPods: async () => [],
      annotateJob: async () => {
        calls.push('annotateJob');
      },
    } as unknown as ClusterGateway;
    const workflow = {
      sendTaskSuccess: async () => {
        calls.push('success');
        return true;
      },
      sendTaskFailure: async (_t: string, error: string) => {
        calls.push(`failure ${error}`);
        return true;
      },
      sendTaskHeartbeat: async () => {
        calls.push('heartbeat');
        return true;
      },
    } as unknown as WorkflowEngine;
    const records = {
      getMany: async (ids: string[]) =>
        new Map(ids.map((id) => [id, { value: { updatedAt: 'a' }, version: '1' }])),
      updateFrom: async (_read: unknown, change: unknown) => {
        calls.push(`update ${JSON.stringify(change)}`);
        return { record: { updatedAt: 'b' }, changed: true };
      },
    } as unknown as RunRecords;
    const reconciler = makeReconciler({
      clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
      workflow,
      records,
      clock: { now: () => NOW },
      ...(grace === undefined ? {} : { admittedSuspendedGraceSeconds: grace }),
    });
    return { tick: () => reconciler.tick(), calls };
  }

  it('a preempted job heartbeats its completion token and moves the record to Pending/Preempted', async () => {
    // Prepare
    const message =
      'Preempted to accommodate a workload (UID: x, JobUID: y) due to prioritization in the ClusterQueue';
    const { tick, calls } = run(
      suspendedJob('tok'),
      gate([
        { type: 'Evicted', status: 'True', reason: 'Preempted', message },
        { type: 'Requeued', status: 'True', reason: 'Preempted', message },
        { type: 'QuotaReserved', status: 'False', reason: 'Pending', message },
      ]),
    );
    // Act
    await tick();
    // Assess: the record first, then the heartbeat (heartbeats go out after a pass's writes)
    expect(calls[0]).toMatch(/^update /);
    expect(calls[1]).toBe('heartbeat');
    expect(JSON.parse(calls[0]!.slice('update '.length))).toMatchObject({
      phase: 'Pending',
      reason: 'Preempted',
      message,
      admission: { state: 'Evicted', reason: 'Preempted' },
    });
  });

  it.each([
    [30, 'failure AdmissionStalledError'],
    [undefined, 'heartbeat'], // default grace 120 s: 60 s is within it
  ])('a job suspended 60 s after Kueue admitted it, grace %s → %s', async (grace, first) => {
    // Prepare
    const admittedAt = new Date(NOW.getTime() - 60_000).toISOString();
    const { tick, calls } = run(
      suspendedJob('tok'),
      gate([
        { type: 'QuotaReserved', status: 'True', reason: 'QuotaReserved', lastTransitionTime: admittedAt },
        { type: 'Admitted', status: 'True', reason: 'Admitted', lastTransitionTime: admittedAt },
      ]),
      grace,
    );
    // Act
    await tick();
    // Assess: an answer goes out before the record write; a heartbeat after it
    expect(calls.filter((c) => !c.startsWith('update '))[0]).toBe(first);
    if (first === 'heartbeat') expect(calls.at(-1)).toBe('heartbeat');
  });
});
