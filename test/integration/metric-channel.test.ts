import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand as SqsAttributes } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeS3ObjectStore, makeS3TextReader } from '../../lib/adapters/aws/s3-store.ts';
import { historyKey, type MetricHistory, metricsUri, newMetricsToken } from '../../lib/metrics/channel.ts';
import { makeMetricIngester } from '../../lib/metrics/ingest.ts';
import { newRunId } from '../../lib/run/ids.ts';
import { newRecord, type RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';
import { metricKeyPrefix } from '../helpers/metric-channel.ts';
import { tableOf } from '../helpers/state.ts';
import { ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * The metric channel on the embedded default: metric objects written to the local S3 produce the
 * AWS-shaped ObjectCreated notifications on the metrics queue, functions/intake/metrics.ts folds
 * them into the run's history and record. The run asks for more GPUs than its queue has, so it
 * stays Pending and only the test writes metrics. The Python snippet of docs/training-code.md runs unchanged
 * against the same local S3.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
/** A second team on the same stack, the one whose run another team's pod writes into. */
const RIVAL = {
  ...DEMO_TEAM,
  name: 'rival',
  principals: ['arn:aws:iam::000000000000:user/rival'],
  namespaces: ['rival'],
  queues: [],
  imagePrefixes: ['registry.local/rival/'],
};
const BOTO3_VERSION = '1.43.11';
const exec = promisify(execFile);
/** Report times an hour back, so the snippet's `now` is the newest report. */
const BASE = Date.now() - 3_600_000;
const T = (s: number) => new Date(BASE + s * 1000).toISOString();

describe('the metric channel on the local stack', { timeout: 90_000 }, () => {
  let env: Embedded;
  let runId: string;
  /** The key prefix the run's pods write under (its GANTRY_METRICS_URI, with the run's token). */
  let prefix: string;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 0,
      sfnSpeed: 60,
      simulator: { namespaces: ['demo', 'rival'] },
      stack: { teams: [DEMO_TEAM, RIVAL] },
    });
    const call = apiClient(() => env.api.url, PRINCIPAL);
    const submitted = await call('POST', '/v1/runs', {
      modelName: 'metered',
      team: 'demo',
      runtime: { name: 'torch-distributed' },
      image: 'registry.local/vision/train:1.0',
      // 16 GPUs against the demo queue's 8: Kueue never admits it, so only the test reports metrics.
      numNodes: 2,
      resourcesPerNode: { gpu: 8 },
      queue: 'demo-queue',
    });
    expect(submitted.status).toBe(202);
    runId = submitted.body.runId;
    prefix = await metricKeyPrefix(records(), runId);
    expect(prefix).toMatch(new RegExp(`^runs/${runId}/metrics/[0-9a-f]{32}/$`));
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const store = () => makeS3ObjectStore({ s3: env.stack.s3, bucket: env.stack.bucket });
  const records = () => makeRunRecords({ table: tableOf(env.stack), clock: { now: () => new Date() } });

  async function put(key: string, body: string) {
    await env.stack.s3.send(new PutObjectCommand({ Bucket: env.stack.bucket, Key: key, Body: body }));
  }

  async function until<T>(what: string, read: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = await read();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const recordWhere = (pred: (r: RunRecord) => boolean) => async () => {
    const r = await records().get(runId);
    return r && pred(r) ? r : undefined;
  };

  it('folds metric objects into the run record and a bounded history, in time order', async () => {
    // Act: two objects, the later one written first.
    await put(
      `${prefix}002.jsonl`,
      `${JSON.stringify({ time: T(20), step: 20, progressPercentage: 40, metrics: { loss: 0.5, accuracy: 0.8 } })}\n`,
    );
    await put(
      `${prefix}001.jsonl`,
      [
        JSON.stringify({
          time: T(0),
          step: 0,
          progressPercentage: 0,
          metrics: { loss: 0.9 },
        }),
        JSON.stringify({
          time: T(10),
          step: 10,
          progressPercentage: 20,
          metrics: { loss: 0.7 },
        }),
      ].join('\n'),
    );
    // Assess
    const record = await until(
      'both objects',
      recordWhere((r) => r.metrics?.loss === 0.5 && r.progress?.percent === 40),
    );
    expect(record.metrics).toEqual({ loss: 0.5, accuracy: 0.8 });
    expect(record.progress).toEqual({ percent: 40, updatedAt: T(20) });
    const history = await until('the history', async () => {
      const h = (await store().getJson<MetricHistory>(historyKey(runId)))?.value;
      return h && h.sources.length === 2 ? h : undefined;
    });
    expect(history.series.loss?.map((p) => p.v)).toEqual([0.9, 0.7, 0.5]);
    // The API serves the history to the run's team, and nothing to another.
    const view = await apiClient(() => env.api.url, PRINCIPAL)('GET', `/v1/runs/${runId}/metrics`);
    expect(view.status).toBe(200);
    expect(view.body).toMatchObject({ runId, progress: { percent: 40 }, lines: 3, dropped: 0 });
    expect(view.body.series.loss.map((p: { v: number }) => p.v)).toEqual([0.9, 0.7, 0.5]);
    expect(view.body.series.accuracy).toEqual([{ t: T(20), v: 0.8, s: 20 }]);
    const stranger = await apiClient(() => env.api.url, 'arn:aws:iam::000000000000:user/nobody')(
      'GET',
      `/v1/runs/${runId}/metrics`,
    );
    expect(stranger.status).toBe(403);
  });

  it('acknowledges malformed objects and objects outside the channel: nothing retried or dead-lettered', async () => {
    // Act
    await put(`${prefix}bad.jsonl`, 'not json\n{"metrics":{"loss":"high"}}\n');
    await put('runs/run-aaaaaaaaaaaaaaaaaaaa/metrics/001.jsonl', '{"metrics":{"loss":1}}\n'); // no such run
    await put(`runs/${runId}/output/trace.jsonl`, '{"metrics":{"loss":0}}\n'); // output, not metrics
    await put(`${prefix}003.jsonl`, `${JSON.stringify({ time: T(30), metrics: { loss: 0.4 } })}\n`);
    // Assess: the good object after them lands; the bad ones changed nothing and left no message behind.
    await until(
      'the good object',
      recordWhere((r) => r.metrics?.loss === 0.4),
    );
    const attrs = async (url: string) =>
      (
        await env.stack.sqs.send(
          new SqsAttributes({
            QueueUrl: url,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
          }),
        )
      ).Attributes ?? {};
    const settled = await until('an empty metrics queue', async () => {
      const a = await attrs(env.stack.metricsQueueUrl);
      return a.ApproximateNumberOfMessages === '0' && a.ApproximateNumberOfMessagesNotVisible === '0'
        ? a
        : undefined;
    });
    expect(settled).toBeDefined();
    expect((await attrs(env.stack.metricsDlqUrl)).ApproximateNumberOfMessages).toBe('0');
    // A run that does not exist gets no state: no record, no history.
    expect(await records().get('run-aaaaaaaaaaaaaaaaaaaa')).toBeUndefined();
    expect(await store().getJson(historyKey('run-aaaaaaaaaaaaaaaaaaaa'))).toBeUndefined();
    const history = (await store().getJson<MetricHistory>(historyKey(runId)))?.value;
    expect(history?.dropped).toBe(2);
    expect(history?.series.loss?.map((p) => p.v)).toEqual([0.9, 0.7, 0.5, 0.4]);
  });

  it('drain folds in a report whose notification was never consumed', async () => {
    // Prepare: the consumer is down while the training code writes its final report.
    await env.stack.stopConsumer();
    try {
      await put(
        `${prefix}999.jsonl`,
        `${JSON.stringify({ time: T(60), step: 99, progressPercentage: 100, metrics: { loss: 0.1 } })}\n`,
      );
      const ingester = makeMetricIngester({
        store: store(),
        objects: makeS3TextReader({ s3: env.stack.s3, bucket: env.stack.bucket }),
        records: records(),
        clock: { now: () => new Date() },
        bucket: env.stack.bucket,
      });
      // Act
      const folded = await ingester.drain(runId);
      // Assess
      expect(folded).toBe(1);
      expect((await records().get(runId))?.metrics?.loss).toBe(0.1);
      expect(await ingester.drain(runId)).toBe(0); // everything already folded in
    } finally {
      env.stack.startConsumer();
    }
  });

  it("drops what a pod writes under another team's run, or under its own run without the run's token", async () => {
    // Prepare: a run of the rival team (no queue of its own; the frozen simulator never runs it).
    const rival = await apiClient(() => env.api.url, RIVAL.principals[0] as string)('POST', '/v1/runs', {
      modelName: 'rivalry',
      team: 'rival',
      runtime: { name: 'torch-distributed' },
      image: 'registry.local/rival/train:1.0',
      resourcesPerNode: { gpu: 1 },
    });
    expect(rival.status).toBe(202);
    const rivalRun = rival.body.runId as string;
    const rivalPrefix = await metricKeyPrefix(records(), rivalRun);
    const demoToken = prefix.split('/')[3] as string;
    const forged = `${JSON.stringify({ time: T(40), metrics: { loss: 999 } })}\n`;
    // Act: the demo run's pod writes into the rival's run: bare, with its own token, with a guess;
    // and into its own run without its token. Then each run's own pod reports.
    await put(`runs/${rivalRun}/metrics/x.jsonl`, forged);
    await put(`runs/${rivalRun}/metrics/${demoToken}/x.jsonl`, forged);
    await put(`runs/${rivalRun}/metrics/${'0'.repeat(32)}/x.jsonl`, forged);
    await put(`runs/${runId}/metrics/x.jsonl`, forged);
    await put(`${rivalPrefix}own.jsonl`, `${JSON.stringify({ time: T(41), metrics: { loss: 0.25 } })}\n`);
    await put(`${prefix}004.jsonl`, `${JSON.stringify({ time: T(70), metrics: { loss: 0.35 } })}\n`);
    // Assess: each run has its own reports only (the rival's pod, running in the simulator, may
    // report too: every source is under the run's own prefix, and 999 is nowhere).
    const historyWith = (run: string, key: string) => async () => {
      const h = (await store().getJson<MetricHistory>(historyKey(run)))?.value;
      return h?.sources.some((s) => s.key === key) ? h : undefined;
    };
    const rivalHistory = await until(
      "the rival's own report",
      historyWith(rivalRun, `${rivalPrefix}own.jsonl`),
    );
    const history = await until("the demo run's own report", historyWith(runId, `${prefix}004.jsonl`));
    for (const [h, own] of [
      [rivalHistory, rivalPrefix],
      [history, prefix],
    ] as const) {
      expect(h.sources.every((s) => s.key.startsWith(own))).toBe(true);
      expect(h.series.loss?.map((p) => p.v)).not.toContain(999);
    }
    expect(rivalHistory.series.loss?.map((p) => p.v)).toContain(0.25);
    expect((await records().get(rivalRun))?.metrics?.loss).not.toBe(999);
    // The consumer counts them as refused (the log line and the MetricObjectsRefused metric).
    const lines: Array<Record<string, unknown>> = [];
    const report = await makeMetricIngester({
      store: store(),
      objects: makeS3TextReader({ s3: env.stack.s3, bucket: env.stack.bucket }),
      records: records(),
      clock: { now: () => new Date() },
      bucket: env.stack.bucket,
      log: (l) => lines.push(l),
    }).ingest(
      [
        `runs/${rivalRun}/metrics/${demoToken}/x.jsonl`,
        `runs/${runId}/metrics/x.jsonl`,
        'runs/run-bbbbbbbbbbbbbbbbbbbb/metrics/x.jsonl',
      ].map((key) => ({ bucket: env.stack.bucket, key })),
    );
    expect(report).toMatchObject({ refused: 3, objects: 0 });
    expect(lines.map((l) => l.msg)).toEqual([
      'metric objects from a writer that is not the run; dropped',
      'metric objects from a writer that is not the run; dropped',
      'metric objects for a run that does not exist; dropped',
    ]);
    expect(JSON.stringify(lines)).not.toContain(demoToken);
    expect(await store().getJson(historyKey('run-bbbbbbbbbbbbbbbbbbbb'))).toBeUndefined();
  });

  it("keeps a trial's objective through the consumer, whatever a flood of names took first", async () => {
    // Prepare: a trial's run (its sweep's objective is val/loss), the notification consumer down so
    // only this ingester (with the objective lookup) folds its objects.
    const trialRun = newRunId();
    const base = (await records().get(runId))?.spec as RunSpec;
    const token = newMetricsToken();
    await records().create(
      newRecord(
        {
          ...base,
          runId: trialRun,
          jobName: trialRun,
          metricsUri: metricsUri(env.stack.bucket, trialRun, token),
          trial: { sweepId: 'swp-aaaaaaaaaaaaaaaaaaaa', trialIndex: 0 },
        },
        'fingerprint',
        new Date(),
      ),
    );
    const trialPrefix = await metricKeyPrefix(records(), trialRun);
    await env.stack.stopConsumer();
    try {
      const ingester = makeMetricIngester({
        store: store(),
        objects: makeS3TextReader({ s3: env.stack.s3, bucket: env.stack.bucket }),
        records: records(),
        clock: { now: () => new Date() },
        bucket: env.stack.bucket,
        objectiveOf: async (sweepId) => (sweepId === 'swp-aaaaaaaaaaaaaaaaaaaa' ? 'val/loss' : undefined),
      });
      // Act: five objects of 1,000 names each, then the objective.
      const keys: string[] = [];
      for (let o = 0; o < 5; o++) {
        const metrics = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`junk${o}_${i}`, i]));
        keys.push(`${trialPrefix}flood-${o}.jsonl`);
        await put(keys[o] as string, `${JSON.stringify({ time: T(o), metrics })}\n`);
      }
      await put(
        `${trialPrefix}real.jsonl`,
        `${JSON.stringify({ time: T(10), metrics: { 'val/loss': 0.3 } })}\n`,
      );
      for (const key of [...keys, `${trialPrefix}real.jsonl`])
        await ingester.ingest([{ bucket: env.stack.bucket, key }]);
      // Assess
      const history = (await store().getJson<MetricHistory>(historyKey(trialRun)))?.value;
      expect(Object.keys(history?.series ?? {}).length).toBeLessThanOrEqual(64);
      expect(history?.series['val/loss']?.map((p) => p.v)).toEqual([0.3]);
      expect((await records().get(trialRun))?.metrics?.['val/loss']).toBe(0.3);
    } finally {
      env.stack.startConsumer();
    }
  });

  it('runs the Python snippet of docs/training-code.md unchanged: its report reaches the run record', async (ctx) => {
    const python = pythonWithBoto3();
    if (
      !tierAvailable(
        'integration (metric-channel Python snippet)',
        python ? [] : [`python3 with boto3 ${BOTO3_VERSION} (bash scripts/ci-install.sh)`],
      )
    ) {
      ctx.skip();
      return;
    }
    const page = readFileSync(resolve(ROOT, 'docs/training-code.md'), 'utf8');
    const section = page.slice(page.indexOf('## Reporting progress and metrics'));
    const snippet = /```python\n([\s\S]*?)```/.exec(section)?.[1];
    expect(snippet).toContain('GANTRY_METRICS_URI');
    // Act: the snippet as docs/training-code.md prints it, with the env a training pod gets.
    await exec(python as string, ['-c', snippet as string], {
      env: {
        PATH: process.env.PATH ?? '',
        GANTRY_METRICS_URI: `s3://${env.stack.bucket}/${prefix}`,
        AWS_ENDPOINT_URL_S3: env.stack.endpoints.s3,
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
        AWS_DEFAULT_REGION: 'us-east-1',
        HOSTNAME: 'trainer-node-0',
      },
    });
    // Assess: the snippet's example report (loss 0.41 at 25 %) is newer than everything before it.
    const record = await until(
      "the snippet's report",
      recordWhere((r) => r.metrics?.loss === 0.41),
    );
    expect(record.metrics).toMatchObject({ loss: 0.41, accuracy: 0.87 });
    expect(record.progress).toMatchObject({ percent: 25, etaSeconds: 5400 });
  });
});

/** The pinned venv scripts/ci-install.sh caches, else a python3 on PATH that has boto3. */
function pythonWithBoto3(): string | undefined {
  const venv = resolve(
    process.env.GANTRY_CACHE ?? resolve(homedir(), '.cache/gantry'),
    `venv-boto3-${BOTO3_VERSION}/bin/python`,
  );
  if (existsSync(venv)) return venv;
  try {
    execFileSync('python3', ['-c', 'import boto3'], { stdio: 'ignore' });
    return 'python3';
  } catch {
    return undefined;
  }
}
