import { CreateBucketCommand, GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { CustomObjectsApi } from '@kubernetes/client-node';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMetricObject } from '../../lib/metrics/channel.ts';
import { finalAccuracy, type startClusterSimulator } from '../../local/simulator/index.ts';
import { simTrainJob, startSimulatorWithClient, TRAINER } from '../helpers/sim-client.ts';

/**
 * The simulator as a default install: Trainer's alpha `TrainJobStatus` gate is off, so no job
 * reports `status.trainerStatus`; the simulated training code reports through Gantry's metric
 * channel instead (JSON Lines objects under its GANTRY_METRICS_URI), for TrainJobs and for the
 * Training Operator v1 kinds alike.
 */

const BUCKET = 'gantry-sim-metrics';
const TOKEN = '0123456789abcdef0123456789abcdef';
// biome-ignore lint/suspicious/noExplicitAny: manifests are read field by field
type Obj = Record<string, any>;

describe('cluster simulator defaults: no trainerStatus, metrics through the metric channel', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let s3: S3Client;
  let sim: Awaited<ReturnType<typeof startClusterSimulator>>;
  let custom: CustomObjectsApi;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    s3 = new S3Client({
      endpoint: `http://127.0.0.1:${fauxqs.port}`,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    // Prepare: no trainerStatus option at all — the default install.
    ({ sim, custom } = await startSimulatorWithClient({ speed: 0, s3 }));
  });

  afterAll(async () => {
    await sim?.close();
    s3?.destroy();
    await fauxqs?.stop();
  });

  const trainJob = (name: string, env: Record<string, string>): Obj =>
    simTrainJob(name, env, {
      durationSeconds: 100,
      args: ['--lr=0.00316', '--batch-size=64', '--dropout=0.2'],
    });

  async function linesUnder(prefix: string) {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix }));
    const keys = (listed.Contents ?? []).map((o) => o.Key as string).sort();
    const lines = [];
    for (const key of keys) {
      const text = await (
        await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))
      ).Body!.transformToString();
      const parsed = parseMetricObject(text);
      expect(parsed.problems).toEqual([]);
      lines.push(...parsed.lines);
    }
    return { keys, lines };
  }

  it('a running and a finished TrainJob carry no status.trainerStatus (the TrainJobStatus gate is off)', async () => {
    // Act
    await custom.createNamespacedCustomObject({
      ...TRAINER,
      namespace: 'default',
      body: trainJob('gate-off', { GANTRY_OUTPUT_URI: `s3://${BUCKET}/runs/gate-off/output/` }),
    });
    await sim.settle();
    await sim.advance(50);
    const running = (await custom.getNamespacedCustomObject({
      ...TRAINER,
      namespace: 'default',
      name: 'gate-off',
    })) as Obj;
    await sim.advance(60);
    const done = (await custom.getNamespacedCustomObject({
      ...TRAINER,
      namespace: 'default',
      name: 'gate-off',
    })) as Obj;
    // Assess
    expect(running.status?.jobsStatus?.[0]).toMatchObject({ name: 'node' });
    expect(running.status).not.toHaveProperty('trainerStatus');
    expect(done.status?.conditions?.find((c: Obj) => c.type === 'Complete')?.status).toBe('True');
    expect(done.status).not.toHaveProperty('trainerStatus');
  });

  it('the training code reports progress and metrics as JSON Lines under GANTRY_METRICS_URI, the final metrics before Complete', async () => {
    // Act
    await custom.createNamespacedCustomObject({
      ...TRAINER,
      namespace: 'default',
      body: trainJob('reports', {
        GANTRY_OUTPUT_URI: `s3://${BUCKET}/runs/reports/output/`,
        // As Gantry sets it: the run's prefix and its write token (lib/metrics/channel.ts).
        GANTRY_METRICS_URI: `s3://${BUCKET}/runs/reports/metrics/${TOKEN}/`,
      }),
    });
    await sim.settle();
    await sim.advance(45);
    const midway = await linesUnder(`runs/reports/metrics/${TOKEN}/`);
    await sim.advance(70);
    const done = (await custom.getNamespacedCustomObject({
      ...TRAINER,
      namespace: 'default',
      name: 'reports',
    })) as Obj;
    const all = await linesUnder('runs/reports/metrics/');
    // Assess: reports while training (progress rising, loss falling), then the final one.
    expect(midway.keys.length).toBeGreaterThanOrEqual(3);
    expect(midway.lines.every((l) => (l.progressPercentage ?? 0) < 100)).toBe(true);
    expect(done.status?.conditions?.find((c: Obj) => c.type === 'Complete')?.status).toBe('True');
    const percents = all.lines.map((l) => l.progressPercentage);
    expect(percents).toEqual([...percents].sort((a, b) => (a ?? 0) - (b ?? 0)));
    const last = all.lines.at(-1);
    expect(last).toMatchObject({ progressPercentage: 100, estimatedRemainingSeconds: 0 });
    expect(last?.metrics?.get('accuracy')).toBeCloseTo(
      finalAccuracy({ lr: 0.00316, batchSize: 64, dropout: 0.2 }),
      5,
    );
    expect(all.lines[0]?.metrics?.get('loss')).toBeGreaterThan(last?.metrics?.get('loss') as number);
    // Every object under the token: the keys the consumer accepts for the run.
    expect(all.keys.every((k) => k.startsWith(`runs/reports/metrics/${TOKEN}/progress-`))).toBe(true);
    expect(all.keys.every((k) => /\/progress-\d{3}\.jsonl$/.test(k))).toBe(true);
  });

  it('with the gate turned on (per test) trainerStatus is reported again', async () => {
    const { sim: gated, custom: api } = await startSimulatorWithClient({
      trainerVersion: '2.2',
      trainerStatus: true,
      speed: 0,
    });
    try {
      const job = trainJob('gate-on', {});
      job.metadata.labels = { 'app.kubernetes.io/managed-by': 'gantry' };
      await api.createNamespacedCustomObject({ ...TRAINER, namespace: 'default', body: job });
      await gated.settle();
      await gated.advance(30);
      const running = (await api.getNamespacedCustomObject({
        ...TRAINER,
        namespace: 'default',
        name: 'gate-on',
      })) as Obj;
      expect(running.status?.trainerStatus).toMatchObject({ progressPercentage: expect.any(Number) });
    } finally {
      await gated.close();
    }
  });
});
