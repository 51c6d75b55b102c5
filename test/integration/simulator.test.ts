import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from '@kubernetes/client-node';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  finalAccuracy,
  KUEUE_DEFAULT_INTEGRATIONS,
  SIM_ANNOTATIONS,
  startClusterSimulator,
} from '../../local/simulator/index.ts';

/**
 * Scenario tests of the cluster simulator through @kubernetes/client-node and a kubeconfig, the
 * way Gantry's gateway reaches it. The clock is stopped (speed 0) and moved with advance(), so
 * every timestamp below is exact.
 */

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<Record<string, unknown>>;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};
type Condition = {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastTransitionTime: string;
};

const TRAINER = { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs' };
const WORKLOADS = { group: 'kueue.x-k8s.io', version: 'v1beta2', plural: 'workloads' };
const BUCKET = 'gantry-sim-test';

function cond(o: Obj | undefined, type: string): Condition | undefined {
  const list = (o?.status?.conditions ?? []) as Condition[];
  return list.find((c) => c.type === type);
}

interface JobOpts {
  gpus?: number;
  nodes?: number;
  queue?: string | null;
  priority?: string;
  annotations?: Record<string, string>;
  env?: Record<string, string>;
  args?: string[];
  activeDeadlineSeconds?: number;
  runtime?: string;
}

function trainJob(name: string, o: JobOpts = {}): Obj {
  const labels: Record<string, string> = { 'app.kubernetes.io/managed-by': 'gantry' };
  if (o.queue !== null) labels['kueue.x-k8s.io/queue-name'] = o.queue ?? 'team-a';
  if (o.priority) labels['kueue.x-k8s.io/priority-class'] = o.priority;
  const trainer: Record<string, unknown> = {
    image: 'ghcr.io/acme/train:1.0',
    numNodes: o.nodes ?? 1,
    resourcesPerNode: { requests: { 'nvidia.com/gpu': o.gpus ?? 4, cpu: '8', memory: '32Gi' } },
  };
  if (o.env) trainer.env = Object.entries(o.env).map(([n, value]) => ({ name: n, value }));
  if (o.args) trainer.args = o.args;
  const spec: Record<string, unknown> = { runtimeRef: { name: o.runtime ?? 'torch-distributed' }, trainer };
  if (o.activeDeadlineSeconds) spec.activeDeadlineSeconds = o.activeDeadlineSeconds;
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: { name, labels, annotations: o.annotations ?? {} },
    spec,
  };
}

/** A simulator with its client-node clients, each test in its own namespace. */
async function harness(opts: Parameters<typeof startClusterSimulator>[0]) {
  const sim = await startClusterSimulator({ log: () => {}, ...opts });
  const kc = new KubeConfig();
  kc.loadFromString(sim.kubeconfigYaml());
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  let n = 0;
  return {
    sim,
    kc,
    custom,
    core,
    async namespace(): Promise<string> {
      const name = `t-${String(n++).padStart(3, '0')}`;
      await core.createNamespace({ body: { metadata: { name } } });
      await sim.settle(); // LocalQueues appear in new namespaces
      return name;
    },
    async create(ns: string, job: Obj): Promise<Obj> {
      return (await custom.createNamespacedCustomObject({ ...TRAINER, namespace: ns, body: job })) as Obj;
    },
    async get(ns: string, name: string): Promise<Obj> {
      return (await custom.getNamespacedCustomObject({ ...TRAINER, namespace: ns, name })) as Obj;
    },
    /** A ClusterQueue of its own and LocalQueue `lq` in `ns`, created through the API as an admin would. */
    async queue(ns: string, gpus: number, extra: Record<string, unknown> = {}): Promise<string> {
      await custom.createClusterCustomObject({
        group: 'kueue.x-k8s.io',
        version: 'v1beta2',
        plural: 'clusterqueues',
        body: {
          apiVersion: 'kueue.x-k8s.io/v1beta2',
          kind: 'ClusterQueue',
          metadata: { name: `cq-${ns}` },
          spec: {
            namespaceSelector: {},
            resourceGroups: [
              {
                coveredResources: ['nvidia.com/gpu', 'cpu', 'memory'],
                flavors: [
                  {
                    name: 'default-flavor',
                    resources: [
                      { name: 'nvidia.com/gpu', nominalQuota: gpus },
                      { name: 'cpu', nominalQuota: 256 },
                      { name: 'memory', nominalQuota: '2Ti' },
                    ],
                  },
                ],
              },
            ],
            ...extra,
          },
        },
      });
      await custom.createNamespacedCustomObject({
        group: 'kueue.x-k8s.io',
        version: 'v1beta2',
        plural: 'localqueues',
        namespace: ns,
        body: {
          apiVersion: 'kueue.x-k8s.io/v1beta2',
          kind: 'LocalQueue',
          metadata: { name: 'lq' },
          spec: { clusterQueue: `cq-${ns}` },
        },
      });
      return 'lq';
    },
    async workloadOf(job: Obj): Promise<Obj | undefined> {
      const list = (await custom.listNamespacedCustomObject({
        ...WORKLOADS,
        namespace: job.metadata.namespace as string,
        labelSelector: `kueue.x-k8s.io/job-uid=${job.metadata.uid}`,
      })) as { items: Obj[] };
      return list.items[0];
    },
  };
}

