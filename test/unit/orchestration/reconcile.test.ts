import { describe, expect, it } from 'vitest';
import { NotFoundError } from '../../../lib/errors.ts';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { LABEL } from '../../../lib/trainjob/labels.ts';
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

function setup(update: RunRecords['update']) {
  const calls: string[] = [];
  const unused = () => Promise.reject(new Error('not expected'));
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: async () => [],
    listManagedJobs: async () => [job],
    deleteJob: async () => {
      calls.push('deleteJob');
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
    create: unused,
    update: async (...args: Parameters<RunRecords['update']>) => {
      calls.push(`update ${JSON.stringify(args[1])}`);
      return update(...args);
    },
  } as unknown as RunRecords;
  const reconciler = makeReconciler({
    clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
    workflow,
    records,
    clock: { now: () => new Date('2026-01-02T00:00:00Z') },
  });
  return { reconciler, calls };
}

describe('reconciler: a job whose execution was stopped', () => {
  it('marks the run Cancelled before it deletes the job', async () => {
    // Prepare
    const { reconciler, calls } = setup(async () => ({}) as never);
    // Act
    const report = await reconciler.tick();
    // Assess
    expect(calls).toEqual(['update {"phase":"Cancelled","reason":"Cancelled"}', 'deleteJob']);
    expect(report).toMatchObject({ cancelled: 1, orphansDeleted: 1, errors: 0 });
  });

  it('keeps the job when the record cannot be written, so the next tick tries again', async () => {
    // Prepare
    const { reconciler, calls } = setup(async () => {
      throw new Error('S3 unavailable');
    });
    // Act
    const report = await reconciler.tick();
    // Assess
    expect(calls).toEqual(['update {"phase":"Cancelled","reason":"Cancelled"}']);
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
    expect(calls).toEqual(['update {"phase":"Cancelled","reason":"Cancelled"}', 'deleteJob']);
    expect(report).toMatchObject({ orphansDeleted: 1, errors: 0 });
  });
});
