import { describe, expect, it } from 'vitest';
import { admissionOfGates } from '../../../lib/admission/interpret.ts';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import { makeCheckJob } from '../../../lib/orchestration/steps/waits.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import { toRunPhase } from '../../../lib/trainjob/status.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * A gang runtime under Kueue: Trainer builds the PodGroup of a suspended TrainJob too, so the job
 * has a Workload and a PodGroup. Kueue decides admission and eviction; the PodGroup adds whether the
 * admitted gang is placed. The reconciler (one LIST of gates per namespace) and the single-job check
 * (CheckJob, the heartbeat fallback) must reach the same answer from the same objects.
 */
const API = {
  group: 'trainer.kubeflow.org',
  version: 'v1alpha1',
  plural: 'trainjobs',
  kind: 'TrainJob',
} as JobApi;
const RUN_ID = 'run-aaaaaaaaaaaaaaaaaaaa';
const NOW = new Date('2026-01-02T00:10:00Z');
const AGO_60 = new Date(NOW.getTime() - 60_000).toISOString();
const owner = [{ apiVersion: 'trainer.kubeflow.org/v1alpha1', kind: 'TrainJob', name: RUN_ID, uid: 'u1' }];

function trainJob(suspended: boolean): K8sObject {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: RUN_ID,
      namespace: 'team-a',
      uid: 'u1',
      creationTimestamp: '2026-01-02T00:00:00Z',
      labels: { [LABEL.runId]: RUN_ID },
      annotations: { [ANNOTATION.admissionToken]: 'tok', [ANNOTATION.gangGate]: 'coscheduling' },
    },
    spec: { suspend: suspended },
    status: {
      conditions: [
        suspended
          ? { type: 'Suspended', status: 'True', reason: 'Suspended' }
          : { type: 'Suspended', status: 'False', reason: 'Resumed' },
      ],
    },
  };
}
const workload = (
  conditions: Array<Record<string, string>>,
  extra: Record<string, unknown> = {},
): K8sObject => ({
  apiVersion: 'kueue.x-k8s.io/v1beta2',
  kind: 'Workload',
  metadata: { name: `trainjob-${RUN_ID}-1a2b3`, namespace: 'team-a', ownerReferences: owner as never },
  ...extra,
  status: { conditions },
});
const podGroup = (phase: string): K8sObject => ({
  apiVersion: 'scheduling.x-k8s.io/v1alpha1',
  kind: 'PodGroup',
  metadata: { name: RUN_ID, namespace: 'team-a', ownerReferences: owner as never },
  spec: { minMember: 2 },
  status: { phase, running: 0 },
});

const ADMITTED = [
  { type: 'QuotaReserved', status: 'True', reason: 'QuotaReserved', lastTransitionTime: AGO_60 },
  { type: 'Admitted', status: 'True', reason: 'Admitted', lastTransitionTime: AGO_60 },
];

interface Case {
  name: string;
  job: K8sObject;
  gates: K8sObject[];
  /** The reconciler's answer to the admission token ('heartbeat': still waiting). */
  answer: string;
  record?: Record<string, unknown>;
}

const CASES: Case[] = [
  {
    name: 'Workload deactivated, PodGroup Pending → AdmissionDeactivated',
    job: trainJob(true),
    gates: [
      workload(
        [{ type: 'Evicted', status: 'True', reason: 'DeactivatedDueToRequeuingLimitExceeded', message: 'x' }],
        { spec: { active: false } },
      ),
      podGroup('Pending'),
    ],
    answer: 'failure AdmissionDeactivatedError',
  },
  {
    name: 'Workload admitted 60 s ago, job still suspended, PodGroup Pending → AdmissionStalled',
    job: trainJob(true),
    gates: [workload(ADMITTED), podGroup('Pending')],
    answer: 'failure AdmissionStalledError',
  },
  {
    name: 'Workload evicted for PodsReadyTimeout, PodGroup Pending → Pending/PodsReadyTimeout',
    job: trainJob(true),
    gates: [
      workload([
        {
          type: 'Evicted',
          status: 'True',
          reason: 'PodsReadyTimeout',
          message: 'Exceeded the PodsReady timeout',
        },
        { type: 'QuotaReserved', status: 'False', reason: 'Pending' },
      ]),
      podGroup('Pending'),
    ],
    answer: 'heartbeat',
    record: {
      phase: 'Pending',
      reason: 'PodsReadyTimeout',
      admission: { state: 'Evicted', reason: 'PodsReadyTimeout' },
    },
  },
  {
    name: 'Workload admitted, job resumed, gang not placed (PodGroup Scheduling) → Pending/Scheduling',
    job: trainJob(false),
    gates: [workload(ADMITTED), podGroup('Scheduling')],
    answer: 'heartbeat',
    // The note shows the PodGroup's phase: the gang is admitted by Kueue but not placed.
    record: { admission: { state: 'Queued', reason: 'Scheduling' } },
  },
  {
    name: 'Workload admitted, job resumed, PodGroup Running → admitted',
    job: trainJob(false),
    gates: [workload(ADMITTED), podGroup('Running')],
    answer: 'success',
  },
];

function reconcilerWith(c: Case) {
  const calls: string[] = [];
  const gateway = {
    // The PodGroup listed after the Workload, as listAdmissionGates lists them.
    listAdmissionGates: async () => c.gates,
    listManagedJobs: async () => [c.job],
    listPods: async () => [],
    annotateJob: async () => c.job,
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
    admittedSuspendedGraceSeconds: 30,
  });
  return { tick: () => reconciler.tick(), calls };
}

async function checkJobWith(c: Case): Promise<string> {
  const gateway = {
    getJob: async () => c.job,
    findAdmissionGates: async () => c.gates,
    listPods: async () => [],
  } as unknown as ClusterGateway;
  const check = makeCheckJob({
    gateway: async () => gateway,
    clock: { now: () => NOW },
    admittedSuspendedGraceSeconds: 30,
  });
  const ref = {
    cluster: 'c',
    api: API,
    namespace: 'team-a',
    name: RUN_ID,
    status: 'pending',
    admissionDeadlineAt: '2026-01-03T00:00:00Z',
    admissionTimeoutSeconds: 86_400,
    admissionHeartbeatSeconds: 600,
    runTimeoutSeconds: 3600,
    runHeartbeatSeconds: 600,
  } as const;
  const run = { runId: RUN_ID, request: { runDeadlineSeconds: 3600 } } as never;
  try {
    const next = await check({ stage: 'admission', job: ref, run });
    return next.status === 'running' ? 'success' : 'heartbeat';
  } catch (err) {
    return `failure ${(err as Error).name}`;
  }
}

describe('a job with both a Workload and a PodGroup: one rule on both paths', () => {
  it.each(CASES)('$name', async (c) => {
    // Act
    const { tick, calls } = reconcilerWith(c);
    await tick();
    const single = await checkJobWith(c);
    // Assess: the reconciler answers as the table says, and the single-job check agrees
    expect(calls.filter((x) => !x.startsWith('update '))[0]).toBe(c.answer);
    expect(single).toBe(c.answer);
    if (c.record) {
      const update = calls.find((x) => x.startsWith('update '));
      expect(JSON.parse(update!.slice('update '.length))).toMatchObject(c.record);
    }
  });

  it.each(CASES)('$name: the order of the gates does not matter', (c) => {
    expect(toRunPhase(c.job, [...c.gates].reverse())).toEqual(toRunPhase(c.job, c.gates));
    expect(admissionOfGates([...c.gates].reverse())).toEqual(admissionOfGates(c.gates));
  });
});