describe('cluster simulator: Kueue admission and the Trainer lifecycle (Trainer v2.2, client-node)', () => {
  let h: Awaited<ReturnType<typeof harness>>;
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let s3: S3Client;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    s3 = new S3Client({
      endpoint: `http://127.0.0.1:${fauxqs.port}`,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    h = await harness({
      trainerVersion: '2.2',
      // Trainer's alpha TrainJobStatus gate on (off by default, as upstream): these tests read trainerStatus.
      trainerStatus: true,
      speed: 0,
      s3,
      queues: [
        { name: 'team-a', clusterQueue: 'gpu-a', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '512Gi' } },
      ],
      priorityClasses: { high: 1000, low: 10 },
    });
  });

  afterAll(async () => {
    await h?.sim.close();
    s3?.destroy();
    await fauxqs?.stop();
  });

  it('admits two of three 4-GPU jobs in an 8-GPU queue; the third waits with Kueue’s reason, then runs when one finishes', async () => {
    const ns = await h.namespace();
    const a = await h.create(ns, trainJob('job-a', { annotations: { [SIM_ANNOTATIONS.duration]: '30' } }));
    const b = await h.create(ns, trainJob('job-b', { annotations: { [SIM_ANNOTATIONS.duration]: '60' } }));
    const c = await h.create(ns, trainJob('job-c', { annotations: { [SIM_ANNOTATIONS.duration]: '60' } }));
    await h.sim.settle();

    // Kueue's webhook created them suspended; its Workloads carry the job's uid and a controller owner reference.
    expect(a.spec?.suspend).toBe(true);
    const [wa, wb, wc] = await Promise.all([a, b, c].map((j) => h.workloadOf(j)));
    expect(wa?.metadata.name).toMatch(/^trainjob-job-a-[0-9a-f]{5}$/);
    expect(wa?.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'TrainJob', name: 'job-a', uid: a.metadata.uid, controller: true }),
    ]);
    expect(wa?.spec).toMatchObject({ queueName: 'team-a', podSets: [{ name: 'node', count: 1 }] });
    for (const w of [wa, wb])
      expect(cond(w, 'Admitted')).toMatchObject({ status: 'True', reason: 'Admitted' });
    expect(cond(wc, 'QuotaReserved')).toMatchObject({
      status: 'False',
      reason: 'Pending',
      message:
        "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 4 more needed",
    });
    const [ja, jc] = [await h.get(ns, 'job-a'), await h.get(ns, 'job-c')];
    expect(ja.spec?.suspend).toBe(false);
    expect(cond(ja, 'Suspended')).toMatchObject({
      status: 'False',
      reason: 'Resumed',
      message: 'TrainJob is resumed',
    });
    expect(cond(jc, 'Suspended')).toMatchObject({
      status: 'True',
      reason: 'Suspended',
      message: 'TrainJob is suspended',
    });

    await h.sim.advance(30);

    const doneA = await h.get(ns, 'job-a');
    const wc2 = await h.workloadOf(c);
    expect(cond(doneA, 'Complete')).toMatchObject({
      status: 'True',
      reason: 'AllJobsCompleted',
      message: 'jobset completed successfully',
    });
    expect(cond(await h.workloadOf(a), 'Finished')).toMatchObject({ status: 'True', reason: 'Succeeded' });
    // The third is admitted at the very moment the first one's quota is released.
    expect(cond(wc2, 'QuotaReserved')).toMatchObject({ status: 'True', reason: 'QuotaReserved' });
    expect(cond(wc2, 'QuotaReserved')?.lastTransitionTime).toBe(cond(doneA, 'Complete')?.lastTransitionTime);
    expect((await h.get(ns, 'job-c')).spec?.suspend).toBe(false);
    expect(cond(await h.get(ns, 'job-b'), 'Complete')).toBeUndefined();

    await h.sim.advance(60);
    for (const name of ['job-b', 'job-c'])
      expect(cond(await h.get(ns, name), 'Complete')?.status).toBe('True');
  });

  it('never admits a job larger than the whole ClusterQueue, and says it cannot fit', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8);
    const big = await h.create(ns, trainJob('too-big', { nodes: 4, gpus: 4, queue: q }));
    await h.sim.settle();
    await h.sim.advance(3600);

    const wl = await h.workloadOf(big);
    expect(cond(wl, 'QuotaReserved')).toMatchObject({
      status: 'False',
      reason: 'Pending',
      message:
        "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor default-flavor, previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)",
    });
    expect(cond(wl, 'Admitted')).toBeUndefined();
    expect((await h.get(ns, 'too-big')).spec?.suspend).toBe(true);
  });

  it('fails a job at the configured progress with the scenario’s reason and message', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8);
    await h.create(
      ns,
      trainJob('will-fail', {
        queue: q,
        gpus: 1,
        annotations: {
          [SIM_ANNOTATIONS.duration]: '100',
          [SIM_ANNOTATIONS.failAtPercent]: '40',
          [SIM_ANNOTATIONS.failReason]: 'FailedJobs',
          [SIM_ANNOTATIONS.failMessage]: 'jobset failed due to one or more job failures',
        },
      }),
    );
    await h.sim.settle();
    await h.sim.advance(39);
    expect(cond(await h.get(ns, 'will-fail'), 'Failed')).toBeUndefined();

    await h.sim.advance(1);

    const failed = await h.get(ns, 'will-fail');
    expect(cond(failed, 'Failed')).toMatchObject({
      status: 'True',
      reason: 'FailedJobs',
      message: 'jobset failed due to one or more job failures',
    });
    expect(cond(failed, 'Complete')).toBeUndefined();
    expect(failed.status?.trainerStatus).toMatchObject({ progressPercentage: 40 });
    expect(failed.status?.jobsStatus).toEqual([
      { name: 'node', active: 0, ready: 0, succeeded: 0, failed: 1, suspended: 0 },
    ]);
    expect(cond(await h.workloadOf(failed), 'Finished')).toMatchObject({ status: 'True', reason: 'Failed' });
  });

  it('writes the model and metrics.json to the job’s output location in S3, and nothing with no-output', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8);
    const hp = { LEARNING_RATE: '0.00316', BATCH_SIZE: '64' };
    await h.create(
      ns,
      trainJob('writes', {
        queue: q,
        gpus: 1,
        env: { ...hp, GANTRY_OUTPUT_URI: `s3://${BUCKET}/runs/writes/output/` },
        args: ['--dropout', '0.2'],
        annotations: { [SIM_ANNOTATIONS.outputBytes]: '4096' },
      }),
    );
    await h.create(
      ns,
      trainJob('silent', {
        queue: q,
        gpus: 1,
        env: { GANTRY_OUTPUT_URI: `s3://${BUCKET}/runs/silent/output/` },
        annotations: { [SIM_ANNOTATIONS.noOutput]: 'true' },
      }),
    );
    await h.sim.settle();
    await h.sim.advance(60);

    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'runs/' }));
    const objects = Object.fromEntries((listed.Contents ?? []).map((o) => [o.Key, o.Size]));
    expect(objects).toEqual({
      'runs/writes/output/model.safetensors': 4096,
      'runs/writes/output/metrics.json': expect.any(Number),
    });
    const metrics = JSON.parse(
      await (
        await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'runs/writes/output/metrics.json' }))
      ).Body!.transformToString(),
    ) as { accuracy: number; loss: number; hyperparameters: Record<string, number> };
    expect(metrics.hyperparameters).toMatchObject({ lr: 0.00316, batchSize: 64, dropout: 0.2 });
    expect(metrics.accuracy).toBeCloseTo(0.95, 3);
    const done = await h.get(ns, 'writes');
    expect(cond(done, 'Complete')?.status).toBe('True');
    expect(done.status?.trainerStatus).toMatchObject({
      progressPercentage: 100,
      estimatedRemainingSeconds: 0,
      metrics: [
        { name: 'loss', value: metrics.loss.toFixed(4) },
        { name: 'accuracy', value: metrics.accuracy.toFixed(4) },
      ],
    });
    expect(cond(await h.get(ns, 'silent'), 'Complete')?.status).toBe('True');
  });

  it('reports progress while training: falling loss, rising accuracy, ETA', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8);
    await h.create(
      ns,
      trainJob('progress', {
        queue: q,
        gpus: 1,
        args: ['--lr=0.1', '--batch-size=8'],
        annotations: { [SIM_ANNOTATIONS.duration]: '200' },
      }),
    );
    await h.sim.settle();
    const samples: Array<{ p: number; eta: number; loss: number; acc: number }> = [];
    for (let i = 0; i < 4; i++) {
      await h.sim.advance(40);
      const ts = (await h.get(ns, 'progress')).status?.trainerStatus as {
        progressPercentage: number;
        estimatedRemainingSeconds: number;
        metrics: Array<{ name: string; value: string }>;
        lastUpdatedTime: string;
      };
      const m = Object.fromEntries(ts.metrics.map((x) => [x.name, Number(x.value)]));
      samples.push({
        p: ts.progressPercentage,
        eta: ts.estimatedRemainingSeconds,
        loss: m.loss!,
        acc: m.accuracy!,
      });
    }

    expect(samples.map((s) => s.p)).toEqual([20, 40, 60, 80]);
    expect(samples.map((s) => s.eta)).toEqual([160, 120, 80, 40]);
    for (let i = 1; i < samples.length; i++) {
      expect(samples[i]!.loss).toBeLessThan(samples[i - 1]!.loss);
      expect(samples[i]!.acc).toBeGreaterThan(samples[i - 1]!.acc);
    }
    // lr 0.1 and batch 8 are far from the optimum: the run heads for a much lower accuracy.
    expect(finalAccuracy({ lr: 0.1, batchSize: 8, dropout: 0.1 })).toBeLessThan(0.6);
    expect(samples.at(-1)!.acc).toBeLessThan(0.6);
  });

  it('frees the quota of a deleted job: its Workload is garbage-collected and the next job is admitted', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8);
    const first = await h.create(ns, trainJob('hog', { queue: q, gpus: 8 }));
    const second = await h.create(ns, trainJob('waiter', { queue: q, gpus: 8 }));
    await h.sim.settle();
    expect(cond(await h.workloadOf(second), 'QuotaReserved')?.status).toBe('False');

    await h.custom.deleteNamespacedCustomObject({
      ...TRAINER,
      namespace: ns,
      name: 'hog',
      propagationPolicy: 'Background',
    });
    await h.sim.settle();
    await h.sim.settle();

    expect(await h.workloadOf(first)).toBeUndefined();
    expect(cond(await h.workloadOf(second), 'Admitted')?.status).toBe('True');
    expect((await h.get(ns, 'waiter')).spec?.suspend).toBe(false);
    await h.custom.deleteNamespacedCustomObject({ ...TRAINER, namespace: ns, name: 'waiter' });
    await h.sim.settle();
  });

  it('admits by priority (WorkloadPriorityClass), FIFO within a priority', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8);
    await h.create(
      ns,
      trainJob('running', { queue: q, gpus: 8, annotations: { [SIM_ANNOTATIONS.duration]: '10' } }),
    );
    await h.sim.settle();
    const low1 = await h.create(ns, trainJob('low-1', { queue: q, gpus: 8, priority: 'low' }));
    await h.create(ns, trainJob('low-2', { queue: q, gpus: 8, priority: 'low' }));
    const high = await h.create(ns, trainJob('high', { queue: q, gpus: 8, priority: 'high' }));
    await h.sim.settle();
    expect((await h.workloadOf(high))?.spec).toMatchObject({
      priority: 1000,
      priorityClassRef: { group: 'kueue.x-k8s.io', kind: 'WorkloadPriorityClass', name: 'high' },
    });

    await h.sim.advance(10);

    expect(cond(await h.workloadOf(high), 'Admitted')?.status).toBe('True');
    expect(cond(await h.workloadOf(low1), 'Admitted')).toBeUndefined();
    await h.sim.advance(60);
    expect(cond(await h.workloadOf(low1), 'Admitted')?.status).toBe('True');
    await h.sim.advance(120);
  });

  it('preempts through the admin call and within a LowerPriority ClusterQueue: evicted, suspended, requeued once its pods are gone, readmitted', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8, { preemption: { withinClusterQueue: 'LowerPriority' } });
    const victim = await h.create(ns, trainJob('victim', { queue: q, gpus: 8, priority: 'low' }));
    await h.sim.settle();
    await h.sim.advance(20);
    expect(await h.sim.preempt(ns, 'victim')).toBe(true);

    // Kueue v0.19: Evicted=True first, the reservation (and Admitted) kept while the pods terminate.
    const evicted = await h.workloadOf(victim);
    expect(cond(evicted, 'Evicted')).toMatchObject({ status: 'True', reason: 'Preempted' });
    expect(cond(evicted, 'QuotaReserved')?.status).toBe('True');
    expect(cond(evicted, 'Admitted')?.status).toBe('True');
    expect(cond(await h.get(ns, 'victim'), 'Suspended')).toMatchObject({
      status: 'True',
      reason: 'Suspended',
    });
    await h.sim.advance(29);
    expect(cond(await h.workloadOf(victim), 'QuotaReserved')?.status).toBe('True');
    await h.sim.advance(1); // its pods are gone: the reservation is withdrawn and it is requeued, then readmitted
    const requeued = await h.workloadOf(victim);
    expect(cond(requeued, 'Requeued')).toMatchObject({ status: 'True', reason: 'Preempted' });
    expect(cond(requeued, 'Admitted')?.status).toBe('True');
    expect(cond(requeued, 'Evicted')?.status).toBe('False');
    const rerun = await h.get(ns, 'victim');
    expect(rerun.status?.trainerStatus).toMatchObject({ progressPercentage: 0 }); // a preempted run starts over

    const vip = await h.create(ns, trainJob('vip', { queue: q, gpus: 8, priority: 'high' }));
    await h.sim.settle();
    await h.sim.settle();
    // The preemptor waits for the victim's quota; the victim is evicted, not yet released.
    expect(cond(await h.workloadOf(vip), 'QuotaReserved')).toMatchObject({ status: 'False' });
    expect(cond(await h.workloadOf(vip), 'QuotaReserved')?.message).toMatch(/Pending the preemption/);
    const preempted = await h.workloadOf(victim);
    expect(cond(preempted, 'Preempted')).toMatchObject({ status: 'True', reason: 'InClusterQueue' });
    expect(cond(await h.get(ns, 'victim'), 'Suspended')).toMatchObject({
      status: 'True',
      reason: 'Suspended',
    });
    await h.sim.advance(30);
    expect(cond(await h.workloadOf(vip), 'Admitted')?.status).toBe('True');
    const waiting = await h.workloadOf(victim);
    expect(cond(waiting, 'QuotaReserved')).toMatchObject({ status: 'False', reason: 'Pending' });
    expect(cond(waiting, 'Requeued')).toMatchObject({ status: 'True', reason: 'Preempted' });
    await h.sim.advance(200);
    expect(cond(await h.get(ns, 'victim'), 'Complete')?.status).toBe('True');
  });

  it('writes PodsReady as Kueue 0.19 defaults waitForPodsReady on; none with it off or on Kueue 0.16', async () => {
    const ns = await h.namespace();
    const job = await h.create(ns, trainJob('pods-ready', { gpus: 4 }));
    await h.sim.settle();
    await h.sim.advance(5);
    const wl = await h.workloadOf(job);
    expect(cond(wl, 'Admitted')?.status).toBe('True');
    expect(cond(wl, 'PodsReady')).toMatchObject({ status: 'True', reason: 'Started' });
    await h.sim.advance(120);

    for (const opts of [{ waitForPodsReady: false as const }, { trainerVersion: '2.1' as const }]) {
      const off = await harness({
        trainerVersion: '2.2',
        speed: 0,
        queues: [
          { name: 'team-a', clusterQueue: 'gpu-a', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '512Gi' } },
        ],
        ...opts,
      });
      try {
        const ns2 = await off.namespace();
        const j2 = await off.create(ns2, trainJob('no-pods-ready', { gpus: 4 }));
        await off.sim.settle();
        await off.sim.advance(5);
        const wl2 = await off.workloadOf(j2);
        expect(cond(wl2, 'Admitted')?.status, JSON.stringify(opts)).toBe('True');
        expect(cond(wl2, 'PodsReady'), JSON.stringify(opts)).toBeUndefined();
      } finally {
        await off.sim.close();
      }
    }
  });

  it('starts an admitted TrainJob through its Kueue runtime patch and empties the patch when it evicts it', async () => {
    const ns = await h.namespace();
    const job = await h.create(ns, trainJob('patched', { gpus: 4 }));
    await h.sim.settle();
    const wl = await h.workloadOf(job);
    const kueuePatch = (o: Obj) =>
      ((o.spec?.runtimePatches ?? []) as Array<Record<string, unknown>>).find(
        (p) => p.manager === 'kueue.x-k8s.io/manager',
      );

    const started = await h.get(ns, 'patched');
    expect(started.spec?.suspend).toBe(false);
    expect(kueuePatch(started)).toMatchObject({
      time: expect.any(String),
      trainingRuntimeSpec: {
        template: {
          spec: {
            replicatedJobs: [
              {
                name: 'node',
                template: {
                  spec: {
                    template: {
                      metadata: {
                        annotations: { 'kueue.x-k8s.io/workload': wl?.metadata.name },
                        labels: {
                          'kueue.x-k8s.io/podset': 'node',
                          'kueue.x-k8s.io/local-queue-name': 'team-a',
                          'kueue.x-k8s.io/cluster-queue-name': 'gpu-a',
                        },
                      },
                      spec: {},
                    },
                  },
                },
              },
            ],
          },
        },
      },
    });

    expect(await h.sim.preempt(ns, 'patched')).toBe(true);
    const stopped = await h.get(ns, 'patched');
    expect(stopped.spec?.suspend).toBe(true);
    expect(kueuePatch(stopped)?.trainingRuntimeSpec).toEqual({ template: { spec: {} } });
    await h.sim.advance(300);
  });

  it('runs a job without a queue label at once, outside any quota', async () => {
    const ns = await h.namespace();
    const job = await h.create(ns, trainJob('free', { queue: null, gpus: 64 }));
    await h.sim.settle();

    expect(job.spec?.suspend).toBe(false);
    expect(await h.workloadOf(job)).toBeUndefined();
    expect((await h.get(ns, 'free')).status?.jobsStatus).toEqual([
      { name: 'node', active: 1, ready: 1, succeeded: 0, failed: 0, suspended: 0 },
    ]);
    await h.sim.advance(60);
    expect(cond(await h.get(ns, 'free'), 'Complete')?.status).toBe('True');
  });

  it('fails a TrainJob that outlives activeDeadlineSeconds (counted from admission) with DeadlineExceeded', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8);
    await h.create(
      ns,
      trainJob('slow', {
        queue: q,
        gpus: 1,
        activeDeadlineSeconds: 30,
        annotations: { [SIM_ANNOTATIONS.slowStart]: '10' },
      }),
    );
    await h.sim.settle();
    await h.sim.advance(29);
    expect(cond(await h.get(ns, 'slow'), 'Failed')).toBeUndefined();
    await h.sim.advance(1);

    expect(cond(await h.get(ns, 'slow'), 'Failed')).toMatchObject({
      status: 'True',
      reason: 'DeadlineExceeded',
      message: 'TrainJob exceeded its active deadline',
    });
  });

  it('streams changes to a client-node Watch', async () => {
    const ns = await h.namespace();
    const q = await h.queue(ns, 8);
    const events: string[] = [];
    const watch = new Watch(h.kc);
    const ctl = await watch.watch(
      `/apis/trainer.kubeflow.org/v1alpha1/namespaces/${ns}/trainjobs`,
      {},
      (type, obj: Obj) => events.push(`${type} ${obj.metadata.name}`),
      () => {},
    );
    await h.create(ns, trainJob('watched', { queue: q, gpus: 1 }));
    await h.sim.settle();
    await h.custom.deleteNamespacedCustomObject({ ...TRAINER, namespace: ns, name: 'watched' });
    await new Promise((r) => setTimeout(r, 100));
    ctl.abort();

    expect(events[0]).toBe('ADDED watched');
    expect(events).toContain('MODIFIED watched');
    expect(events.at(-1)).toBe('DELETED watched');
  });

  it('counts requests by verb and resource, admissions and the peak of concurrently running jobs', () => {
    const s = h.sim.stats();

    expect(s.requests.byVerbResource['create trainjobs']).toBeGreaterThan(10);
    expect(s.requests.byVerb.get).toBeGreaterThan(10);
    expect(s.jobs.admitted).toBeGreaterThan(5);
    expect(s.jobs.peakRunning).toBeGreaterThanOrEqual(2);
    expect(s.objects['trainjobs.trainer.kubeflow.org']).toBeGreaterThan(5);
  });
});

