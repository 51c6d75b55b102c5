import { describe, expect, it } from 'vitest';
import { makeModelOwners } from '../../../lib/artifacts/ownership.ts';
import {
  ForbiddenError,
  IdempotencyConflictError,
  NotFoundError,
  ValidationError,
} from '../../../lib/errors.ts';
import { makeInFlight } from '../../../lib/intake/in-flight.ts';
import { makeRerunRun, mergePatch } from '../../../lib/intake/rerun-run.ts';
import { makeSubmitRun } from '../../../lib/intake/submit-run.ts';
import { toRunSummary, toRunView, toSubmitResponse } from '../../../lib/intake/views.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { parseRunRequest } from '../../../lib/run/schema.ts';
import { trialRequest, trialSpec } from '../../../lib/sweep/trials.ts';
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

function setup() {
  const store = memoryStore();
  const queue = recordingQueue();
  const clock = { now: () => new Date('2026-12-01T10:00:00Z') };
  const table = memoryTable();
  const records = makeRunRecords({ table, clock });
  const config = intakeConfig();
  const submit = makeSubmitRun({
    records,
    owners: makeModelOwners({ store, clock }),
    queue,
    clock,
    config,
    bucket: BUCKET,
    inFlight: makeInFlight(table),
  });
  const rerun = makeRerunRun({ records, config, submit });
  return { queue, records, submit, rerun };
}

const caller = iam(VISION_ARN);

describe('mergePatch (RFC 7386)', () => {
  it.each([
    [{ a: 1, b: { c: 2, d: 3 } }, { b: { c: 9 } }, { a: 1, b: { c: 9, d: 3 } }],
    [{ a: 1, b: 2 }, { b: null }, { a: 1 }],
    [{ args: ['x', 'y'] }, { args: ['z'] }, { args: ['z'] }],
    [{ a: 'x' }, { a: { b: 1 } }, { a: { b: 1 } }],
    [{ a: 1 }, {}, { a: 1 }],
  ])('%j + %j = %j', (target, patch, merged) => {
    expect(mergePatch(target, patch)).toEqual(merged);
  });

  it('leaves its target as it was', () => {
    const target = { env: { A: '1' } };
    mergePatch(target, { env: { B: '2' } });
    expect(target).toEqual({ env: { A: '1' } });
  });
});

