import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LifecycleEvent } from '../../lib/events/event.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';
import { metricKeyPrefix } from '../helpers/metric-channel.ts';
import { tableOf } from '../helpers/state.ts';

/**
 * Stall detection on the embedded default, through the HTTP API: a running job (the cluster
 * simulator trains for a long time and its training code does not report: the test writes the
 * metric lines into the metric channel) that stops reporting is shown stalled within one reconciler
 * pass of its `stallAfterSeconds`, a `gantry.run.stalled` event goes out and a Warning Event lands on
 * the job; the stall clears when the reports resume. With `restartOnStall` the reconciler fails the
 * completion wait with InfrastructureFailureError (reason Stalled): the run starts a new attempt
 * (NextAttempt) within its `retry.infrastructure` budget and, stalled again past it, ends Failed with
 * that reason.
 *
 * Time: the stack's Step Functions speed is 60, and stall detection counts in the same compressed
 * time (GANTRY_STALL_TIME_SCALE = 60): `stallAfterSeconds` 120 is 2 s of wall time. The reconciler
 * passes every 250 ms.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const SPEED = 60;
const STALL_AFTER = 120;
const THRESHOLD_MS = (STALL_AFTER * 1000) / SPEED;
const PASS_MS = 250;

describe('stall detection (embedded default)', { timeout: 120_000 }, () => {
  let env: Embedded;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gantry-stall-'));
    env = await startEmbedded({
      // Training takes 3,000 simulated s at 10× (300 s): the job runs for the whole test.
      simSpeed: 10,
      sfnSpeed: SPEED,
      simulator: { defaultDurationSeconds: 3000, metricChannel: false },
      stack: { orphanGraceSeconds: 1, events: { sinkFile: join(dir, 'events.jsonl') } },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function until<T>(what: string, read: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = await read();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  const view = async (runId: string) => (await call('GET', `/v1/runs/${runId}`)).body;

  /** Whether `body` is what the served OpenAPI document says `GET <path>` answers with 200. */
  async function conforms(path: '/v1/runs' | '/v1/runs/{id}' | '/v1/runs/{id}/events', body: unknown) {
    const doc = (await (await fetch(`${env.api.url}/v1/openapi.json`)).json()) as Record<string, unknown>;
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema({ ...doc, $id: 'https://gantry.test/openapi.json' });
    const pointer = ['paths', path, 'get', 'responses', '200']
      .map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1'))
      .join('/');
    const validate = ajv.getSchema(
      `https://gantry.test/openapi.json#/${pointer}/content/application~1json/schema`,
    );
    expect(validate).toBeDefined();
    expect(validate?.(body), JSON.stringify(validate?.errors)).toBe(true);
  }

  async function submit(over: Record<string, unknown>): Promise<string> {
    const res = await call('POST', '/v1/runs', {
      team: 'demo',
      namespace: 'demo',
      runtime: { name: 'torch-distributed' },
      image: 'registry.local/vision/train:1.0',
      numNodes: 1,
      resourcesPerNode: { gpu: 1 },
      queue: 'demo-queue',
      producesArtifacts: false,
      stallAfterSeconds: STALL_AFTER,
      ...over,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    return res.body.runId as string;
  }

  const records = () => makeRunRecords({ table: tableOf(env.stack), clock: { now: () => new Date() } });

  /** What training code does: one metric line, now, under the run's GANTRY_METRICS_URI. */
  let seq = 0;
  async function report(runId: string, step: number) {
    const line = { time: new Date().toISOString(), step, metrics: { loss: 1 / (step + 1) } };
    await env.stack.s3.send(
      new PutObjectCommand({
        Bucket: env.stack.bucket,
        Key: `${await metricKeyPrefix(records(), runId)}${String(Date.now() * 1000 + (seq++ % 1000)).padStart(20, '0')}-rank0.jsonl`,
        Body: `${JSON.stringify(line)}\n`,
      }),
    );
  }

  const sunk = (runId: string): LifecycleEvent[] => {
    let text = '';
    try {
      text = readFileSync(join(dir, 'events.jsonl'), 'utf8');
    } catch {
      return [];
    }
    return text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { event?: LifecycleEvent } & LifecycleEvent)
      .map((l) => l.event ?? l)
      .filter((e) => e.subject === runId);
  };

  it('a run that stops reporting is stalled within one pass of stallAfterSeconds, shown, announced, and clears when reports resume', async () => {
    // Prepare: the run is Running and its training reports every 200 ms for 3 s (past the threshold)
    const runId = await submit({ modelName: 'stall-shown' });
    await until('Running', async () => ((await view(runId)).phase === 'Running' ? true : undefined));
    for (let step = 0; step < 15; step++) {
      await report(runId, step);
      await new Promise((r) => setTimeout(r, 200));
    }
    const reporting = await view(runId);
    expect(reporting.stalled).toBeUndefined();
    expect(reporting.lastProgressAt).toBeDefined();

    // Act: the training stops reporting
    const stalled = await until('stalled', async () => {
      const v = await view(runId);
      return v.stalled ? v : undefined;
    });

    // Assess: found at the threshold, within one pass (plus the pass's own time)
    const last = Date.parse(stalled.stalled.lastProgressAt);
    const since = Date.parse(stalled.stalled.since);
    expect(since - last).toBeGreaterThanOrEqual(THRESHOLD_MS);
    expect(since - last).toBeLessThan(THRESHOLD_MS + 2 * PASS_MS + 500);
    expect(stalled.phase).toBe('Running');
    expect(stalled.stalled.seconds).toBeGreaterThanOrEqual(2);
    await conforms('/v1/runs/{id}', stalled);
    // The event, in the API's listing and delivered to the sink
    const listing = (await call('GET', `/v1/runs/${runId}/events`)).body;
    await conforms('/v1/runs/{id}/events', listing);
    const listed = listing.events as LifecycleEvent[];
    expect(listed.map((e) => e.type)).toContain('gantry.run.stalled');
    const event = await until('the stalled event delivered', async () =>
      sunk(runId).find((e) => e.type === 'gantry.run.stalled'),
    );
    expect(event).toMatchObject({
      id: `${runId}:stalled:0`,
      time: stalled.stalled.since,
      data: { phase: 'Running', stall: { n: 0, lastProgressAt: stalled.stalled.lastProgressAt } },
    });
    // A Warning Event on the job
    const k8sEvents = (await (await fetch(`${env.sim.url}/api/v1/namespaces/demo/events`)).json()) as {
      items: Array<{ reason: string; type: string; involvedObject: { name: string }; message: string }>;
    };
    const onJob = k8sEvents.items.filter((e) => e.involvedObject.name === runId && e.reason === 'Stalled');
    expect(onJob).toHaveLength(1);
    expect(onJob[0]?.type).toBe('Warning');

    // Act: reports resume
    await report(runId, 100);
    const resumed = await until('the stall to clear', async () => {
      const v = await view(runId);
      return v.stalled === undefined ? v : undefined;
    });

    // Assess
    expect(resumed.phase).toBe('Running');
    expect(Date.parse(resumed.lastProgressAt)).toBeGreaterThan(last);
    await until('the unstalled event delivered', async () =>
      sunk(runId).find((e) => e.type === 'gantry.run.unstalled' && e.id === `${runId}:unstalled:0`),
    );
    await call('POST', `/v1/runs/${runId}/cancel`);
  });

  it('restartOnStall: a stalled run starts a new attempt; stalled again past its budget it ends Failed/Stalled', async () => {
    // Prepare + Act: a run that never reports, one attempt after an infrastructure failure allowed
    const runId = await submit({
      modelName: 'stall-restart',
      restartOnStall: true,
      retry: { infrastructure: 1 },
    });
    await until('Running', async () => ((await view(runId)).phase === 'Running' ? true : undefined));
    const ended = await until('the run to end', async () => {
      const v = await view(runId);
      return ['Succeeded', 'Failed', 'Cancelled'].includes(v.phase) ? v : undefined;
    });

    // Assess: attempt 1 ended Stalled and attempt 2 (a new job) ran; stalled too, it ended the run
    expect(ended.attempts.map((a: { attempt: number; cause?: string }) => [a.attempt, a.cause])).toEqual([
      [1, 'Stalled'],
      [2, 'Stalled'],
    ]);
    expect(ended.attempts[1].jobName).toBe(`${runId}-a2`);
    expect(ended.phase).toBe('Failed');
    expect(ended.reason).toBe('Stalled');
    expect(ended.message).toMatch(/no progress or metric reported for \d+ s .*restartOnStall/);
    const running = ended.transitions.find((t: { phase: string }) => t.phase === 'Running');
    const failed = ended.transitions.find((t: { phase: string }) => t.phase === 'Failed');
    expect(Date.parse(failed.at) - Date.parse(running.at)).toBeGreaterThanOrEqual(THRESHOLD_MS);
    const types = (await call('GET', `/v1/runs/${runId}/events`)).body.events.map(
      (e: LifecycleEvent) => e.type,
    );
    // Each attempt's stall in its place: stalled, a new attempt (Pending, Running), stalled, failed
    expect(types.slice(-6)).toEqual([
      'gantry.run.running',
      'gantry.run.stalled',
      'gantry.run.pending',
      'gantry.run.running',
      'gantry.run.stalled',
      'gantry.run.failed',
    ]);
    // The list shows the attempt it ended in, as the OpenAPI document says
    const list = (await call('GET', '/v1/runs?team=demo&limit=100')).body;
    await conforms('/v1/runs', list);
    expect(list.runs.find((r: { runId: string }) => r.runId === runId)?.attempt).toBe(2);
  });
});
