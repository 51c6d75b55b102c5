import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatewayForCluster } from '../../lib/adapters/kubernetes/for-cluster.ts';
import { type ClusterConfig, parseConfig } from '../../lib/config.ts';
import { ValidationError } from '../../lib/errors.ts';
import { makeReconciler } from '../../lib/orchestration/reconcile.ts';
import { makeCreateJob } from '../../lib/orchestration/steps.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../lib/ports.ts';
import type { RunRecords } from '../../lib/run/records.ts';
import { ANNOTATION } from '../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../lib/trainjob/types.ts';
import {
  type ClusterSimulator,
  KUEUE_DEFAULT_INTEGRATIONS,
  startClusterSimulator,
} from '../../local/simulator/index.ts';
import { aRunSpec } from '../helpers/builders.ts';

/**
 * Legacy Training Operator v1 kinds under Kueue, through the production gateway, CreateJob step
 * and reconciler against the cluster simulator playing a DEFAULT Kueue v0.19 install (no v1
 * integrations): a queued PyTorchJob is refused, an unqueued one runs and succeeds, and a cluster
 * whose configuration wrongly says Kueue manages PyTorchJob fails the run fast with the reason.
 */

const PYTORCHJOBS: JobApi = {
  group: 'kubeflow.org',
  version: 'v1',
  plural: 'pytorchjobs',
  kind: 'PyTorchJob',
};
const NS = 'team-vision';

interface Answer {
  call: 'success' | 'failure' | 'heartbeat';
  token: string;
  error?: string;
  cause?: string;
}

async function cluster(sim: ClusterSimulator, kinds: ClusterConfig['kueueManagedKinds']) {
  const config = parseConfig({
    clusters: [
      {
        name: 'gpu-east',
        kubeconfig: sim.kubeconfigYaml(),
        legacyKinds: ['PyTorchJob'],
        kueueManagedKinds: kinds,
      },
    ],
  }).clusters[0] as ClusterConfig;
  const gateway = gatewayForCluster(config);
  const answers: Answer[] = [];
  const answer = (a: Answer) => {
    answers.push(a);
    return true;
  };
  const workflow = {
    sendTaskSuccess: async (token: string) => answer({ call: 'success', token }),
    sendTaskFailure: async (token: string, error: string, cause: string) =>
      answer({ call: 'failure', token, error, cause }),
    sendTaskHeartbeat: async (token: string) => answer({ call: 'heartbeat', token }),
    status: async () => 'RUNNING',
  } as unknown as WorkflowEngine;
  const records = {
    get: async () => undefined,
    getMany: async () => new Map(),
    update: async () => ({ phase: 'Pending' }),
    apply: async () => ({ record: { phase: 'Pending' }, changed: true }),
  } as unknown as RunRecords;
  let now = new Date();
  // CreateJob over only what it uses.
  const createJob = makeCreateJob({
    gateway: async () => gateway,
    records,
    clock: { now: () => now },
    kueueManagedKinds: () => config.kueueManagedKinds,
  });
  const reconciler = makeReconciler({
    clusters: () => [
      {
        name: config.name,
        gateway,
        jobApis: async () => [PYTORCHJOBS],
        kueueWorkloadGraceSeconds: config.kueueWorkloadGraceSeconds,
      },
    ],
    workflow,
    records,
    clock: { now: () => now },
  });
  return {
    gateway,
    /** What the workflow was told about one token (the tick sees every Gantry job of the cluster). */
    answersFor: (token: string) => answers.filter((a) => a.token === token),
    createJob: (queue: string | undefined, runId: string) =>
      createJob({
        run: aRunSpec({
          runId,
          cluster: config.name,
          request: { target: 'PyTorchJob', numNodes: 2, resourcesPerNode: { gpu: 2 }, queue },
        }),
      }),
    /** Put an admission token on the job, as AwaitAdmission does, and tick at `secondsAfterCreation`. */
    async tickAt(job: K8sObject, secondsAfterCreation: number) {
      now = new Date(Date.parse(job.metadata.creationTimestamp ?? '') + secondsAfterCreation * 1000);
      return reconciler.tick();
    },
  };
}

async function getJob(gateway: ClusterGateway, name: string): Promise<K8sObject> {
  const job = await gateway.getJob(PYTORCHJOBS, NS, name);
  if (!job) throw new Error(`no job ${name}`);
  return job;
}

