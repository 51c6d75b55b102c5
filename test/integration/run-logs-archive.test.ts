import { GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_QUEUE, type Embedded, startEmbedded } from '../../local/embedded.ts';
import { createRuntime, NO_RETRY_RUNTIME, noRetryRuntime } from '../../local/runtimes.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';

/**
 * Logs that outlive the job, on the embedded default: the production handlers, the real state
 * machine and reconciler, the cluster simulator's pods and their logs, the local S3. Each ended run
 * — succeeded (its job removed by the reconciler), failed (Cleanup), cancelled (the API) — and each
 * attempt of a resumed run (NextAttempt) is read through `GET /v1/runs/{id}/logs` after its job is
 * gone. The archive keeps 60 lines a pod here (GANTRY_LOG_ARCHIVE_MAX_LINES), so a finished training
 * log (103 lines) is truncated and says so; one that failed at 20 % (24 lines) is whole.
 */

const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1/namespaces/demo/trainjobs';
const MAX_LINES = 60;

const request = (over: Record<string, unknown> = {}) => ({
  modelName: 'archived',
  team: 'demo',
  queue: DEMO_QUEUE.name,
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 2,
  resourcesPerNode: { gpu: 1 },
  producesArtifacts: false,
  ...over,
});

describe('archived run logs on the embedded default', () => {
  let env: Embedded;
  const demo = apiClient(() => env.api.url, DEMO_TEAM.principals[0] as string);
  const runs: Record<'succeeded' | 'failed' | 'cancelled' | 'resumed', string> = {
    succeeded: '',
    failed: '',
    cancelled: '',
    resumed: '',
  };

  async function waitFor<T>(
    what: string,
    probe: () => Promise<T | undefined>,
    timeoutMs = 90_000,
  ): Promise<T> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }
  const run = async (id: string) => (await demo('GET', `/v1/runs/${id}`)).body;
  const jobGone = (name: string) =>
    waitFor(`job ${name} to be deleted`, async () =>
      (await fetch(`${env.sim.url}${TRAINJOBS}/${name}`)).status === 404 ? true : undefined,
    );
  const submit = async (over: Record<string, unknown>) => {
    const r = await demo('POST', '/v1/runs', request(over));
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    return r.body.runId as string;
  };

  beforeAll(async () => {
    // Read once, at the handlers' first archive (functions/_deps.ts).
    process.env.GANTRY_LOG_ARCHIVE_MAX_LINES = String(MAX_LINES);
    env = await startEmbedded({
      simSpeed: 60,
      sfnSpeed: 60,
      // Ten simulated minutes of training: about 10 s here.
      simulator: { defaultDurationSeconds: 600 },
      // A succeeded run's job is removed by the reconciler's orphan pass once its execution ended.
      stack: { orphanGraceSeconds: 1, teams: [DEMO_TEAM] },
    });
    // A disrupted pod fails the job at once on this runtime (backoffLimit 0): a new attempt.
    await createRuntime(env.sim.url, noRetryRuntime());
    // Four runs of 2 GPUs side by side on the 8-GPU queue.
    runs.succeeded = await submit({ modelName: 'archived-ok' });
    runs.failed = await submit({ modelName: 'archived-failed', env: { SIM_FAIL_AT_PERCENT: '20' } });
    runs.cancelled = await submit({ modelName: 'archived-cancelled' });
    runs.resumed = await submit({ modelName: 'archived-resumed', runtime: { name: NO_RETRY_RUNTIME } });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
    delete process.env.GANTRY_LOG_ARCHIVE_MAX_LINES;
  });

  it('serves a cancelled run’s logs: the API archives them before it deletes the job', async () => {
    // Prepare: cancel once the training has printed a few steps (first: the runs train side by side).
    const id = runs.cancelled;
    await waitFor('a few steps in the live log', async () => {
      const live = await demo('GET', `/v1/runs/${id}/logs`);
      return live.status === 200 && live.body.lines.length > 5 ? true : undefined;
    });
    // Act
    const cancelled = await demo('POST', `/v1/runs/${id}/cancel`);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(202);
    await jobGone(id);
    const logs = await demo('GET', `/v1/runs/${id}/logs?node=1`);
    // Assess
    expect(logs.status, JSON.stringify(logs.body)).toBe(200);
    expect(logs.body).toMatchObject({ attempt: 1, source: 'archive', truncated: false });
    expect(logs.body.lines[0]).toMatch(/^\[rank 1\/2\] starting training on pod /);
    expect(logs.body.lines.length).toBeGreaterThan(5);
  });

  it('keeps each attempt of a resumed run apart: attempt 1 from NextAttempt, attempt 2 after the run', async () => {
    // Prepare: lose a node under attempt 1 once it trains.
    const id = runs.resumed;
    await waitFor('attempt 1 to run', async () => {
      const r = await run(id);
      return r.phase === 'Running' && r.job?.name === id ? true : undefined;
    });
    await waitFor('a few steps in the live log', async () => {
      const live = await demo('GET', `/v1/runs/${id}/logs`);
      return live.status === 200 && live.body.lines.length > 5 ? true : undefined;
    });
    expect(await env.sim.disrupt('demo', id, 'node-lost')).toBe(true);
    // Act: attempt 1's job is gone while the run goes on as attempt 2.
    await jobGone(id);
    const whileResumed = await demo('GET', `/v1/runs/${id}/logs?attempt=1`);
    await waitFor('the run to succeed', async () =>
      (await run(id)).phase === 'Succeeded' ? true : undefined,
    );
    await jobGone(`${id}-a2`);
    const first = await demo('GET', `/v1/runs/${id}/logs?attempt=1`);
    const second = await demo('GET', `/v1/runs/${id}/logs`);
    const tooFar = await demo('GET', `/v1/runs/${id}/logs?attempt=3`);
    // Assess
    expect(whileResumed.status, JSON.stringify(whileResumed.body)).toBe(200);
    expect(whileResumed.body).toMatchObject({ attempt: 1, source: 'archive' });
    expect(first.body).toMatchObject({ attempt: 1, source: 'archive' });
    expect(first.body.pod).toMatch(new RegExp(`^${id}-node-0-0-`));
    expect(first.body.lines.at(-1)).not.toMatch(/training finished/);
    expect(second.body).toMatchObject({ attempt: 2, source: 'archive' });
    expect(second.body.pod).toMatch(new RegExp(`^${id}-a2-node-0-0-`));
    expect(second.body.lines.at(-1)).toMatch(/training finished/);
    expect(tooFar.status).toBe(400);
    expect(tooFar.body.issues).toEqual([
      { field: 'attempt', rule: "must be from 1 to the run's attempts so far (2)" },
    ]);
    // The objects themselves, under the run in the Gantry bucket.
    const s3 = new S3Client({
      endpoint: env.stack.endpoints.s3,
      forcePathStyle: true,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    try {
      const index = await s3.send(
        new GetObjectCommand({ Bucket: env.stack.bucket, Key: `runs/${id}/logs/attempt-2/index.json` }),
      );
      const body = JSON.parse((await index.Body?.transformToString()) ?? '{}');
      expect(body).toMatchObject({
        runId: id,
        attempt: 2,
        jobName: `${id}-a2`,
        limits: { maxLines: MAX_LINES },
      });
      expect(body.pods.map((p: { name: string }) => p.name)).toEqual(['node-0', 'node-1']);
    } finally {
      s3.destroy();
    }
  });
  it('serves a succeeded run’s logs from the archive once its job is gone, truncation noted', async () => {
    // Prepare
    const id = runs.succeeded;
    await waitFor('the run to succeed', async () =>
      (await run(id)).phase === 'Succeeded' ? true : undefined,
    );
    await jobGone(id);
    // Act
    const node0 = await demo('GET', `/v1/runs/${id}/logs`);
    const node1 = await demo('GET', `/v1/runs/${id}/logs?node=1&tailLines=1000`);
    // Assess
    expect(node0.status, JSON.stringify(node0.body)).toBe(200);
    expect(node0.body).toMatchObject({
      runId: id,
      attempt: 1,
      source: 'archive',
      truncated: true,
      container: 'node',
    });
    expect(node0.body.pod).toMatch(new RegExp(`^${id}-node-0-0-`));
    expect(node0.body.lines.at(-1)).toMatch(/^\[rank 0\/2\] training finished: loss=/);
    // The last 60 of 103 lines: the header is not among them.
    expect(node1.body.lines).toHaveLength(MAX_LINES);
    expect(node1.body.lines.every((l: string) => l.startsWith('[rank 1/2] '))).toBe(true);
    expect(node1.body.lines.some((l: string) => l.includes('starting training'))).toBe(false);
  });

  it('serves a failed run’s logs, the traceback included, whole (within the bound)', async () => {
    const id = runs.failed;
    await waitFor('the run to fail', async () => ((await run(id)).phase === 'Failed' ? true : undefined));
    await jobGone(id);
    const logs = await demo('GET', `/v1/runs/${id}/logs`);
    expect(logs.status, JSON.stringify(logs.body)).toBe(200);
    expect(logs.body).toMatchObject({ attempt: 1, source: 'archive', truncated: false });
    expect(logs.body.lines[0]).toMatch(/^\[rank 0\/2\] starting training on pod /);
    expect(logs.body.lines.slice(-2)).toEqual([
      'Traceback (most recent call last):',
      expect.stringMatching(/^RuntimeError: /),
    ]);
  });
});
