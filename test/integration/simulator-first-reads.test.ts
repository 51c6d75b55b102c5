import {
  CreateBucketCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMetricObject } from '../../lib/metrics/channel.ts';
import { finalAccuracy, type startClusterSimulator } from '../../local/simulator/index.ts';
import { DEFAULT_HYPERPARAMETERS, holdoutAccuracy } from '../../local/simulator/objective.ts';
import { simTrainJob, startSimulatorWithClient, TRAINER } from '../helpers/sim-client.ts';

/**
 * The simulated training and evaluation code read what they start from before they train or score:
 * an evaluation job the model it scores (GANTRY_MODEL_URI's metrics.json), a resumed training its
 * checkpoint (GANTRY_CHECKPOINT_URI). However long that read takes, the job reports no score and
 * does not end before it returns. A real S3 server (fauxqs) serves both; the test holds the
 * simulator's GetObject of each (an SDK middleware on the simulator's client) to play a slow read.
 * Under load, an evaluation job used to end before its read returned and reported the score of its
 * own default hyperparameters instead of the model's.
 */

const BUCKET = 'gantry-sim-reads';
const TOKEN = '0123456789abcdef0123456789abcdef';
const SPEED = 600;
const DURATION_S = 60;
/** The model scored: trained with dropout 0, so its holdout score is below its training's. */
const MODEL_HP = { lr: 0.00316, batchSize: 64, dropout: 0 };
const MODEL_KEY = 'models/churn/1/metrics.json';
const CHECKPOINT_KEY = 'runs/r2/checkpoints/latest.json';
// biome-ignore lint/suspicious/noExplicitAny: manifests are read field by field
type Obj = Record<string, any>;

/** A GetObject of `key` by the simulator waits until `release()`; `seen` resolves when it starts. */
interface Hold {
  seen: Promise<void>;
  release: () => void;
}

function hold(): Hold & { arrive: () => void; gate: Promise<void> } {
  let arrive: () => void = () => {};
  let release: () => void = () => {};
  const seen = new Promise<void>((r) => {
    arrive = r;
  });
  const gate = new Promise<void>((r) => {
    release = r;
  });
  return { seen, release, arrive, gate };
}

describe('simulated training code: the model or checkpoint is read before anything is reported', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let s3: S3Client;
  let sim: Awaited<ReturnType<typeof startClusterSimulator>>;
  let custom: CustomObjectsApi;
  const holds = new Map([
    [MODEL_KEY, hold()],
    [CHECKPOINT_KEY, hold()],
  ]);

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
        Key: MODEL_KEY,
        Body: JSON.stringify({ accuracy: finalAccuracy(MODEL_HP), hyperparameters: MODEL_HP }),
      }),
    );
    await s3.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: CHECKPOINT_KEY, Body: JSON.stringify({ progress: 0.6 }) }),
    );
    const simS3 = client();
    simS3.middlewareStack.add(
      (next, context) => async (args) => {
        const h = holds.get((args.input as { Key?: string }).Key ?? '');
        if (context.commandName === 'GetObjectCommand' && h) {
          h.arrive();
          await h.gate;
        }
        return next(args);
      },
      { step: 'initialize', name: 'holdFirstReads' },
    );
    ({ sim, custom } = await startSimulatorWithClient({ speed: SPEED, s3: simS3 }));
  });

  afterAll(async () => {
    for (const h of holds.values()) h.release();
    await sim?.close();
    s3?.destroy();
    await fauxqs?.stop();
  });

  const get = async (name: string) =>
    (await custom.getNamespacedCustomObject({ ...TRAINER, namespace: 'default', name })) as Obj;
  const condition = (o: Obj, type: string) =>
    o.status?.conditions?.find((c: Obj) => c.type === type)?.status === 'True';

  async function lines(prefix: string) {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }));
    const out = [];
    for (const o of listed.Contents ?? []) {
      const text = await (
        await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: o.Key }))
      ).Body!.transformToString();
      out.push(...parseMetricObject(text).lines);
    }
    return out.sort((a, b) => (a.progressPercentage ?? 0) - (b.progressPercentage ?? 0));
  }

  /**
   * Creates job `name` with `env`, holds its read of `key` while ten times its duration passes on
   * the simulator's clock, then lets the read return and waits for the job to end.
   */
  async function heldThenReleased(name: string, env: Record<string, string>, key: string) {
    const created = sim.clock.now();
    await custom.createNamespacedCustomObject({
      ...TRAINER,
      namespace: 'default',
      body: simTrainJob(name, env, { durationSeconds: DURATION_S }),
    });
    const h = holds.get(key) as Hold;
    await h.seen;
    while (sim.clock.now() < created + 10 * DURATION_S * 1000) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 100));
    const whileHeld = await get(name);
    const reportedWhileHeld = await lines(`runs/${name}/metrics/`);
    h.release();
    let done = await get(name);
    for (let i = 0; i < 200 && !condition(done, 'Complete') && !condition(done, 'Failed'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      done = await get(name);
    }
    return { whileHeld, reportedWhileHeld, done, reported: await lines(`runs/${name}/metrics/`) };
  }

  it('a slow model read holds an evaluation job; once read, it reports the model’s holdout score and ends', async () => {
    const r = await heldThenReleased(
      'r1',
      {
        GANTRY_EVALUATION: 'candidate',
        GANTRY_MODEL_URI: `s3://${BUCKET}/models/churn/1/`,
        GANTRY_METRICS_URI: `s3://${BUCKET}/runs/r1/metrics/${TOKEN}/`,
      },
      MODEL_KEY,
    );

    expect(condition(r.whileHeld, 'Complete')).toBe(false);
    expect(condition(r.whileHeld, 'Failed')).toBe(false);
    expect(r.reportedWhileHeld.every((l) => (l.progressPercentage ?? 0) === 0)).toBe(true);
    expect(condition(r.done, 'Complete')).toBe(true);
    const last = r.reported.at(-1);
    expect(last?.progressPercentage).toBe(100);
    expect(last?.metrics?.get('accuracy')).toBeCloseTo(holdoutAccuracy(MODEL_HP), 5);
    // Which differs from the score of the evaluation job's own (default) hyperparameters.
    expect(holdoutAccuracy(MODEL_HP)).not.toBeCloseTo(finalAccuracy(DEFAULT_HYPERPARAMETERS), 2);
  });

  it('a slow checkpoint read holds a resumed training; once read, it trains only the rest', async () => {
    const r = await heldThenReleased(
      'r2',
      {
        GANTRY_CHECKPOINT_URI: `s3://${BUCKET}/runs/r2/checkpoints/`,
        GANTRY_METRICS_URI: `s3://${BUCKET}/runs/r2/metrics/${TOKEN}/`,
      },
      CHECKPOINT_KEY,
    );

    expect(condition(r.whileHeld, 'Complete')).toBe(false);
    expect(r.reportedWhileHeld.every((l) => (l.progressPercentage ?? 0) === 0)).toBe(true);
    expect(condition(r.done, 'Complete')).toBe(true);
    const after = r.reported.filter((l) => (l.progressPercentage ?? 0) > 0);
    expect(after.at(-1)?.progressPercentage).toBe(100);
    // Resumed at 60 %: no report between the start and the checkpoint.
    expect(after.every((l) => (l.progressPercentage ?? 0) >= 60)).toBe(true);
  });
});