describe('cluster simulator: what the API answers to bad input, like kube-apiserver', () => {
  let h: Awaited<ReturnType<typeof harness>>;
  let ns: string;
  let url: string;

  beforeAll(async () => {
    h = await harness({ trainerVersion: '2.3', speed: 0 });
    ns = await h.namespace();
    url = `${h.sim.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/${ns}/trainjobs`;
  });

  afterAll(async () => {
    await h?.sim.close();
  });

  const post = (body: string, contentType = 'application/json') =>
    fetch(url, { method: 'POST', headers: { 'Content-Type': contentType }, body });

  it('answers malformed JSON with 400 BadRequest', async () => {
    const res = await post('{"apiVersion": ');

    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'the object provided is unrecognized (must be of type TrainJob): couldn\'t get version/kind; json parse error: unexpected end of JSON input ({"apiVersion": )',
      reason: 'BadRequest',
      code: 400,
    });
  });

  it('answers a body of another API group/version with 400, and another kind of the same group with 422', async () => {
    const other = await post(
      JSON.stringify({ ...trainJob('x'), apiVersion: 'kubeflow.org/v1', kind: 'PyTorchJob' }),
    );
    const wrongKind = await post(JSON.stringify({ ...trainJob('y'), kind: 'TrainingRuntime' }));

    expect(other.status).toBe(400);
    expect(await other.json()).toMatchObject({
      reason: 'BadRequest',
      message:
        'the API version in the data (kubeflow.org/v1) does not match the expected API version (trainer.kubeflow.org/v1alpha1)',
    });
    expect(wrongKind.status).toBe(422);
    expect(await wrongKind.json()).toMatchObject({
      reason: 'Invalid',
      message:
        'TrainingRuntime.trainer.kubeflow.org "y" is invalid: kind: Invalid value: "TrainingRuntime": must be TrainJob',
    });
  });

  it('answers unknown groups, versions and resources with the plain 404 page', async () => {
    for (const path of [
      `/apis/trainer.kubeflow.org/v1alpha1/namespaces/${ns}/nopes`,
      '/apis/example.com/v1/things',
      `/apis/trainer.kubeflow.org/v9/namespaces/${ns}/trainjobs`,
    ]) {
      const res = await fetch(`${h.sim.url}${path}`);
      expect(res.status).toBe(404);
      expect(await res.text()).toBe('404 page not found\n');
    }
  });

  it('answers an invalid object with 422 and the field causes, through client-node', async () => {
    const job = trainJob('9-starts-with-a-digit');
    (job.spec?.trainer as Record<string, unknown>).numNodes = 'two';

    const err = (await h.create(ns, job).catch((e: unknown) => e)) as ApiException<string>;

    expect(err).toBeInstanceOf(ApiException);
    expect(err.code).toBe(422);
    const status = JSON.parse(err.body) as { reason: string; details: { kind: string; causes: unknown[] } };
    expect(status.reason).toBe('Invalid');
    expect(status.details.kind).toBe('TrainJob');
    expect(status.details.causes).toEqual([
      {
        reason: 'FieldValueTypeInvalid',
        message: 'Invalid value: "string": spec.trainer.numNodes in body must be of type integer: "string"',
        field: 'spec.trainer.numNodes',
      },
      {
        reason: 'FieldValueInvalid',
        message:
          'Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
        field: '<nil>',
      },
    ]);
    const badName = (await h
      .create(ns, trainJob('9-starts-with-a-digit'))
      .catch((e: unknown) => e)) as ApiException<string>;
    expect(JSON.parse(badName.body).details.causes).toEqual([
      {
        reason: 'FieldValueInvalid',
        message: 'Invalid value: metadata.name must match RFC 1035 DNS label format',
        field: '<nil>',
      },
    ]);
  });

  it('answers a duplicate name with 409 AlreadyExists and a stale resourceVersion with 409 Conflict', async () => {
    const created = await h.create(ns, trainJob('dup', { queue: null }));
    const dup = (await h.create(ns, trainJob('dup')).catch((e: unknown) => e)) as ApiException<string>;
    const stale = (await h.custom
      .replaceNamespacedCustomObject({
        ...TRAINER,
        namespace: ns,
        name: 'dup',
        body: { ...created, metadata: { ...created.metadata, resourceVersion: '1' } },
      })
      .catch((e: unknown) => e)) as ApiException<string>;

    expect(dup.code).toBe(409);
    expect(JSON.parse(dup.body)).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'trainjobs.trainer.kubeflow.org "dup" already exists',
      reason: 'AlreadyExists',
      details: { name: 'dup', group: 'trainer.kubeflow.org', kind: 'trainjobs' },
      code: 409,
    });
    expect(stale.code).toBe(409);
    expect(JSON.parse(stale.body)).toMatchObject({
      reason: 'Conflict',
      message:
        'Operation cannot be fulfilled on trainjobs.trainer.kubeflow.org "dup": the object has been modified; please apply your changes to the latest version and try again',
    });
  });

  it('drops unknown fields with a warning by default and rejects them with fieldValidation=Strict', async () => {
    const body = JSON.stringify({
      ...trainJob('old-shape'),
      spec: { ...trainJob('x').spec, podTemplateOverrides: [] },
    });
    const warned = await post(body);
    const strict = await fetch(`${url}?fieldValidation=Strict`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: body.replace('old-shape', 'old-shape-2'),
    });

    expect(warned.status).toBe(201);
    expect(warned.headers.get('warning')).toBe('299 - "unknown field \\"spec.podTemplateOverrides\\""');
    expect(((await warned.json()) as Obj).spec).not.toHaveProperty('podTemplateOverrides');
    expect(strict.status).toBe(400);
    expect(await strict.json()).toMatchObject({
      reason: 'BadRequest',
      message:
        'TrainJob in version "v1alpha1" cannot be handled as a TrainJob: strict decoding error: unknown field "spec.podTemplateOverrides"',
    });
  });

  it('answers a strategic-merge patch of a custom resource with 415, and merges a merge patch', async () => {
    await h.create(ns, trainJob('patched', { queue: null }));
    const smp = await fetch(`${url}/patched`, {
      method: 'PATCH',
      headers: { 'Content-Type': 'application/strategic-merge-patch+json' },
      body: JSON.stringify({ metadata: { annotations: { a: 'b' } } }),
    });
    const merged = (await h.custom.patchNamespacedCustomObject(
      { ...TRAINER, namespace: ns, name: 'patched', body: { metadata: { annotations: { a: 'b' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    )) as Obj;

    expect(smp.status).toBe(415);
    expect(await smp.json()).toMatchObject({ reason: 'UnsupportedMediaType' });
    expect(merged.metadata.annotations).toEqual({ a: 'b' });
  });

  it('refuses a TrainJob whose runtime does not exist, as Trainer’s validating webhook does', async () => {
    const err = (await h
      .create(ns, trainJob('no-runtime', { runtime: 'nope' }))
      .catch((e: unknown) => e)) as ApiException<string>;

    expect(err.code).toBe(403);
    expect(JSON.parse(err.body).message).toBe(
      'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.RuntimeRef: Invalid value: {"name":"nope","apiGroup":"trainer.kubeflow.org","kind":"ClusterTrainingRuntime"}: ClusterTrainingRuntime.trainer.kubeflow.org "nope" not found: specified clusterTrainingRuntime must be created before the TrainJob is created',
    );
  });

  it('answers 404 NotFound for a missing object and a missing namespace', async () => {
    const missing = (await h.get(ns, 'nope').catch((e: unknown) => e)) as ApiException<string>;
    const noNs = (await h
      .create('no-such-ns', trainJob('x'))
      .catch((e: unknown) => e)) as ApiException<string>;

    expect(missing.code).toBe(404);
    expect(JSON.parse(missing.body)).toMatchObject({
      reason: 'NotFound',
      message: 'trainjobs.trainer.kubeflow.org "nope" not found',
      details: { name: 'nope', group: 'trainer.kubeflow.org', kind: 'trainjobs' },
    });
    expect(noNs.code).toBe(404);
    expect(JSON.parse(noNs.body)).toMatchObject({
      message: 'namespaces "no-such-ns" not found',
      details: { kind: 'namespaces' },
    });
  });
});

describe('cluster simulator: speed, faults and statistics', () => {
  it('runs an hour of training in about a second at speed 3600, with the same event order', async () => {
    const h = await harness({
      trainerVersion: '2.2',
      speed: 3600,
      // This test reads simulated durations off the condition times.
      timestamps: 'simulated',
      queues: [
        { name: 'team-a', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 4, cpu: 64, memory: '256Gi' } },
      ],
    });
    try {
      const ns = await h.namespace();
      const hour = { [SIM_ANNOTATIONS.duration]: '3600' };
      await h.create(ns, trainJob('first', { gpus: 4, annotations: hour }));
      await h.create(ns, trainJob('second', { gpus: 4, annotations: hour }));
      const started = performance.now();
      let second: Obj | undefined;
      while (performance.now() - started < 10_000) {
        second = await h.get(ns, 'second');
        if (cond(second, 'Complete')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const elapsed = performance.now() - started;
      const first = await h.get(ns, 'first');

      expect(cond(second, 'Complete')?.status).toBe('True');
      expect(elapsed).toBeLessThan(5_000);
      expect(elapsed).toBeGreaterThan(1_500); // two hours of simulated time, back to back
      const t = (o: Obj | undefined, c: string) => Date.parse(cond(o, c)?.lastTransitionTime ?? '');
      expect(t(first, 'Complete') - t(first, 'Suspended')).toBe(3_600_000);
      expect(t(second, 'Suspended')).toBe(t(first, 'Complete')); // resumed the moment the first freed the GPUs
    } finally {
      await h.sim.close();
    }
  });

  it('stamps objects with the wall clock by default, as a real apiserver: only training is accelerated', async () => {
    const h = await harness({
      trainerVersion: '2.2',
      speed: 3600,
      queues: [
        { name: 'team-a', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 4, cpu: 64, memory: '256Gi' } },
      ],
    });
    try {
      const ns = await h.namespace();
      const before = Date.now();
      await h.create(ns, trainJob('wall', { gpus: 4, annotations: { [SIM_ANNOTATIONS.duration]: '3600' } }));
      let done: Obj | undefined;
      while (Date.now() - before < 10_000) {
        done = await h.get(ns, 'wall');
        if (cond(done, 'Complete')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const after = Date.now();
      // An hour of simulated training, finished; every timestamp within the real seconds it took.
      expect(cond(done, 'Complete')?.status).toBe('True');
      const stamps = [
        (done?.metadata as { creationTimestamp?: string } | undefined)?.creationTimestamp,
        ...((done?.status?.conditions ?? []) as Condition[]).map((c) => c.lastTransitionTime),
        ...(((await h.workloadOf(done as Obj))?.status?.conditions ?? []) as Condition[]).map(
          (c) => c.lastTransitionTime,
        ),
      ].map((t) => Date.parse(String(t)));
      expect(stamps.length).toBeGreaterThan(4);
      for (const t of stamps) {
        expect(t).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
        expect(t).toBeLessThanOrEqual(after);
      }
    } finally {
      await h.sim.close();
    }
  });

  it('fails the next N matching requests with 429 or 503, then serves normally', async () => {
    const h = await harness({ trainerVersion: '2.2', speed: 0 });
    try {
      const ns = await h.namespace();
      h.sim.inject({ path: '/trainjobs', method: 'POST', status: 429, times: 2, retryAfterSeconds: 1 });
      h.sim.inject({ path: /\/trainjobs\/flaky$/, status: 503, times: 1 });

      const codes: number[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await h.create(ns, trainJob('flaky', { queue: null })).then(
          () => 201,
          (e: ApiException<string>) => e.code,
        );
        codes.push(r);
      }
      const get1 = await h.get(ns, 'flaky').then(
        () => 200,
        (e: ApiException<string>) => e.code,
      );
      const get2 = await h.get(ns, 'flaky').then(() => 200);

      expect(codes).toEqual([429, 429, 201]);
      expect([get1, get2]).toEqual([503, 200]);
      expect(h.sim.stats().requests.faultsServed).toBe(3);
      expect(h.sim.stats().pendingFaults).toBe(0);
    } finally {
      await h.sim.close();
    }
  });

  it('serves the 429 body of the real server, with Retry-After', async () => {
    const sim = await startClusterSimulator({
      speed: 0,
      log: () => {},
      faults: [{ path: '/api', status: 429, times: 1, retryAfterSeconds: 2 }],
    });
    try {
      const res = await fetch(`${sim.url}/api/v1/namespaces`);
      expect(res.status).toBe(429);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(await res.json()).toEqual({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'Too many requests, please try again later.',
        reason: 'TooManyRequests',
        details: { retryAfterSeconds: 2 },
        code: 429,
      });
    } finally {
      await sim.close();
    }
  });
});

describe('cluster simulator: coscheduling PodGroups instead of Kueue', () => {
  it('holds the gang in a Pending PodGroup until the cluster has room, then runs it', async () => {
    const h = await harness({
      trainerVersion: '2.3',
      speed: 0,
      gang: 'coscheduling',
      capacity: { 'nvidia.com/gpu': 8 },
    });
    try {
      const ns = await h.namespace();
      await h.create(ns, trainJob('pg-1', { queue: null, nodes: 2, gpus: 4 }));
      await h.create(ns, trainJob('pg-2', { queue: null, nodes: 2, gpus: 4 }));
      await h.sim.settle();
      const pgApi = { group: 'scheduling.x-k8s.io', version: 'v1alpha1', plural: 'podgroups', namespace: ns };
      const pg = async (name: string) =>
        (await h.custom.getNamespacedCustomObject({ ...pgApi, name })) as Obj;

      expect((await pg('pg-1')).spec).toEqual({
        minMember: 2,
        minResources: { cpu: '16', memory: '64Gi', 'nvidia.com/gpu': '8' },
        scheduleTimeoutSeconds: 60,
      });
      expect((await pg('pg-1')).status).toMatchObject({ phase: 'Running', running: 2 });
      // Its pods exist (unschedulable): the real PodGroup controller's Scheduling, 0 running.
      expect((await pg('pg-2')).status).toMatchObject({ phase: 'Scheduling', running: 0 });
      expect((await h.get(ns, 'pg-2')).status?.jobsStatus).toEqual([
        { name: 'node', active: 1, ready: 0, succeeded: 0, failed: 0, suspended: 0 },
      ]);

      await h.sim.advance(60);

      expect((await pg('pg-1')).status).toMatchObject({ phase: 'Finished', succeeded: 2 });
      expect((await pg('pg-2')).status).toMatchObject({ phase: 'Running' });
    } finally {
      await h.sim.close();
    }
  });
});

describe('cluster simulator: the Trainer v2.1 shape', () => {
  it('serves v2.1 TrainJobs: no trainerStatus, no Kueue runtime patch, runtimePatches unknown', async () => {
    const h = await harness({
      trainerVersion: '2.1',
      speed: 0,
      queues: [
        { name: 'team-a', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '256Gi' } },
      ],
    });
    try {
      const ns = await h.namespace();
      const created = await h.create(ns, {
        ...trainJob('old', { gpus: 4 }),
        spec: { ...trainJob('old').spec, podTemplateOverrides: [] },
      });
      const strict = await fetch(
        `${h.sim.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/${ns}/trainjobs?fieldValidation=Strict`,
        {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({
            ...trainJob('new-shape'),
            spec: { ...trainJob('x').spec, runtimePatches: [] },
          }),
        },
      );
      await h.sim.settle();
      await h.sim.advance(30);
      const running = await h.get(ns, 'old');

      expect(created.spec).toMatchObject({ suspend: true, podTemplateOverrides: [] });
      expect(created.spec).not.toHaveProperty('runtimePatches');
      expect(strict.status).toBe(400);
      expect(((await strict.json()) as { message: string }).message).toMatch(
        /unknown field "spec.runtimePatches"/,
      );
      expect(cond(running, 'Suspended')).toMatchObject({ status: 'False', reason: 'Resumed' });
      expect(running.status?.jobsStatus).toEqual([
        { name: 'node', active: 1, ready: 1, succeeded: 0, failed: 0, suspended: 0 },
      ]);
      expect(running.status).not.toHaveProperty('trainerStatus');
    } finally {
      await h.sim.close();
    }
  });
});

describe('cluster simulator: Trainer’s webhook checks initializers against the runtime', () => {
  /** A ClusterTrainingRuntime with a `node` job and, optionally, a dataset-initializer job. */
  function runtime(name: string, dataset?: { mount: boolean }): Obj {
    const job = (jobName: string, container: Record<string, unknown>) => ({
      name: jobName,
      template: { spec: { template: { spec: { containers: [container] } } } },
    });
    const replicatedJobs = [
      ...(dataset
        ? [
            job('dataset-initializer', {
              name: 'dataset-initializer',
              image: 'ghcr.io/kubeflow/trainer/dataset-initializer',
              ...(dataset.mount && { volumeMounts: [{ name: 'initializer', mountPath: '/workspace' }] }),
            }),
          ]
        : []),
      job('node', { name: 'node', image: 'pytorch/pytorch' }),
    ];
    return {
      apiVersion: 'trainer.kubeflow.org/v1alpha1',
      kind: 'ClusterTrainingRuntime',
      metadata: { name },
      spec: { mlPolicy: { numNodes: 1, torch: {} }, template: { spec: { replicatedJobs } } },
    };
  }

  function withInitializer(job: Obj, init: Record<string, unknown>): Obj {
    return { ...job, spec: { ...job.spec, initializer: init } };
  }

  const ref = (name: string) =>
    `{"name":"${name}","apiGroup":"trainer.kubeflow.org","kind":"ClusterTrainingRuntime"}`;
  const denied = (msg: string) =>
    `admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: ${msg}`;
  const dataset = { dataset: { storageUri: 's3://data/train' } };

  it.each(['2.1', '2.2', '2.3'] as const)(
    'Trainer v%s refuses initializer config on a runtime without the initializer jobs, with 403 and the webhook’s message',
    async (trainerVersion) => {
      const h = await harness({ trainerVersion, speed: 0, crdRoot: null });
      try {
        const ns = await h.namespace();
        const one = (await h
          .create(ns, withInitializer(trainJob('ds', { queue: null }), dataset))
          .catch((e: unknown) => e)) as ApiException<string>;
        const both = (await h
          .create(
            ns,
            withInitializer(trainJob('both', { queue: null }), {
              ...dataset,
              model: { storageUri: 'hf://acme/base' },
            }),
          )
          .catch((e: unknown) => e)) as ApiException<string>;
        const plain = await h.create(ns, trainJob('plain', { queue: null }));

        expect(one.code).toBe(403);
        expect(JSON.parse(one.body)).toEqual({
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: denied(
            `spec.runtimeRef: Invalid value: ${ref('torch-distributed')}: must have dataset-initializer job when trainJob is configured with input datasetConfig`,
          ),
          reason: 'Forbidden',
          code: 403,
        });
        expect(both.code).toBe(403);
        expect(JSON.parse(both.body).message).toBe(
          denied(
            `[spec.runtimeRef: Invalid value: ${ref('torch-distributed')}: must have dataset-initializer job when trainJob is configured with input datasetConfig, ` +
              `spec.runtimeRef: Invalid value: ${ref('torch-distributed')}: must have model-initializer job when trainJob is configured with input modelConfig]`,
          ),
        );
        expect(plain.metadata.name).toBe('plain');
      } finally {
        await h.sim.close();
      }
    },
  );

  it.each([
    ['2.1', false, undefined],
    ['2.2', false, undefined],
    [
      '2.3',
      false,
      'must have volumeMount with name - initializer in container dataset-initializer of the dataset-initializer job',
    ],
    ['2.3', true, undefined],
  ] as const)(
    'Trainer v%s, dataset-initializer with the initializer volume mounted: %s → refused: %s',
    async (trainerVersion, mount, refusal) => {
      const h = await harness({ trainerVersion, speed: 0, crdRoot: null });
      try {
        const ns = await h.namespace();
        await h.custom.createClusterCustomObject({
          group: 'trainer.kubeflow.org',
          version: 'v1alpha1',
          plural: 'clustertrainingruntimes',
          body: runtime('with-data', { mount }),
        });
        const job = withInitializer(trainJob('ds', { queue: null, runtime: 'with-data' }), dataset);
        const result = await h.create(ns, job).catch((e: unknown) => e as ApiException<string>);

        if (refusal === undefined) {
          expect((result as Obj).spec).toMatchObject({ initializer: dataset });
        } else {
          expect((result as ApiException<string>).code).toBe(403);
          expect(JSON.parse((result as ApiException<string>).body).message).toBe(
            denied(`spec.runtimeRef: Invalid value: ${ref('with-data')}: ${refusal}`),
          );
        }
      } finally {
        await h.sim.close();
      }
    },
  );

  it('accepts the same TrainJob when the webhooks are off (webhooks: false)', async () => {
    const h = await harness({ trainerVersion: '2.2', speed: 0, crdRoot: null, webhooks: false });
    try {
      const ns = await h.namespace();
      const created = await h.create(ns, withInitializer(trainJob('ds', { queue: null }), dataset));

      expect(created.spec).toMatchObject({ initializer: dataset });
    } finally {
      await h.sim.close();
    }
  });
});

describe('cluster simulator: Kueue configuration per test (waitForPodsReady, flavors, versions)', () => {
  const queues = [
    { name: 'team-a', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '256Gi' } },
  ];

  it('waitForPodsReady: PodsReady written; a gang not ready in time is evicted PodsReadyTimeout, requeued after the backoff, and deactivated past backoffLimitCount', async () => {
    const h = await harness({
      speed: 0,
      queues,
      waitForPodsReady: { timeoutSeconds: 60, requeuingStrategy: { backoffLimitCount: 1 } }, // backoffBaseSeconds 60 by default
    });
    try {
      const ns = await h.namespace();
      const fast = await h.create(ns, trainJob('fast', { gpus: 4 }));
      const slow = await h.create(
        ns,
        trainJob('slow', { gpus: 4, annotations: { [SIM_ANNOTATIONS.slowStart]: '1000' } }),
      );
      await h.sim.settle();
      expect(cond(await h.workloadOf(fast), 'PodsReady')).toMatchObject({
        status: 'True',
        reason: 'Started',
      });
      expect(cond(await h.workloadOf(slow), 'PodsReady')).toMatchObject({
        status: 'False',
        reason: 'WaitForStart',
      });

      await h.sim.advance(60); // the timeout: evicted, pods terminating
      const timedOut = await h.workloadOf(slow);
      expect(cond(timedOut, 'Evicted')).toMatchObject({
        status: 'True',
        reason: 'PodsReadyTimeout',
        message: `Exceeded the PodsReady timeout ${ns}/${timedOut?.metadata.name}`,
      });
      expect(timedOut?.status?.requeueState).toMatchObject({ count: 1 });
      expect((await h.get(ns, 'slow')).spec?.suspend).toBe(true);

      await h.sim.advance(30); // pods gone: reservation withdrawn, Requeued=False until the backoff ends
      const backingOff = await h.workloadOf(slow);
      expect(cond(backingOff, 'Requeued')).toMatchObject({ status: 'False', reason: 'PodsReadyTimeout' });
      expect(cond(backingOff, 'QuotaReserved')?.status).toBe('False');

      const requeueState = (backingOff?.status?.requeueState ?? {}) as { requeueAt?: string };
      expect(Date.parse(String(requeueState.requeueAt))).toBe(
        Date.parse(String(cond(timedOut, 'Evicted')?.lastTransitionTime)) + 60_000,
      );
      await h.sim.advance(29);
      expect(cond(await h.workloadOf(slow), 'Requeued')?.status).toBe('False');
      await h.sim.advance(1); // the 60 s backoff from the eviction is over
      const readmitted = await h.workloadOf(slow);
      expect(cond(readmitted, 'Requeued')).toMatchObject({ status: 'True', reason: 'BackoffFinished' });
      expect(cond(readmitted, 'Admitted')?.status).toBe('True');

      await h.sim.advance(60); // second timeout: past backoffLimitCount 1 → deactivated
      const deactivated = await h.workloadOf(slow);
      expect(deactivated?.spec?.active).toBe(false);
      expect(cond(deactivated, 'Evicted')).toMatchObject({
        status: 'True',
        reason: 'DeactivatedDueToRequeuingLimitExceeded',
        message: 'The workload is deactivated due to exceeding the maximum number of re-queuing retries',
      });
      expect(cond(deactivated, 'DeactivationTarget')).toBeUndefined();
      expect(deactivated?.status).not.toHaveProperty('requeueState');
      await h.sim.advance(600);
      expect(cond(await h.workloadOf(slow), 'QuotaReserved')?.status).toBe('False');
      expect((await h.get(ns, 'slow')).spec?.suspend).toBe(true);
    } finally {
      await h.sim.close();
    }
  });

  it('the flavor’s node labels and tolerations reach the pods through Kueue’s runtime patch', async () => {
    const h = await harness({
      speed: 0,
      queues,
      flavor: {
        nodeLabels: { 'cloud.example.com/gpu': 'h100' },
        tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
      },
    });
    try {
      const ns = await h.namespace();
      await h.create(ns, trainJob('flavored', { gpus: 4 }));
      await h.sim.settle();
      const job = await h.get(ns, 'flavored');
      type Patch = {
        manager: string;
        trainingRuntimeSpec: {
          template: {
            spec: { replicatedJobs: Array<{ template: { spec: { template: { spec: unknown } } } }> };
          };
        };
      };
      const patch = ((job.spec?.runtimePatches ?? []) as Patch[]).find(
        (p) => p.manager === 'kueue.x-k8s.io/manager',
      );
      expect(patch?.trainingRuntimeSpec.template.spec.replicatedJobs[0]?.template.spec.template.spec).toEqual(
        {
          nodeSelector: { 'cloud.example.com/gpu': 'h100' },
          tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' }],
        },
      );
    } finally {
      await h.sim.close();
    }
  });

  it('Kueue 0.19 with Trainer 2.1 admits a TrainJob but never unsuspends it (no runtime patch, kueue#11931)', async () => {
    const h = await harness({ speed: 0, queues, trainerVersion: '2.1', kueueVersion: '0.19' });
    try {
      const ns = await h.namespace();
      const job = await h.create(ns, trainJob('skewed', { gpus: 4 }));
      await h.sim.settle();
      await h.sim.advance(600);

      expect(cond(await h.workloadOf(job), 'Admitted')?.status).toBe('True');
      const stuck = await h.get(ns, 'skewed');
      expect(stuck.spec?.suspend).toBe(true);
      expect(cond(stuck, 'Suspended')?.status).toBe('True');
    } finally {
      await h.sim.close();
    }
  });

  it('a Workload deactivated by a person is evicted Deactivated and never readmitted', async () => {
    const h = await harness({ speed: 0, queues });
    try {
      const ns = await h.namespace();
      const job = await h.create(ns, trainJob('off', { gpus: 4 }));
      await h.sim.settle();
      const res = await fetch(`${h.sim.url}/_sim/deactivate`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ namespace: ns, name: 'off' }),
      });
      expect(await res.json()).toEqual({ deactivated: true });
      await h.sim.advance(120);

      const wl = await h.workloadOf(job);
      expect(wl?.spec?.active).toBe(false);
      expect(cond(wl, 'Evicted')).toMatchObject({
        status: 'True',
        reason: 'Deactivated',
        message: 'The workload is deactivated',
      });
      expect(cond(wl, 'Requeued')).toMatchObject({ status: 'False', reason: 'Deactivated' });
      expect(cond(wl, 'QuotaReserved')?.status).toBe('False');
      expect((await h.get(ns, 'off')).spec?.suspend).toBe(true);
    } finally {
      await h.sim.close();
    }
  });
});

