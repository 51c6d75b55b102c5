import { describe, expect, it } from 'vitest';
import { makeModelOwners } from '../../../lib/artifacts/ownership.ts';
import {
  AwsUnavailableError,
  ForbiddenError,
  IdempotencyConflictError,
  ValidationError,
} from '../../../lib/errors.ts';
import { makeInFlight } from '../../../lib/intake/in-flight.ts';
import { RunMessageSchema } from '../../../lib/intake/message-schema.ts';
import { makeSubmitRun } from '../../../lib/intake/submit-run.ts';
import { fingerprintOf, runIdFromKey } from '../../../lib/run/ids.ts';
import { teamCountersKey } from '../../../lib/run/in-flight.ts';
import { makeRunRecords, runItemKey } from '../../../lib/run/records.ts';
import { parseRunRequest } from '../../../lib/run/schema.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  memoryStore,
  memoryTable,
  NLP_ARN,
  recordingQueue,
  VISION_ARN,
  visionBody,
} from '../../helpers/intake-fakes.ts';

// The store and the queue are fakes of the ObjectStore and RunQueue ports (object literals).
function setup() {
  const store = memoryStore();
  const queue = recordingQueue();
  const clock = { now: () => new Date('2026-12-01T10:00:00Z') };
  const table = memoryTable();
  const records = makeRunRecords({ table, clock });
  const owners = makeModelOwners({ store, clock });
  const submit = makeSubmitRun({
    records,
    owners,
    queue,
    clock,
    config: intakeConfig(),
    bucket: BUCKET,
    inFlight: makeInFlight(table),
  });
  return { store, table, queue, records, owners, submit };
}

const caller = iam(VISION_ARN);

