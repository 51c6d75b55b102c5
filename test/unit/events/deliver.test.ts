import { describe, expect, it } from 'vitest';
import { runChanges } from '../../../lib/adapters/aws/state-stream.ts';
import type { WebhookConfig } from '../../../lib/config.ts';
import { type EventRecord, makeEventDelivery, type Post } from '../../../lib/events/deliver.ts';
import { type LifecycleEvent, runEvents } from '../../../lib/events/event.ts';
import { aliasMovedLifecycleEvent } from '../../../lib/events/model-event.ts';
import { type EventMessage, makeEventOutbox, toMessage } from '../../../lib/events/outbox.ts';
import { verifySignature } from '../../../lib/events/signature.ts';
import { applyChange, newRecord } from '../../../lib/run/record.ts';
import { aRunSpec } from '../../helpers/builders.ts';

const NOW = new Date('2026-12-01T10:00:00Z');
const clock = { now: () => NOW };
const hook = (name: string): WebhookConfig => ({
  name,
  url: `https://hooks.example/${name}`,
  secretEnv: 'S',
});
const config = { teams: [{ name: 'vision', webhooks: [hook('a'), hook('b')] }] } as never;

function aRun(runId = 'run-d') {
  let r = newRecord(aRunSpec({ runId }), 'fp', NOW);
  r = applyChange(r, { phase: 'Submitting' }, NOW) ?? r;
  r = applyChange(r, { phase: 'Pending' }, NOW) ?? r;
  return r;
}

const asRecord = (m: EventMessage, i: number, receiveCount = 1): EventRecord => ({
  messageId: `m${i}`,
  receiptHandle: `h${i}`,
  body: JSON.stringify(m.delivery),
  receiveCount,
});

function harness(answer: (url: string, event: LifecycleEvent) => number) {
  const posts: Array<{ url: string; id: string; ok: boolean }> = [];
  const retries: Array<[string, number]> = [];
  const sink: string[] = [];
  const post: Post = async (url, req) => {
    const event = JSON.parse(req.body) as LifecycleEvent;
    const check = verifySignature(
      'k',
      {
        signature: req.headers['x-gantry-signature'],
        timestamp: req.headers['x-gantry-timestamp'],
        body: req.body,
      },
      { now: NOW },
    );
    posts.push({ url, id: event.id, ok: check.ok && req.headers['x-gantry-event-id'] === event.id });
    return { status: answer(url, event) };
  };
  const delivery = makeEventDelivery({
    config,
    post,
    secret: async () => 'k',
    retry: { retryIn: async (h, s) => void retries.push([h, s]) },
    clock,
    backoff: { baseSeconds: 5, maxSeconds: 900 },
    sink: { append: async (e) => void sink.push(e.id) },
  });
  return { delivery, posts, retries, sink };
}

describe('the outbox', () => {
  it('one message per event and target, grouped by run × target, with stable deduplication ids', async () => {
    const sent: EventMessage[] = [];
    const outbox = makeEventOutbox({
      queue: { send: async (m) => void sent.push(...m) },
      config,
      where: { eventBridge: true, sink: false },
    });
    const r = aRun();
    expect(await outbox.emit(r, { phases: 1 })).toBe(6);
    expect(sent.map((m) => [m.delivery.event.id, m.delivery.target, m.group, m.dedupId])).toEqual([
      ['run-d:1', 'eventbridge', 'run-d/eventbridge', 'run-d:1/eventbridge'],
      ['run-d:1', 'webhook:a', 'run-d/webhook:a', 'run-d:1/webhook:a'],
      ['run-d:1', 'webhook:b', 'run-d/webhook:b', 'run-d:1/webhook:b'],
      ['run-d:2', 'eventbridge', 'run-d/eventbridge', 'run-d:2/eventbridge'],
      ['run-d:2', 'webhook:a', 'run-d/webhook:a', 'run-d:2/webhook:a'],
      ['run-d:2', 'webhook:b', 'run-d/webhook:b', 'run-d:2/webhook:b'],
    ]);
    expect(await outbox.emit(r, { phases: 3 })).toBe(0);
  });
  it("a model event (an alias move) goes to its team's targets, grouped by model × target, and is delivered signed", async () => {
    // Prepare
    const sent: EventMessage[] = [];
    const outbox = makeEventOutbox({
      queue: { send: async (m) => void sent.push(...m) },
      config,
      where: { eventBridge: true, sink: false },
    });
    const team = 'vision';
    const event = aliasMovedLifecycleEvent(
      {
        model: 'resnet',
        alias: 'production',
        version: 3,
        previousVersion: 4,
        seq: 7,
        storageUri: 's3://b/models/resnet/3/',
        manifestUri: 's3://b/models/resnet/3/manifest.json',
        movedAt: '2026-12-05T00:00:00.000Z',
        movedBy: 'user/alice',
        reason: 'rollback',
      },
      team,
    );
    // Act
    const queued = await outbox.emitModel(event);
    const h = harness(() => 200);
    await h.delivery.consume(
      sent.filter((m) => m.delivery.target !== 'eventbridge').map((m, i) => asRecord(m, i, 1)),
    );
    // Assess
    expect(queued).toBe(3);
    expect(sent.map((m) => [m.delivery.target, m.group, m.dedupId])).toEqual([
      ['eventbridge', 'model/resnet/eventbridge', 'resnet:alias:production:7/eventbridge'],
      ['webhook:a', 'model/resnet/webhook:a', 'resnet:alias:production:7/webhook:a'],
      ['webhook:b', 'model/resnet/webhook:b', 'resnet:alias:production:7/webhook:b'],
    ]);
    expect(h.posts.map((p) => `${p.url.slice(-1)} ${p.id}`)).toEqual([
      'a resnet:alias:production:7',
      'b resnet:alias:production:7',
    ]);
  });
});