describe('a PyTorchJob on a cluster whose Kueue runs its default configuration (v0.19)', () => {
  let plain: ClusterSimulator;
  let withV1: ClusterSimulator;
  const queues = [
    { name: 'vision-queue', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '256Gi' } },
  ];

  beforeAll(async () => {
    [plain, withV1] = await Promise.all([
      startClusterSimulator({ speed: 0, queues, namespaces: [NS], log: () => {} }),
      startClusterSimulator({
        speed: 0,
        queues,
        namespaces: [NS],
        log: () => {},
        kueueIntegrations: [...KUEUE_DEFAULT_INTEGRATIONS['0.19'], 'kubeflow.org/pytorchjob'],
      }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([plain?.close(), withV1?.close()]);
  });

  it('refuses a queued PyTorchJob at CreateJob, naming the cluster and the kind, and creates nothing', async () => {
    const c = await cluster(plain, ['TrainJob']);
    const err = await c.createJob('vision-queue', 'run-queuedaaaaaaaaaaaaa').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues[0]).toMatchObject({
      field: 'queue',
      rule: expect.stringContaining('a queued PyTorchJob would never be admitted on cluster gpu-east'),
    });
    expect(await c.gateway.getJob(PYTORCHJOBS, NS, 'run-queuedaaaaaaaaaaaaa')).toBeUndefined();
  });

  it('runs an unqueued PyTorchJob without Kueue: admitted (Running) and Succeeded', async () => {
    const c = await cluster(plain, ['TrainJob']);
    await c.createJob(undefined, 'run-unqueuedaaaaaaaaaa');
    await plain.settle();
    await c.gateway.annotateJob(PYTORCHJOBS, NS, 'run-unqueuedaaaaaaaaaa', {
      [ANNOTATION.admissionToken]: 'adm-unqueued',
    });
    const job = await getJob(c.gateway, 'run-unqueuedaaaaaaaaaa');
    expect(job.spec?.runPolicy).toMatchObject({ suspend: false }); // the CRD default: not suspended by Gantry nor Kueue

    await c.tickAt(job, 300); // well past the grace: not queued, so the rule does not apply
    expect(c.answersFor('adm-unqueued')).toEqual([{ call: 'success', token: 'adm-unqueued' }]);

    await plain.advance(120);
    const done = await getJob(c.gateway, 'run-unqueuedaaaaaaaaaa');
    const conditions = (done.status?.conditions ?? []) as Array<{ type: string; status: string }>;
    expect(conditions.find((x) => x.type === 'Succeeded')).toMatchObject({ status: 'True' });
  });

  it('fails fast when the configuration wrongly says Kueue manages PyTorchJob: no Workload within the grace', async () => {
    const c = await cluster(plain, ['TrainJob', 'PyTorchJob']);
    await c.createJob('vision-queue', 'run-misconfiguredaaaaa');
    await plain.advance(600); // Kueue would have made a Workload within seconds
    await c.gateway.annotateJob(PYTORCHJOBS, NS, 'run-misconfiguredaaaaa', {
      [ANNOTATION.admissionToken]: 'adm-misconfigured',
    });
    const job = await getJob(c.gateway, 'run-misconfiguredaaaaa');
    expect(job.spec?.runPolicy).toMatchObject({ suspend: true });
    expect(await c.gateway.findAdmissionGates(job)).toEqual([]);

    await c.tickAt(job, 60);
    expect(c.answersFor('adm-misconfigured')).toEqual([{ call: 'heartbeat', token: 'adm-misconfigured' }]);
    await c.tickAt(job, 120);

    const answered = c.answersFor('adm-misconfigured')[1];
    expect(answered).toMatchObject({ call: 'failure', error: 'NotManagedByKueueError' });
    const cause = JSON.parse(answered?.cause ?? '{}') as { reason: string; message: string };
    expect(cause.reason).toBe('NotManagedByKueue');
    expect(cause.message).toContain(
      `no Kueue Workload appeared for PyTorchJob ${NS}/run-misconfiguredaaaaa (queue vision-queue) on cluster gpu-east within 120 s`,
    );
    expect(cause.message).toContain('integration kubeflow.org/pytorchjob not enabled');
  });

  it('is admitted through Kueue where the pytorchjob integration is enabled and configured', async () => {
    const c = await cluster(withV1, ['TrainJob', 'PyTorchJob']);
    await c.createJob('vision-queue', 'run-managedaaaaaaaaaaa');
    await withV1.settle();
    await c.gateway.annotateJob(PYTORCHJOBS, NS, 'run-managedaaaaaaaaaaa', {
      [ANNOTATION.admissionToken]: 'adm-managed',
    });
    const job = await getJob(c.gateway, 'run-managedaaaaaaaaaaa');
    expect(await c.gateway.findAdmissionGates(job)).toMatchObject([{ kind: 'Workload' }]);

    await c.tickAt(job, 300);
    expect(c.answersFor('adm-managed')).toEqual([{ call: 'success', token: 'adm-managed' }]);
  });
});
