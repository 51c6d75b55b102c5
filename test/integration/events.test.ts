import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LifecycleEvent } from '../../lib/events/event.ts';
import type { Delivery } from '../../lib/events/outbox.ts';
import {
  EVENT_ID_HEADER,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  verifySignature,
} from '../../lib/events/signature.ts';
import { RunEventsSchema } from '../../lib/intake/view-schemas.ts';
import type { RunRecord } from '../../lib/run/record.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';
import { SUCCEEDED_PHASES } from '../helpers/runs.ts';

/**
 * Lifecycle events end to end on the embedded default: run record changes → the local change
 * feed (DynamoDB Streams' stand-in) → the outbox → the FIFO events queue on fauxqs → the events
 * consumer → webhooks on 127.0.0.1, signed with each webhook's secret. One receiver answers 200,
 * one fails its first three requests, one always fails (its deliveries end in the DLQ).
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const SECRET = 'whsec-test-7f3a9c';
const SECRET_ENV = 'GANTRY_TEST_WEBHOOK_SECRET';

interface Received {
  event: LifecycleEvent;
  verified: boolean;
  why?: string;
}

/** A webhook receiver: verifies each signature, answers per its behaviour, keeps what it accepted. */
async function receiver(fail: (attempt: number) => boolean) {
  const accepted: Received[] = [];
  const attempts: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      attempts.push(String(req.headers[EVENT_ID_HEADER]));
      if (fail(attempts.length)) {
        res.writeHead(500).end('not now');
        return;
      }
      const check = verifySignature(
        SECRET,
        {
          signature: req.headers[SIGNATURE_HEADER] as string | undefined,
          timestamp: req.headers[TIMESTAMP_HEADER] as string | undefined,
          body,
        },
        { now: new Date() },
      );
      accepted.push({
        event: JSON.parse(body) as LifecycleEvent,
        verified: check.ok,
        ...(check.ok ? {} : { why: check.why }),
      });
      res.writeHead(check.ok ? 204 : 401).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return {
    url,
    accepted,
    attempts,
    ofRun: (runId: string) => accepted.filter((a) => a.event.subject === runId),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const waitFor = async <T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 45_000) => {
  const until = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
};

describe('lifecycle events to webhooks', { timeout: 120_000 }, () => {
  let env: Embedded;
  let dir: string;
  let ok: Awaited<ReturnType<typeof receiver>>;
  let flaky: Awaited<ReturnType<typeof receiver>>;
  let down: Awaited<ReturnType<typeof receiver>>;
  const call = apiClient(() => env.api.url, PRINCIPAL);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gantry-events-'));
    ok = await receiver(() => false);
    flaky = await receiver((n) => n <= 3);
    down = await receiver(() => true);
    process.env[SECRET_ENV] = SECRET;
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      stack: {
        orphanGraceSeconds: 1,
        teams: [
          {
            ...DEMO_TEAM,
            webhooks: [
              { name: 'ok', url: ok.url, secretEnv: SECRET_ENV },
              { name: 'flaky', url: flaky.url, secretEnv: SECRET_ENV },
              { name: 'down', url: down.url, secretEnv: SECRET_ENV },
            ],
          },
        ],
        // Four attempts (1 s apart: the test's backoff), then the DLQ.
        events: {
          sinkFile: join(dir, 'events.jsonl'),
          maxReceiveCount: 4,
          retryBaseSeconds: 1,
          retryMaxSeconds: 1,
        },
      },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
    await Promise.all([ok?.close(), flaky?.close(), down?.close()]);
    delete process.env[SECRET_ENV];
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function submit(body: Record<string, unknown>): Promise<string> {
    const res = await call('POST', '/v1/runs', {
      team: 'demo',
      runtime: { name: 'torch-distributed' },
      image: 'registry.local/vision/train:1.0',
      queue: 'demo-queue',
      ...body,
    });
    expect(res.status).toBe(202);
    return res.body.runId as string;
  }

  async function ended(runId: string): Promise<RunRecord> {
    return waitFor(`run ${runId} to end`, async () => {
      const r = (await call('GET', `/v1/runs/${runId}`)).body as unknown as RunRecord;
      return ['Succeeded', 'Failed', 'Cancelled'].includes(r.phase) ? r : undefined;
    });
  }

  const types = (rs: Received[]) => rs.map((r) => r.event.type);

  it('a receiver gets every event of a run in order, each verified by its signature; a receiver that fails 3 times gets them later', async () => {
    // Act
    const runId = await submit({ modelName: 'events-ok', resourcesPerNode: { gpu: 1 } });
    const record = await ended(runId);
    const expected = [
      'gantry.run.accepted',
      'gantry.run.submitting',
      'gantry.run.pending',
      'gantry.run.running',
      'gantry.run.publishing',
      'gantry.run.published',
      'gantry.run.succeeded',
    ];
    await waitFor('every event at the ok receiver', () => (ok.ofRun(runId).length >= 7 ? true : undefined));
    await waitFor('every event at the flaky receiver', () =>
      flaky.ofRun(runId).length >= 7 ? true : undefined,
    );

    // Assess: the record went through these phases, and the events say so, in order, signed.
    expect(record.phase).toBe('Succeeded');
    expect(record.transitions.map((t) => t.phase)).toEqual(SUCCEEDED_PHASES);
    const got = ok.ofRun(runId);
    expect(types(got)).toEqual(expected);
    expect(got.every((r) => r.verified)).toBe(true);
    expect(got.map((r) => r.event.id)).toEqual([
      `${runId}:0`,
      `${runId}:1`,
      `${runId}:2`,
      `${runId}:3`,
      `${runId}:4`,
      `${runId}:published:${record.artifacts?.version}`,
      `${runId}:5`,
    ]);
    expect(got.at(-1)?.event.data).toMatchObject({
      phase: 'Succeeded',
      previousPhase: 'Publishing',
      team: 'demo',
      modelName: 'events-ok',
      artifacts: { modelUri: record.artifacts?.modelUri, version: record.artifacts?.version },
    });
    // published belongs to the Publishing change: its time.
    expect(got.map((r) => r.event.time)).toEqual([
      ...record.transitions.slice(0, 5).map((t) => t.at),
      record.transitions[4]?.at,
      record.transitions[5]?.at,
    ]);
    // The API lists the same events (ids and envelopes) the receivers got.
    const listed = (await call('GET', `/v1/runs/${runId}/events`)).body as unknown as {
      events: LifecycleEvent[];
    };
    expect(listed.events).toEqual(got.map((r) => r.event));
    // …and they are what the OpenAPI document says (RunEvents: strict objects, no extra fields).
    expect(RunEventsSchema.safeParse(listed).error).toBeUndefined();
    // The flaky receiver answered 500 to its first three requests, all the first event (the
    // group waits for it), then got everything in the same order.
    expect(flaky.attempts.slice(0, 4)).toEqual([`${runId}:0`, `${runId}:0`, `${runId}:0`, `${runId}:0`]);
    expect(types(flaky.ofRun(runId))).toEqual(expected);
    expect(flaky.ofRun(runId).every((r) => r.verified)).toBe(true);
    // The local sink has them too, once each, in order.
    const sink = (await readFile(join(dir, 'events.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as LifecycleEvent)
      .filter((e) => e.subject === runId);
    expect(sink.map((e) => e.type)).toEqual(expected);
  });

  it('a failed run’s events carry the cause', async () => {
    // Prepare: 16 GPUs against the demo queue's 8 — never admitted; the shortest admission deadline.
    const runId = await submit({
      modelName: 'events-stuck',
      numNodes: 2,
      resourcesPerNode: { gpu: 8 },
      admissionDeadlineSeconds: 60,
    });

    // Act
    const record = await ended(runId);
    await waitFor('the failed event', () =>
      ok.ofRun(runId).some((r) => r.event.type === 'gantry.run.failed') ? true : undefined,
    );

    // Assess
    expect(record).toMatchObject({ phase: 'Failed', reason: 'AdmissionTimeout' });
    const got = ok.ofRun(runId);
    expect(types(got)).toEqual([
      'gantry.run.accepted',
      'gantry.run.submitting',
      'gantry.run.pending',
      'gantry.run.failed',
    ]);
    expect(got.every((r) => r.verified)).toBe(true);
    expect(got.at(-1)?.event.data).toMatchObject({
      phase: 'Failed',
      previousPhase: 'Pending',
      reason: 'AdmissionTimeout',
      message: record.message,
    });
  });

  it('a receiver that always fails gets each event 4 times, in order, then the event is dead-lettered', async () => {
    // The first run's accepted event is the first message of its (run × down) group.
    const first = down.attempts[0] as string;
    const dead = await waitFor('a dead-lettered delivery', async () => {
      const out = await env.stack.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: env.stack.eventsDlqUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
        }),
      );
      const deliveries = (out.Messages ?? []).map((m) => JSON.parse(m.Body ?? '{}') as Delivery);
      return deliveries.find((d) => d.event.id === first);
    });
    expect(dead).toMatchObject({ target: 'webhook:down', event: { type: 'gantry.run.accepted' } });
    // Four attempts of the first event before anything later of that run reached it.
    const runId = first.split(':')[0] as string;
    const ofRun = down.attempts.filter((id) => id.startsWith(`${runId}:`));
    expect(ofRun.slice(0, 4)).toEqual([first, first, first, first]);
    expect(ofRun[4]).not.toBe(first);
    expect(down.accepted).toHaveLength(0);
  });
});