describe('the delivery consumer', () => {
  it('posts each event signed, in order; a failure is put back with backoff and holds back its group only', async () => {
    // Prepare: webhook a fails the second event; webhook b answers 200 to everything.
    const events = runEvents(aRun());
    const messages = events.flatMap((event) =>
      (['webhook:a', 'webhook:b'] as const).map((target) => toMessage({ target, event })),
    );
    const h = harness((url, e) => (url.endsWith('/a') && e.id === 'run-d:1' ? 503 : 200));

    // Act: the second attempt of this batch
    const out = await h.delivery.consume(messages.map((m, i) => asRecord(m, i, 2)));

    // Assess: a got run-d:0, then run-d:1 failed, run-d:2 was not tried; b got all three.
    expect(h.posts.map((p) => `${p.url.slice(-1)} ${p.id}`)).toEqual([
      'a run-d:0',
      'b run-d:0',
      'a run-d:1',
      'b run-d:1',
      'b run-d:2',
    ]);
    expect(h.posts.every((p) => p.ok)).toBe(true);
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm2' }, { itemIdentifier: 'm4' }]);
    // The failed one waits its backoff (attempt 2: 10 s); the held-back one is released at once.
    expect(h.retries).toEqual([
      ['h2', 10],
      ['h4', 0],
    ]);
  });

  it('network errors fail the delivery like a non-2xx answer', async () => {
    const [event] = runEvents(aRun()) as [LifecycleEvent];
    const delivery = makeEventDelivery({
      config,
      post: async () => {
        throw new TypeError('fetch failed');
      },
      secret: async () => 'k',
      retry: { retryIn: async () => undefined },
      clock,
      backoff: { baseSeconds: 1, maxSeconds: 1 },
    });
    const out = await delivery.consume([asRecord(toMessage({ target: 'webhook:a', event }), 0)]);
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm0' }]);
  });

  it.each([
    ['a webhook no longer configured', 'webhook:gone', []],
    ['the sink', 'sink', ['run-d:0']],
  ] as const)('%s: acknowledged', async (_what, target, sunk) => {
    const [event] = runEvents(aRun()) as [LifecycleEvent];
    const h = harness(() => 500);
    const out = await h.delivery.consume([asRecord(toMessage({ target, event }), 0)]);
    expect(out.batchItemFailures).toEqual([]);
    expect(h.posts).toEqual([]);
    expect(h.sink).toEqual(sunk);
  });

  it('eventbridge without a bus here fails (and is retried, then dead-lettered); malformed bodies are dropped', async () => {
    const [event] = runEvents(aRun()) as [LifecycleEvent];
    const h = harness(() => 200);
    const out = await h.delivery.consume([
      asRecord(toMessage({ target: 'eventbridge', event }), 0),
      { messageId: 'x', receiptHandle: 'hx', body: 'not json', receiveCount: 1 },
    ]);
    expect(out.batchItemFailures).toEqual([{ itemIdentifier: 'm0' }]);
  });
});

describe('runChanges (the state table’s stream)', () => {
  it('run# inserts and modifications with their images; other items and removals are skipped', () => {
    const before = aRun();
    const after = applyChange(before, { phase: 'Running' }, NOW) ?? before;
    const image = (r: unknown) => ({
      pk: { S: 'run#run-d' },
      body: { S: JSON.stringify(r) },
      ver: { N: '2' },
    });
    const changes = runChanges([
      {
        eventName: 'MODIFY',
        dynamodb: {
          SequenceNumber: '1',
          Keys: { pk: { S: 'run#run-d' } },
          OldImage: image(before),
          NewImage: image(after),
        },
      },
      {
        eventName: 'INSERT',
        dynamodb: { SequenceNumber: '2', Keys: { pk: { S: 'sweep#s' } }, NewImage: image({}) },
      },
      {
        eventName: 'REMOVE',
        dynamodb: { SequenceNumber: '3', Keys: { pk: { S: 'run#run-d' } }, OldImage: image(after) },
      },
      {
        eventName: 'INSERT',
        dynamodb: { SequenceNumber: '4', Keys: { pk: { S: 'run#run-d' } }, NewImage: image(before) },
      },
    ]);
    expect(changes.map((c) => [c.sequence, c.before?.phase, c.after.phase])).toEqual([
      ['1', 'Pending', 'Running'],
      ['4', undefined, 'Pending'],
    ]);
  });
});