const PYTORCHJOBS = { group: 'kubeflow.org', version: 'v1', plural: 'pytorchjobs' };

/** A Training Operator v1 PyTorchJob (Master + Workers) with a queue label, suspended or not as sent. */
function pyTorchJob(name: string, o: { queue?: string; suspend?: boolean; workers?: number } = {}): Obj {
  const container = (role: string) => ({
    name: 'pytorch',
    image: 'ghcr.io/acme/train:1.0',
    args: ['--lr', '0.001'],
    resources: { requests: { 'nvidia.com/gpu': 2 } },
    env: [{ name: 'RANK_ROLE', value: role }],
  });
  return {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: { name, labels: o.queue ? { 'kueue.x-k8s.io/queue-name': o.queue } : {} },
    spec: {
      pytorchReplicaSpecs: {
        Master: { replicas: 1, template: { spec: { containers: [container('master')] } } },
        Worker: { replicas: o.workers ?? 2, template: { spec: { containers: [container('worker')] } } },
      },
      ...(o.suspend === undefined ? {} : { runPolicy: { suspend: o.suspend } }),
    },
  };
}

describe("cluster simulator: Kueue manages only its configuration's integrations", () => {
  const conditionsOf = (o: Obj) =>
    ((o.status?.conditions ?? []) as Condition[]).map((c) => [c.type, c.status, c.reason]);

  it('Kueue v0.19 default (Trainer 2.2): a queued PyTorchJob gets no Workload and stays suspended; a TrainJob beside it is admitted', async () => {
    const h = await harness({ trainerVersion: '2.2', speed: 0 });
    try {
      const ns = await h.namespace();
      const q = await h.queue(ns, 8);
      const legacy = (await h.custom.createNamespacedCustomObject({
        ...PYTORCHJOBS,
        namespace: ns,
        body: pyTorchJob('legacy', { queue: q, suspend: true }),
      })) as Obj;
      const tj = await h.create(ns, trainJob('modern', { queue: q, gpus: 2 }));
      await h.sim.settle();
      await h.sim.advance(600);

      expect(await h.workloadOf(legacy)).toBeUndefined();
      const stuck = (await h.custom.getNamespacedCustomObject({
        ...PYTORCHJOBS,
        namespace: ns,
        name: 'legacy',
      })) as Obj;
      expect(stuck.spec?.runPolicy).toMatchObject({ suspend: true });
      expect(conditionsOf(stuck)).toEqual([
        ['Created', 'True', 'PyTorchJobCreated'],
        ['Suspended', 'True', 'PyTorchJobSuspended'],
      ]);
      expect(cond(await h.workloadOf(tj), 'Admitted')?.status).toBe('True');
    } finally {
      await h.sim.close();
    }
  });

  it("Kueue v0.19 default: its no-op webhook leaves an unsuspended queued PyTorchJob as sent, and it runs outside Kueue's quota", async () => {
    const h = await harness({ trainerVersion: '2.2', speed: 0 });
    try {
      const ns = await h.namespace();
      const q = await h.queue(ns, 2); // 2 GPUs: the job's 6 would never fit if Kueue counted it
      const created = (await h.custom.createNamespacedCustomObject({
        ...PYTORCHJOBS,
        namespace: ns,
        body: pyTorchJob('unqueued', { queue: q }),
      })) as Obj;
      expect((created.spec?.runPolicy as { suspend?: boolean } | undefined)?.suspend).toBeUndefined();
      await h.sim.settle();

      expect(await h.workloadOf(created)).toBeUndefined();
      const running = (await h.custom.getNamespacedCustomObject({
        ...PYTORCHJOBS,
        namespace: ns,
        name: 'unqueued',
      })) as Obj;
      expect(cond(running, 'Running')?.status).toBe('True');
    } finally {
      await h.sim.close();
    }
  });

  it('Kueue v0.16 default (Trainer 2.1) enables the v1 integrations: a queued PyTorchJob gets its Workload', async () => {
    const h = await harness({ trainerVersion: '2.1', speed: 0 });
    try {
      const ns = await h.namespace();
      const q = await h.queue(ns, 8);
      const job = (await h.custom.createNamespacedCustomObject({
        ...PYTORCHJOBS,
        namespace: ns,
        body: pyTorchJob('legacy', { queue: q }),
      })) as Obj;
      await h.sim.settle();
      expect(job.spec?.runPolicy).toMatchObject({ suspend: true }); // Kueue's webhook suspended it
      expect(cond(await h.workloadOf(job), 'Admitted')?.status).toBe('True');
    } finally {
      await h.sim.close();
    }
  });

  it("never manages a Training Operator v1 MPIJob: Kueue's kubeflow.org/mpijob integration is MPI Operator v2beta1", async () => {
    const h = await harness({ trainerVersion: '2.2', speed: 0, kueueIntegrations: ['kubeflow.org/mpijob'] });
    try {
      const ns = await h.namespace();
      const q = await h.queue(ns, 8);
      const mpi = { group: 'kubeflow.org', version: 'v1', plural: 'mpijobs' };
      const container = { name: 'mpi', image: 'ghcr.io/acme/train:1.0' };
      const job = (await h.custom.createNamespacedCustomObject({
        ...mpi,
        namespace: ns,
        body: {
          apiVersion: 'kubeflow.org/v1',
          kind: 'MPIJob',
          metadata: { name: 'mpi', labels: { 'kueue.x-k8s.io/queue-name': q } },
          spec: {
            mpiReplicaSpecs: {
              Launcher: { replicas: 1, template: { spec: { containers: [container] } } },
              Worker: { replicas: 2, template: { spec: { containers: [container] } } },
            },
            runPolicy: { suspend: true },
          },
        },
      })) as Obj;
      await h.sim.settle();
      await h.sim.advance(600);
      expect(await h.workloadOf(job)).toBeUndefined();
      const stuck = (await h.custom.getNamespacedCustomObject({ ...mpi, namespace: ns, name: 'mpi' })) as Obj;
      expect(stuck.spec?.runPolicy).toMatchObject({ suspend: true });
    } finally {
      await h.sim.close();
    }
  });

  it('with kubeflow.org/pytorchjob enabled, runs a PyTorchJob through Kueue: Created, Suspended, Resumed, Running, Succeeded', async () => {
    const h = await harness({
      trainerVersion: '2.2',
      speed: 0,
      kueueIntegrations: [...KUEUE_DEFAULT_INTEGRATIONS['0.19'], 'kubeflow.org/pytorchjob'],
    });
    try {
      const ns = await h.namespace();
      const q = await h.queue(ns, 8);
      const api = PYTORCHJOBS;
      const job = (await h.custom.createNamespacedCustomObject({
        ...api,
        namespace: ns,
        body: pyTorchJob('legacy', { queue: q }),
      })) as Obj;
      await h.sim.settle();

      const wl = await h.workloadOf(job);
      expect(wl?.metadata.name).toMatch(/^pytorchjob-legacy-[0-9a-f]{5}$/);
      expect(wl?.spec?.podSets).toEqual([
        expect.objectContaining({ name: 'master', count: 1 }),
        expect.objectContaining({ name: 'worker', count: 2 }),
      ]);
      const running = (await h.custom.getNamespacedCustomObject({
        ...api,
        namespace: ns,
        name: 'legacy',
      })) as Obj;
      expect(running.spec?.runPolicy).toMatchObject({ suspend: false });
      expect(
        ((running.status?.conditions ?? []) as Condition[]).map((c) => [c.type, c.status, c.reason]),
      ).toEqual([
        ['Created', 'True', 'PyTorchJobCreated'],
        ['Suspended', 'False', 'PyTorchJobResumed'],
        ['Running', 'True', 'PyTorchJobRunning'],
      ]);

      await h.sim.advance(60);

      const done = (await h.custom.getNamespacedCustomObject({
        ...api,
        namespace: ns,
        name: 'legacy',
      })) as Obj;
      expect(cond(done, 'Succeeded')).toMatchObject({
        status: 'True',
        reason: 'PyTorchJobSucceeded',
        message: `PyTorchJob ${ns}/legacy successfully completed.`,
      });
      expect(cond(done, 'Running')?.status).toBe('False');
      expect(done.status?.replicaStatuses).toEqual({ Master: { succeeded: 1 }, Worker: { succeeded: 2 } });
    } finally {
      await h.sim.close();
    }
  });
});
