import {
  CreateBucketCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMetricObject } from '../../lib/metrics/channel.ts';
import { finalAccuracy, SIM_ANNOTATIONS, startClusterSimulator } from '../../local/simulator/index.ts';
import { DEFAULT_HYPERPARAMETERS, holdoutAccuracy } from '../../local/simulator/objective.ts';

/**
 * The simulated evaluation code (a job given GANTRY_EVALUATION) loads the model it scores before
 * it evaluates: however long that read takes, the job reports no score and does not end before
 * it. A real S3 server (fauxqs) serves the model; the test holds the one GetObject of the model's
 * metrics.json (an SDK middleware) to play a slow read, which under load is what made an
 * evaluation job end with the score of its own default hyperparameters instead of the model's.
 */

const BUCKET = 'gantry-sim-evaluation';
const TOKEN = '0123456789abcdef0123456789abcdef';
const SPEED = 600;
const DURATION_S = 60;
/** The model scored: trained with dropout 0, so its holdout score is below its training's. */
const MODEL_HP = { lr: 0.00316, batchSize: 64, dropout: 0 };
// biome-ignore lint/suspicious/noExplicitAny: manifests are read field by field
type Obj = Record<string, any>;

describe('simulated evaluation job: the model is loaded before anything is scored', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let s3: S3Client;
  let sim: Awaited<ReturnType<typeof startClusterSimulator>>;
  let custom: CustomObjectsApi;
  let release: () => void = () => {};
  let held: Promise<void>;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    const client = () =>
      new S3Client({
        endpoint: `http://127.0.0.1:${fauxqs.port}`,
        forcePathStyle: true,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
    s3 = client();
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    await s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: 'models/churn/1/metrics.json',
        Body: JSON.stringify({ accuracy: finalAccuracy(MODEL_HP), hyperparameters: MODEL_HP }),
      }),
    );
    // The simulator's own client: its read of the model's metrics.json waits for `release`.
    const simS3 = client();
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let seen: () => void = () => {};
    held = new Promise<void>((r) => {
      seen = r;
    });
    simS3.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { Key?: string };
        if (context.commandName === 'GetObjectCommand' && input.Key === 'models/churn/1/metrics.json') {
          seen();
          await gate;
        }
        return next(args);
      },
      { step: 'initialize', name: 'holdModelRead' },
    );
    sim = await startClusterSimulator({
      trainerVersion: '2.3',
      speed: SPEED,
      s3: simS3,
      log: () => {},
      queues: [
        { name: 'team-a', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '512Gi' } },
      ],
    });
    const kc = new KubeConfig();
    kc.loadFromString(sim.kubeconfigYaml());
    custom = kc.makeApiClient(CustomObjectsApi);
  });

  afterAll(async () => {
    release();
    await sim?.close();
    s3?.destroy();
    await fauxqs?.stop();
  });

  const TRAINER = { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs' };
  const get = async () =>
    (await custom.getNamespacedCustomObject({ ...TRAINER, namespace: 'default', name: 'eval' })) as Obj;
  const complete = (o: Obj) =>
    o.status?.conditions?.find((c: Obj) => c.type === 'Complete')?.status === 'True';

  async function lines() {
    const listed = await s3.send(
      new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `runs/r1/eval/${TOKEN}/` }),
    );
    const out = [];
    for (const o of listed.Contents ?? []) {
      const text = await (
        await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: o.Key }))
      ).Body!.transformToString();
      out.push(...parseMetricObject(text).lines);
    }
    return out.sort((a, b) => (a.progressPercentage ?? 0) - (b.progressPercentage ?? 0));
  }

  it('a slow model read holds the job; once read, it reports the model’s holdout score and ends', async () => {
    const created = sim.clock.now();
    await custom.createNamespacedCustomObject({
      ...TRAINER,
      namespace: 'default',
      body: {
        apiVersion: 'trainer.kubeflow.org/v1alpha1',
        kind: 'TrainJob',
        metadata: {
          name: 'eval',
          labels: { 'app.kubernetes.io/managed-by': 'gantry', 'kueue.x-k8s.io/queue-name': 'team-a' },
          annotations: { [SIM_ANNOTATIONS.duration]: String(DURATION_S) },
        },
        spec: {
          runtimeRef: { name: 'torch-distributed' },
          trainer: {
            image: 'ghcr.io/acme/eval:1.0',
            numNodes: 1,
            resourcesPerNode: { requests: { 'nvidia.com/gpu': 1 } },
            env: Object.entries({
              GANTRY_EVALUATION: 'candidate',
              GANTRY_MODEL_URI: `s3://${BUCKET}/models/churn/1/`,
              GANTRY_METRICS_URI: `s3://${BUCKET}/runs/r1/eval/${TOKEN}/`,
            }).map(([name, value]) => ({ name, value })),
          },
        },
      },
    });
    await held;
    // Ten times the job's duration passes on the simulator's clock while the read is held.
    while (sim.clock.now() < created + 10 * DURATION_S * 1000) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 100));
    const whileHeld = await get();
    const reportedWhileHeld = await lines();

    release();
    let done = await get();
    for (let i = 0; i < 200 && !complete(done); i++) {
      await new Promise((r) => setTimeout(r, 50));
      done = await get();
    }
    const reported = await lines();

    expect(complete(whileHeld)).toBe(false);
    expect(whileHeld.status?.conditions?.find((c: Obj) => c.type === 'Failed')?.status).not.toBe('True');
    expect(reportedWhileHeld.every((l) => (l.progressPercentage ?? 0) === 0)).toBe(true);
    expect(complete(done)).toBe(true);
    const last = reported.at(-1);
    expect(last?.progressPercentage).toBe(100);
    expect(last?.metrics?.get('accuracy')).toBeCloseTo(holdoutAccuracy(MODEL_HP), 5);
    // Which differs from the score of the evaluation job's own (default) hyperparameters.
    expect(holdoutAccuracy(MODEL_HP)).not.toBeCloseTo(finalAccuracy(DEFAULT_HYPERPARAMETERS), 2);
  });
});