describe('submitRun', () => {
  it('records the run as Accepted and enqueues it with its id and key', async () => {
    // Prepare
    const { submit, queue, records } = setup();
    // Act
    const { record, created } = await submit({ caller, body: visionBody(), idempotencyKey: 'k-1' });
    // Assess
    const runId = runIdFromKey('vision', 'k-1');
    expect(created).toBe(true);
    expect(record).toMatchObject({ runId, phase: 'Accepted' });
    expect(record.spec).toMatchObject({
      runId,
      jobName: runId,
      cluster: 'local',
      namespace: 'team-vision',
      outputUri: `s3://${BUCKET}/runs/${runId}/output/`,
      request: { queue: 'vision-queue', idempotencyKey: 'k-1' },
    });
    expect(await records.get(runId)).toEqual(record);
    expect(queue.sent).toHaveLength(1);
    expect(queue.sent[0]?.attributes).toEqual({ runId, idempotencyKey: 'k-1' });
    expect(RunMessageSchema.parse(queue.sent[0]?.message)).toEqual({ kind: 'run', run: record.spec });
  });

  it('replays the same key and body: same run, no second record, enqueued again while Accepted', async () => {
    const { submit, queue, table } = setup();
    const first = await submit({ caller, body: visionBody(), idempotencyKey: 'k-1' });
    // The key may come in the body instead of the header; defaults spelled out change nothing.
    const second = await submit({ caller, body: visionBody({ idempotencyKey: 'k-1', numNodes: 1 }) });
    expect(second.created).toBe(false);
    expect(second.record).toEqual(first.record);
    // One record, counted once in the team's counters.
    expect([...table.items.keys()]).toEqual([runItemKey(first.record.runId), teamCountersKey('vision')]);
    expect((await table.get('count#vision'))?.counters).toEqual({ runs: 1, gpus: 0 });
    expect(queue.sent.map((m) => m.attributes.runId)).toEqual([first.record.runId, first.record.runId]);
  });

  it('does not enqueue a replay once the run has moved on', async () => {
    const { submit, queue, records } = setup();
    const { record } = await submit({ caller, body: visionBody(), idempotencyKey: 'k-1' });
    await records.update(record.runId, { phase: 'Submitting' });
    const replay = await submit({ caller, body: visionBody(), idempotencyKey: 'k-1' });
    expect(replay).toMatchObject({ created: false, record: { phase: 'Submitting' } });
    expect(queue.sent).toHaveLength(1);
  });

  it('recovers a failed enqueue on the client retry', async () => {
    const { submit, queue } = setup();
    queue.failNext(new AwsUnavailableError('SQS is down'));
    await expect(submit({ caller, body: visionBody(), idempotencyKey: 'k-1' })).rejects.toBeInstanceOf(
      AwsUnavailableError,
    );
    const retry = await submit({ caller, body: visionBody(), idempotencyKey: 'k-1' });
    expect(retry.created).toBe(false);
    expect(queue.sent).toHaveLength(1);
  });

  it('refuses the same key with another body (409), and keeps the first run', async () => {
    const { submit, queue, records } = setup();
    const { record } = await submit({ caller, body: visionBody(), idempotencyKey: 'k-1' });
    await expect(
      submit({ caller, body: visionBody({ modelName: 'other' }), idempotencyKey: 'k-1' }),
    ).rejects.toBeInstanceOf(IdempotencyConflictError);
    expect((await records.get(record.runId))?.spec.request.modelName).toBe('resnet');
    expect(queue.sent).toHaveLength(1);
  });

  it('scopes keys to the team: another team with the same key gets another run', () => {
    expect(runIdFromKey('vision', 'k-1')).not.toBe(runIdFromKey('nlp', 'k-1'));
  });

  it("refuses another team's model name at submit (403 naming the owner), before writing anything", async () => {
    // Prepare: vision owns resnet (its first publish recorded it).
    const { submit, queue, store, table, owners } = setup();
    await owners.claim('resnet', 'vision', 'run-aaaaaaaaaaaaaaaaaaaa');
    const nlp = iam(NLP_ARN);
    const nlpBody = visionBody({
      team: 'nlp',
      modelName: 'resnet',
      image: 'ghcr.io/acme/nlp/x:1',
      runtime: { name: 'torch-distributed' },
    });
    const keys = [...store.objects.keys(), ...table.items.keys()];
    // Act
    const err = await submit({ caller: nlp, body: nlpBody }).catch((e: unknown) => e);
    // Assess
    expect(err).toBeInstanceOf(ForbiddenError);
    expect((err as ForbiddenError).rule).toBe(
      'model resnet belongs to team vision; choose another modelName',
    );
    expect([...store.objects.keys(), ...table.items.keys()]).toEqual(keys);
    expect(queue.sent).toHaveLength(0);
    // A run that publishes nothing may use the name; the owner may always.
    await expect(
      submit({ caller: nlp, body: { ...nlpBody, producesArtifacts: false } }),
    ).resolves.toMatchObject({
      created: true,
    });
    await expect(submit({ caller, body: visionBody({ modelName: 'resnet' }) })).resolves.toMatchObject({
      created: true,
    });
  });

  it('gives each request without a key a new run', async () => {
    const { submit } = setup();
    const a = await submit({ caller, body: visionBody() });
    const b = await submit({ caller, body: visionBody() });
    expect(a.record.runId).not.toBe(b.record.runId);
    expect(a.created && b.created).toBe(true);
  });

  it.each<[string, Record<string, unknown>, string | undefined, string]>([
    ['header and body keys differ', visionBody({ idempotencyKey: 'a' }), 'b', 'idempotencyKey'],
    ['a header key with spaces', visionBody(), 'has space', 'Idempotency-Key'],
    ['an empty header key', visionBody(), '', 'Idempotency-Key'],
    ['an over-long header key', visionBody(), 'k'.repeat(129), 'Idempotency-Key'],
    // API Gateway joins a repeated header with ',' and node:http with ', ': never one joined key.
    ['a repeated header as API Gateway joins it', visionBody(), 'k-1,k-2', 'Idempotency-Key'],
    ['a repeated header as node:http joins it', visionBody(), 'k-1, k-2', 'Idempotency-Key'],
  ])('refuses %s (400)', async (_name, body, header, field) => {
    const { submit, queue } = setup();
    const err = await submit({ caller, body, idempotencyKey: header }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues.map((i) => i.field)).toContain(field);
    if (header?.includes(',')) expect((err as Error).message).toMatch(/send the header once/);
    expect(queue.sent).toHaveLength(0);
  });

  it.each([
    [
      'PyTorchJob',
      /a queued PyTorchJob would never be admitted on cluster local: Kueue there does not manage PyTorchJob \(its kubeflow\.org\/pytorchjob integration is not enabled; Kueue manages TrainJob on that cluster\)/,
    ],
    ['TFJob', /a queued TFJob would never be admitted on cluster local/],
    ['MPIJob', /Kueue has no integration for the Training Operator v1 MPIJob/],
  ])(
    'refuses a queued %s where Kueue does not manage it (400 naming the cluster and kind)',
    async (target, rule) => {
      const { submit, queue } = setup();
      const body = visionBody({ target, numNodes: 2 }); // vision's runs go through vision-queue
      const err = await submit({ caller, body }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).issues).toEqual([
        { field: 'queue', rule: expect.stringMatching(rule) },
      ]);
      expect(queue.sent).toHaveLength(0);
    },
  );

  it('accepts a queued PyTorchJob where the cluster lists it in kueueManagedKinds, and an unqueued one anywhere', async () => {
    const clock = { now: () => new Date('2026-12-01T10:00:00Z') };
    const base = intakeConfig();
    const config = {
      ...base,
      clusters: base.clusters.map((c) => ({
        ...c,
        kueueManagedKinds: ['TrainJob' as const, 'PyTorchJob' as const],
      })),
    };
    const owners = makeModelOwners({ store: memoryStore(), clock });
    const table = memoryTable();
    const records = makeRunRecords({ table, clock });
    const submit = makeSubmitRun({
      records,
      owners,
      queue: recordingQueue(),
      clock,
      config,
      bucket: BUCKET,
      inFlight: makeInFlight(table),
    });
    const queued = await submit({ caller, body: visionBody({ target: 'PyTorchJob' }) });
    expect(queued.record.spec.request).toMatchObject({ target: 'PyTorchJob', queue: 'vision-queue' });
    // nlp has no queues: its PyTorchJob runs unqueued on a cluster with Kueue's default configuration.
    const unqueued = await setup().submit({
      caller: iam(NLP_ARN),
      body: { ...visionBody({ team: 'nlp', target: 'PyTorchJob', image: 'ghcr.io/acme/nlp/t:1' }) },
    });
    expect(unqueued.record.spec.request.queue).toBeUndefined();
  });

  it('refuses a request for another team, or outside the team rules, before writing anything (403)', async () => {
    const { submit, store, queue } = setup();
    for (const body of [visionBody({ team: 'nlp' }), visionBody({ namespace: 'kube-system' })]) {
      await expect(submit({ caller, body })).rejects.toBeInstanceOf(ForbiddenError);
    }
    expect(store.objects.size).toBe(0);
    expect(queue.sent).toHaveLength(0);
  });

  it('refuses a run too large for the execution input (400)', async () => {
    const { submit } = setup();
    const env = Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`V${i}`, 'x'.repeat(30_000)]));
    const err = await submit({ caller, body: visionBody({ env }) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues[0]?.rule).toMatch(/must serialise to at most/);
  });

  it('fingerprints the request without the key and with defaults filled', () => {
    const a = parseRunRequest(visionBody({ idempotencyKey: 'x' }));
    const b = parseRunRequest(visionBody({ numNodes: 1, target: 'auto' }));
    expect(fingerprintOf(a)).toBe(fingerprintOf(b));
    expect(fingerprintOf(a)).not.toBe(fingerprintOf(parseRunRequest(visionBody({ numNodes: 2 }))));
  });
});
