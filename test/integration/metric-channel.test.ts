import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { GetQueueAttributesCommand as SqsAttributes } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeS3ObjectStore, makeS3TextReader } from '../../lib/adapters/aws/s3-store.ts';
import { historyKey, type MetricHistory } from '../../lib/metrics/channel.ts';
import { makeMetricIngester } from '../../lib/metrics/ingest.ts';
import type { RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';
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
const BOTO3_VERSION = '1.43.11';
const exec = promisify(execFile);
/** Report times an hour back, so the snippet's `now` is the newest report. */
const BASE = Date.now() - 3_600_000;
const T = (s: number) => new Date(BASE + s * 1000).toISOString();

describe('the metric channel on the local stack', { timeout: 90_000 }, () => {
  let env: Embedded;
  let runId: string;

  beforeAll(async () => {
    env = await startEmbedded({ simSpeed: 0, sfnSpeed: 60 });
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
      `runs/${runId}/metrics/002.jsonl`,
      `${JSON.stringify({ time: T(20), step: 20, progressPercentage: 40, metrics: { loss: 0.5, accuracy: 0.8 } })}\n`,
    );
    await put(
      `runs/${runId}/metrics/001.jsonl`,
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
    await put(`runs/${runId}/metrics/bad.jsonl`, 'not json\n{"metrics":{"loss":"high"}}\n');
    await put('runs/run-aaaaaaaaaaaaaaaaaaaa/metrics/001.jsonl', '{"metrics":{"loss":1}}\n'); // no such run
    await put(`runs/${runId}/output/trace.jsonl`, '{"metrics":{"loss":0}}\n'); // output, not metrics
    await put(
      `runs/${runId}/metrics/003.jsonl`,
      `${JSON.stringify({ time: T(30), metrics: { loss: 0.4 } })}\n`,
    );
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
    expect(await records().get('run-aaaaaaaaaaaaaaaaaaaa')).toBeUndefined();
    const history = (await store().getJson<MetricHistory>(historyKey(runId)))?.value;
    expect(history?.dropped).toBe(2);
    expect(history?.series.loss?.map((p) => p.v)).toEqual([0.9, 0.7, 0.5, 0.4]);
  });

  it('drain folds in a report whose notification was never consumed', async () => {
    // Prepare: the consumer is down while the training code writes its final report.
    await env.stack.stopConsumer();
    try {
      await put(
        `runs/${runId}/metrics/999.jsonl`,
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
        GANTRY_METRICS_URI: `s3://${env.stack.bucket}/runs/${runId}/metrics/`,
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
