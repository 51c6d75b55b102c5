import { describe, expect, it } from 'vitest';
import { ClusterAccessDeniedError } from '../../../lib/errors.ts';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * Kubernetes Events for what the reconciler decides about a job (object-literal fakes): one per
 * answered wait, failure, preemption recorded and orphan deleted; none for a heartbeat; and an
 * Event that cannot be created changes nothing else.
 */
const API = {
  group: 'trainer.kubeflow.org',
  version: 'v1alpha1',
  plural: 'trainjobs',
  kind: 'TrainJob',
} as JobApi;
const RUN = 'run-aaaaaaaaaaaaaaaaaaaa';
const NOW = new Date('2026-01-02T00:10:00Z');

function aJob(annotations: Record<string, string>, status: Record<string, unknown>, spec = {}): K8sObject {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: RUN,
      namespace: 'team-a',
      uid: 'u1',
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { [LABEL.runId]: RUN },
      annotations,
    },
    spec,
    status,
  };
}
const running = { conditions: [] };
const failed = {
  conditions: [{ type: 'Failed', status: 'True', reason: 'TrainingFailed', message: 'exit 1' }],
};

function setup(
  job: K8sObject,
  opts: {
    gates?: K8sObject[];
    createEvent?: (e: K8sObject) => Promise<void>;
    status?: string;
    /** The run record's phase before the tick. */
    phase?: string;
  } = {},
) {
  const calls: string[] = [];
  const events: K8sObject[] = [];
  const gateway = {
    listAdmissionGates: async () => opts.gates ?? [],
    listPods: async () => [],
    listManagedJobs: async () => [job],
    annotateJob: async () => {
      calls.push('annotateJob');
    },
    deleteJob: async () => {
      calls.push('deleteJob');
    },
    createEvent:
      opts.createEvent ??
      (async (e: K8sObject) => {
        calls.push(`event ${(e as unknown as { reason: string }).reason}`);
        events.push(e);
      }),
  } as unknown as ClusterGateway;
  const workflow = {
    status: async () => opts.status ?? 'SUCCEEDED',
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
    update: async () => ({}),
    getMany: async (ids: string[]) =>
      new Map(
        ids.map((id) => [id, { value: { phase: opts.phase ?? 'Running', updatedAt: 'a' }, version: '1' }]),
      ),
    updateFrom: async (_read: unknown, change: { phase?: string }) => ({
      record: { phase: change.phase ?? opts.phase ?? 'Running' },
      changed: true,
    }),
  } as unknown as RunRecords;
  const reconciler = makeReconciler({
    clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
    workflow,
    records,
    clock: { now: () => NOW },
  });
  return { tick: () => reconciler.tick(), calls, events };
}

describe('reconciler: Kubernetes Events on the job', () => {
  it.each([
    [
      'an admission answered',
      aJob({ [ANNOTATION.admissionToken]: 't' }, running),
      ['success', 'event RunAdmitted', 'annotateJob'],
    ],
    [
      'a failure, under the run’s failure reason',
      aJob({ [ANNOTATION.completionToken]: 't' }, failed),
      ['failure TrainingFailedError', 'event TrainingFailed', 'annotateJob'],
    ],
    [
      'a heartbeat: no event',
      aJob({ [ANNOTATION.admissionToken]: 't' }, running, { suspend: true }),
      ['heartbeat'],
    ],
    ['an orphan deleted', aJob({}, running), ['event OrphanDeleted', 'deleteJob']],
  ])('%s', async (_name, job, want) => {
    const { tick, calls } = setup(job);
    const report = await tick();
    expect(calls).toEqual(want);
    expect(report.errors).toBe(0);
  });

  it('the event is on the job, with the decision’s message', async () => {
    const { tick, events } = setup(aJob({ [ANNOTATION.completionToken]: 't' }, failed));
    await tick();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      metadata: { namespace: 'team-a', name: expect.stringMatching(new RegExp(`^${RUN}\\.[0-9a-f]+$`)) },
      involvedObject: { kind: 'TrainJob', name: RUN, namespace: 'team-a', uid: 'u1' },
      type: 'Warning',
      reason: 'TrainingFailed',
    });
  });

  it.each([
    // The record's write (and its event) before the heartbeat: heartbeats follow a pass's writes.
    ['Running', ['event Preempted', 'heartbeat']],
    ['Pending', ['heartbeat']], // already recorded: a changed note about the same eviction is no new event
  ])('notes a preemption when the record moves from %s to Pending: %j', async (phase, want) => {
    const message = 'Preempted to accommodate a workload';
    const gate: K8sObject = {
      apiVersion: 'kueue.x-k8s.io/v1beta2',
      kind: 'Workload',
      metadata: { name: 'wl', namespace: 'team-a', ownerReferences: [{ uid: 'u1' } as never] },
      status: {
        conditions: [
          { type: 'Evicted', status: 'True', reason: 'Preempted', message },
          { type: 'QuotaReserved', status: 'False', reason: 'Pending', message },
        ],
      },
    };
    const job = aJob(
      { [ANNOTATION.completionToken]: 't' },
      { conditions: [{ type: 'Suspended', status: 'True' }] },
      { suspend: true },
    );
    const { tick, calls } = setup(job, { gates: [gate], phase });
    await tick();
    expect(calls).toEqual(want);
  });

  it('an event that cannot be created fails neither the answer nor the tick; a refusal stops further tries', async () => {
    let tries = 0;
    const { tick, calls } = setup(aJob({ [ANNOTATION.admissionToken]: 't' }, running), {
      createEvent: async () => {
        tries++;
        throw new ClusterAccessDeniedError('events is forbidden');
      },
    });
    const report = await tick();
    expect(calls).toEqual(['success', 'annotateJob']);
    expect(report).toMatchObject({ answered: 1, errors: 0 });
    await tick();
    expect(tries).toBe(1);
  });

  it('a transient failure is retried on the next decision', async () => {
    let tries = 0;
    const { tick } = setup(aJob({}, running), {
      createEvent: async () => {
        tries++;
        throw new Error('connection reset');
      },
    });
    const first = await tick();
    await tick();
    expect(first).toMatchObject({ orphansDeleted: 1, errors: 0 });
    expect(tries).toBe(2);
  });
});