describe('rerunRun', () => {
  it("submits the run's request again as a new run, without its key, naming the original", async () => {
    // Prepare
    const { rerun, submit, queue } = setup();
    const { record: original } = await submit({
      caller,
      body: visionBody({ args: ['--epochs=3'], env: { LR: '0.1' } }),
      idempotencyKey: 'first',
    });
    // Act
    const { record, created } = await rerun({ caller, runId: original.runId });
    // Assess
    expect(created).toBe(true);
    expect(record.runId).not.toBe(original.runId);
    expect(record.rerunOf).toBe(original.runId);
    const { idempotencyKey: _k, ...sameRequest } = original.spec.request;
    expect(record.spec.request).toEqual(sameRequest);
    expect(record.spec.metricsUri).not.toBe(original.spec.metricsUri);
    expect(queue.sent.map((m) => m.attributes.runId)).toEqual([original.runId, record.runId]);
    // The link in every view of the new run.
    expect(toSubmitResponse(record)).toMatchObject({
      rerunOf: original.runId,
      links: { rerunOf: `/v1/runs/${original.runId}`, rerun: `/v1/runs/${record.runId}/rerun` },
    });
    expect(toRunSummary(record).rerunOf).toBe(original.runId);
    expect(toRunView(record).links.rerunOf).toBe(`/v1/runs/${original.runId}`);
    expect(toRunView(original).rerunOf).toBeUndefined();
  });

  it('merges the overrides into the request: objects key by key, null removes', async () => {
    const { rerun, submit } = setup();
    const { record: original } = await submit({
      caller,
      body: visionBody({ env: { LR: '0.1', BATCH: '32' }, hyperparameters: { lr: 0.1 } }),
    });
    const { record } = await rerun({
      caller,
      runId: original.runId,
      body: { overrides: { numNodes: 2, env: { LR: '0.01' }, hyperparameters: null } },
    });
    expect(record.spec.request.numNodes).toBe(2);
    expect(record.spec.request.env).toEqual({ LR: '0.01', BATCH: '32' });
    expect(record.spec.request.hyperparameters).toBeUndefined();
  });

  it("replays with the caller's Idempotency-Key; another body under that key is a conflict", async () => {
    const { rerun, submit } = setup();
    const { record: original } = await submit({ caller, body: visionBody() });
    const first = await rerun({ caller, runId: original.runId, idempotencyKey: 'again-1' });
    const replay = await rerun({ caller, runId: original.runId, idempotencyKey: 'again-1' });
    expect(replay).toMatchObject({ created: false, record: { runId: first.record.runId } });
    await expect(
      rerun({
        caller,
        runId: original.runId,
        idempotencyKey: 'again-1',
        body: { overrides: { numNodes: 2 } },
      }),
    ).rejects.toBeInstanceOf(IdempotencyConflictError);
    // Without a key, each call is another run.
    const a = await rerun({ caller, runId: original.runId });
    const b = await rerun({ caller, runId: original.runId });
    expect(new Set([first.record.runId, a.record.runId, b.record.runId]).size).toBe(3);
  });

  it('refuses a bad override with a 400 naming it as sent, and an unknown body field', async () => {
    const { rerun, submit } = setup();
    const { record: original } = await submit({ caller, body: visionBody() });
    const bad = await rerun({ caller, runId: original.runId, body: { overrides: { numNodes: 0 } } }).catch(
      (e: unknown) => e,
    );
    expect(bad).toBeInstanceOf(ValidationError);
    expect((bad as ValidationError).issues).toEqual([
      { field: 'overrides.numNodes', rule: 'numNodes must be at least 1' },
    ]);
    const typo = await rerun({ caller, runId: original.runId, body: { overides: { numNodes: 2 } } }).catch(
      (e: unknown) => e,
    );
    expect((typo as ValidationError).issues).toEqual([{ field: 'overides', rule: 'unknown field' }]);
    const unknown = await rerun({
      caller,
      runId: original.runId,
      body: { overrides: { numNodez: 2 } },
    }).catch((e: unknown) => e);
    expect((unknown as ValidationError).issues).toEqual([
      { field: 'overrides.numNodez', rule: 'unknown field' },
    ]);
  });

  it('reruns a sweep trial as a plain run: its parameters as injected, not part of the sweep', async () => {
    const { rerun, records } = setup();
    const template = parseRunRequest(visionBody({ args: ['--epochs=3'] }));
    const spec = trialSpec({
      runId: 'run-aaaaaaaaaaaaaaaaaaab',
      sweepId: 'swp-aaaaaaaaaaaaaaaaaaaa',
      trialIndex: 2,
      request: trialRequest(template, [{ name: 'lr', type: 'continuous', min: 0.001, max: 0.1 }] as never, {
        lr: 0.01,
      }),
      placement: { cluster: 'local', namespace: 'team-vision', queue: 'vision-queue' },
      bucket: BUCKET,
      publish: false,
    });
    await records.create(newRecord(spec, 'fp', new Date('2026-12-01T09:00:00Z')));
    expect(toRunSummary((await records.get(spec.runId)) as RunRecord).parameters).toEqual({ lr: 0.01 });
    const { record } = await rerun({ caller, runId: spec.runId });
    expect(record.spec.trial).toBeUndefined();
    expect(record.spec.request.args).toEqual(['--epochs=3', '--lr=0.01']);
    expect(record.spec.request.hyperparameters).toEqual({ lr: 0.01 });
    expect(toRunSummary(record).parameters).toBeUndefined();
  });

  it("answers another team's run as an unknown one (404); a rule of the team is a 403", async () => {
    const { rerun, submit } = setup();
    const { record: original } = await submit({ caller, body: visionBody() });
    await expect(rerun({ caller: iam(NLP_ARN), runId: original.runId })).rejects.toBeInstanceOf(
      NotFoundError,
    );
    await expect(rerun({ caller, runId: 'run-aaaaaaaaaaaaaaaaaaaa' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(
      rerun({ caller, runId: original.runId, body: { overrides: { image: 'docker.io/evil/miner:1' } } }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(rerun({ caller, runId: 'not-a-run' })).rejects.toBeInstanceOf(ValidationError);
  });
});
