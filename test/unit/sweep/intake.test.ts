import { describe, expect, it } from 'vitest';
import { makeModelOwners } from '../../../lib/artifacts/ownership.ts';
import {
  ForbiddenError,
  IdempotencyConflictError,
  NotFoundError,
  ValidationError,
} from '../../../lib/errors.ts';
import { RunMessageSchema } from '../../../lib/intake/message-schema.ts';
import { makeSubmitSweep } from '../../../lib/intake/submit-sweep.ts';
import { makeCancelSweep, makeGetSweep, makeListSweeps } from '../../../lib/intake/sweeps.ts';
import { toSweepSummary, toSweepView } from '../../../lib/intake/views.ts';
import { trialRunId } from '../../../lib/run/ids.ts';
import { newRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { isTrialTerminal, type SweepRecord } from '../../../lib/sweep/record.ts';
import { makeRunStopper } from '../../../lib/sweep/stop.ts';
import { makeSweeps } from '../../../lib/sweep/sweeps.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  memoryStore,
  memoryTable,
  NLP_ARN,
  recordingQueue,
  recordingWorkflow,
  VISION_ARN,
} from '../../helpers/intake-fakes.ts';

/**
 * Sweep intake over in-memory fakes of the ports (the local-stack e2e test in
 * test/e2e/sweeps.test.ts runs the same code against real S3, SQS and Step Functions stand-ins).
 */

const clock = { now: () => new Date('2026-12-02T10:00:00Z') };

const template = {
  modelName: 'resnet',
  team: 'vision',
  runtime: { name: 'torch-distributed' },
  image: 'ghcr.io/acme/train:1',
  resourcesPerNode: { gpu: 1 },
};

const valid = (over: Record<string, unknown> = {}) => ({
  template,
  parameters: [
    { name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' },
    { name: 'batch_size', type: 'integer', min: 16, max: 128, step: 16 },
    { name: 'optimizer', type: 'categorical', values: ['adam', 'sgd'], inject: { into: 'env' } },
  ],
  objective: { metric: 'accuracy', direction: 'maximize' },
  algorithm: { name: 'random', seed: 1 },
  maxTrials: 10,
  parallelTrials: 3,
  ...over,
});

function setup() {
  const store = memoryStore();
  const queue = recordingQueue();
  const table = memoryTable();
  const records = makeRunRecords({ table, clock });
  const sweeps = makeSweeps({ table, records, clock, bucket: BUCKET });
  const owners = makeModelOwners({ store, clock });
  const deps = {
    sweeps,
    owners,
    config: intakeConfig(),
    bucket: BUCKET,
    clock,
    caps: { queue },
    newSeed: () => 42,
  };
  return {
    store,
    table,
    queue,
    records,
    sweeps,
    submit: makeSubmitSweep(deps),
    get: makeGetSweep(deps),
    deps,
  };
}

async function issuesOf(body: unknown): Promise<Array<{ field: string; rule: string }>> {
  const { submit } = setup();
  const err = await submit({ caller: iam(VISION_ARN), body }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ValidationError);
  return [...(err as ValidationError).issues];
}

describe('submitting a sweep', () => {
  it('records the sweep and releases parallelTrials trials with ids derived from the sweep id', async () => {
    const { submit, queue, table } = setup();
    const { record, created } = await submit({
      caller: iam(VISION_ARN),
      body: valid(),
      idempotencyKey: 'k1',
    });
    expect(created).toBe(true);
    expect(record.trials.map((t) => t.runId)).toEqual([0, 1, 2].map((i) => trialRunId(record.sweepId, i)));
    expect(queue.sent).toHaveLength(3);
    const message = RunMessageSchema.parse(queue.sent[0]?.message);
    expect(message.run.trial).toEqual({ sweepId: record.sweepId, trialIndex: 0, publish: false });
    const t0 = record.trials[0]?.parameters as Record<string, number | string>;
    expect(message.run.request.args).toEqual([`--lr=${t0.lr}`, `--batch_size=${t0.batch_size}`]);
    expect(message.run.request.env).toEqual({ OPTIMIZER: t0.optimizer });
    expect(message.run.request.hyperparameters).toEqual(t0);
    expect(message.run.request.queue).toBe('vision-queue');
    expect(table.items.get(`sweep#${record.sweepId}`)?.indexes.active).toEqual({
      pk: 'active#sweep',
      sk: record.sweepId,
    });
  });

  it("lists the sweep with its trials' live counts, from the sweep item's counters", async () => {
    const { submit, records, sweeps, queue, deps, table } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: valid(), idempotencyKey: 'counts' });
    const list = makeListSweeps({ table, config: deps.config });
    const counts = async () =>
      toSweepSummary((await list({ caller: iam(VISION_ARN), query: {} })).sweeps[0] as never).counts;
    expect(await counts()).toEqual({ Queued: 3 });
    const spec0 = sweeps.specOf(record, record.trials[0] as never);
    await records.create(newRecord(spec0, 'f', clock.now()));
    await records.update(spec0.runId, { phase: 'Succeeded', metrics: { accuracy: 0.7 } });
    // The trial's own advance: its item ends Succeeded and its successor (0 + 3) is released.
    await sweeps.advance(record.sweepId, { queue }, undefined, { onlyRuns: [spec0.runId] });
    expect(await counts()).toEqual({ Queued: 3, Succeeded: 1 });
    expect((await sweeps.get(record.sweepId))?.trials.map((t) => [t.index, t.phase])).toEqual([
      [0, 'Succeeded'],
      [1, 'Queued'],
      [2, 'Queued'],
      [3, 'Queued'],
    ]);
    expect(table.items.get(`sweep#${record.sweepId}`)?.body).not.toContain('"trials"');
  });

  /**
   * parallelTrials 3 (queueAhead 2): trials 0 and 1 recorded waiting for quota by the reconciler's
   * advance, trial 2 ended while they waited and the reconciler's advance recorded it (it leaves
   * the release to the trial's own advance), so its successor 5 is held.
   */
  async function heldByQuota() {
    const env = setup();
    const { submit, records, sweeps, queue } = env;
    const { record } = await submit({ caller: iam(VISION_ARN), body: valid(), idempotencyKey: 'quota' });
    const [t0, t1, t2] = record.trials.map((t) => sweeps.specOf(record, t).runId) as [string, string, string];
    for (const t of record.trials)
      await records.create(newRecord(sweeps.specOf(record, t), 'f', clock.now()));
    const waits = { phase: 'Pending', admission: { state: 'QuotaReserved', reason: 'Pending' } } as const;
    await records.update(t0, waits);
    await records.update(t1, waits);
    await records.update(t2, { phase: 'Running' });
    await sweeps.advance(record.sweepId, { queue });
    await records.update(t2, { phase: 'Succeeded', metrics: { accuracy: 0.7 } });
    await sweeps.advance(record.sweepId, { queue });
    const released = () => queue.sent.map((m) => RunMessageSchema.parse(m.message).run.trial?.trialIndex);
    expect(released()).toEqual([0, 1, 2]);
    const ends = async (runId: string, accuracy: number) => {
      await records.update(runId, { phase: 'Running' });
      await records.update(runId, { phase: 'Succeeded', metrics: { accuracy } });
    };
    const ownAdvance = (runId: string) =>
      sweeps.advance(record.sweepId, { queue }, undefined, { onlyRuns: [runId] });
    const trialOf = async (index: number) =>
      (await sweeps.get(record.sweepId))?.trials.find((t) => t.index === index);
    return { ...env, t0, t1, released, ends, ownAdvance, trialOf };
  }

  it("lets a trial's own advance under quota pressure see which trials wait now, not when last recorded", async () => {
    const { records, t0, t1, released, ends, ownAdvance, trialOf } = await heldByQuota();
    // Trial 1 is admitted, then trial 0 ends. The items still say trial 1 waits; its run says
    // otherwise, so trial 0's own advance releases its successor 3 and the held slot 5.
    await records.update(t1, { phase: 'Running' });
    await ends(t0, 0.8);
    await ownAdvance(t0);
    expect(released()).toEqual([0, 1, 2, 3, 5]);
    expect(await trialOf(1)).toMatchObject({ phase: 'Running' });
    expect((await trialOf(1))?.waitingForQuota).toBeUndefined();
  });

  it("refills an ended trial's slot over quota in the trial's own advance", async () => {
    const { submit, records, sweeps, queue } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: valid(), idempotencyKey: 'refill' });
    const [t0, t1, t2] = record.trials.map((t) => sweeps.specOf(record, t).runId) as [string, string, string];
    for (const t of record.trials)
      await records.create(newRecord(sweeps.specOf(record, t), 'f', clock.now()));
    const waits = { phase: 'Pending', admission: { state: 'QuotaReserved', reason: 'Pending' } } as const;
    await records.update(t0, waits);
    await records.update(t1, waits);
    await records.update(t2, { phase: 'Running' });
    await sweeps.advance(record.sweepId, { queue });
    await records.update(t2, { phase: 'Succeeded', metrics: { accuracy: 0.7 } });
    await sweeps.advance(record.sweepId, { queue }, undefined, { onlyRuns: [t2] });
    const released = queue.sent.map((m) => RunMessageSchema.parse(m.message).run.trial?.trialIndex);
    // Trial 2's GPU goes to trial 0 or 1; its successor 5 takes the place in the queue at once.
    expect(released).toEqual([0, 1, 2, 5]);
    const view = toSweepView((await sweeps.get(record.sweepId)) as SweepRecord);
    expect(view.quota).toEqual({ waiting: 2, heldSlots: 0, queueAhead: 2 });
  });

  it('never shows a reader more trials in flight than parallelTrials while an advance writes', async () => {
    // A reader looks at the sweep's items after every write the advances make (as a view or a
    // list polling meanwhile would); parallelTrials 2.
    const store = memoryStore();
    const queue = recordingQueue();
    const table = memoryTable();
    const records = makeRunRecords({ table, clock });
    const sweeps = makeSweeps({ table, records, clock, bucket: BUCKET });
    const submit = makeSubmitSweep({
      sweeps,
      owners: makeModelOwners({ store, clock }),
      config: intakeConfig(),
      bucket: BUCKET,
      clock,
      caps: { queue },
      newSeed: () => 42,
    });
    const { record } = await submit({
      caller: iam(VISION_ARN),
      body: valid({ parallelTrials: 2, maxTrials: 6 }),
      idempotencyKey: 'in-flight',
    });
    const seen: number[] = [];
    const put = table.put.bind(table);
    table.put = async (...args) => {
      const out = await put(...args);
      if (args[0].startsWith('trial#')) {
        const now = await sweeps.get(record.sweepId);
        seen.push(now?.trials.filter((t) => !isTrialTerminal(t.phase)).length ?? 0);
      }
      return out;
    };
    for (let round = 0; round < 2; round++) {
      const current = (await sweeps.get(record.sweepId)) as SweepRecord;
      for (const t of current.trials.filter((x) => !isTrialTerminal(x.phase))) {
        const spec = sweeps.specOf(current, t);
        await records.create(newRecord(spec, 'f', clock.now()));
        await records.update(spec.runId, { phase: 'Running' });
        await records.update(spec.runId, { phase: 'Succeeded', metrics: { accuracy: 0.5 } });
        await sweeps.advance(record.sweepId, { queue }, undefined, { onlyRuns: [spec.runId] });
      }
    }
    expect(seen.length).toBeGreaterThanOrEqual(8);
    expect(Math.max(...seen)).toBe(2);
  });

  it('shows each open trial in the phase its run says now, the phase the run list shows', async () => {
    const { submit, records, sweeps, get } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: valid(), idempotencyKey: 'phase' });
    const [s0, s1] = record.trials.map((t) => sweeps.specOf(record, t));
    await records.create(newRecord(s0 as never, 'f', clock.now()));
    await records.update((s0 as { runId: string }).runId, { phase: 'Running' });
    await records.create(newRecord(s1 as never, 'f', clock.now()));
    await records.update((s1 as { runId: string }).runId, {
      phase: 'Failed',
      reason: 'TrainingFailed',
      message: 'exit code 1: CUDA out of memory',
    });
    // No advance ran since: the trial items still say Queued.
    expect((await sweeps.get(record.sweepId))?.trials.map((t) => t.phase)).toEqual([
      'Queued',
      'Queued',
      'Queued',
    ]);
    const view = toSweepView(await get({ caller: iam(VISION_ARN), sweepId: record.sweepId }));
    expect(view.trials.map((t) => [t.phase, t.reason, t.message])).toEqual([
      ['Running', undefined, undefined],
      ['Failed', 'TrainingFailed', 'exit code 1: CUDA out of memory'],
      ['Queued', undefined, undefined],
    ]);
    expect(view.counts).toEqual({ Running: 1, Failed: 1, Queued: 1 });
  });

  it('never prunes a run that reached its end by the time it is stopped; the sweep end still stops it', async () => {
    const { submit, records, sweeps } = setup();
    const workflow = recordingWorkflow();
    const stop = makeRunStopper({ workflow, records, clock, deleteJob: async () => {} });
    const { record } = await submit({ caller: iam(VISION_ARN), body: valid(), idempotencyKey: 'late-prune' });
    const [s0, s1] = record.trials.map((t) => sweeps.specOf(record, t)) as [never, never];
    for (const [spec, change] of [
      [s0, { phase: 'Running', progress: { percent: 100 } }],
      [s1, { phase: 'Publishing' }],
    ] as const) {
      await records.create(newRecord(spec, 'f', clock.now()));
      await records.update((spec as { runId: string }).runId, { phase: 'Running' });
      await records.update((spec as { runId: string }).runId, change);
      await stop(spec, 'EarlyStopped', undefined, 'pruned by ASHA …');
    }
    expect(workflow.stops).toEqual([]);
    expect((await records.get((s0 as { runId: string }).runId))?.phase).toBe('Running');
    expect((await records.get((s1 as { runId: string }).runId))?.phase).toBe('Publishing');
    await stop(s0, 'SweepEnded');
    expect((await records.get((s0 as { runId: string }).runId))?.phase).toBe('Cancelled');
  });

  it("leaves the end of another trial to that trial's own advance", async () => {
    const { t0, t1, released, ends, ownAdvance, trialOf } = await heldByQuota();
    // Trial 1 ran and ended; its own advance has not come yet when trial 0's does.
    await ends(t1, 0.9);
    await ends(t0, 0.8);
    await ownAdvance(t0);
    // Trial 1's item still says it waits: one more may wait, so only trial 0's successor 3.
    expect(released()).toEqual([0, 1, 2, 3]);
    expect(await trialOf(1)).toMatchObject({ phase: 'Pending', waitingForQuota: true });
    await ownAdvance(t1);
    expect(await trialOf(1)).toMatchObject({ phase: 'Succeeded', objective: 0.9 });
    expect(released()).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('replays the same key and body without releasing more, and refuses the key with another body', async () => {
    const { submit, queue } = setup();
    const first = await submit({ caller: iam(VISION_ARN), body: valid(), idempotencyKey: 'k1' });
    const again = await submit({ caller: iam(VISION_ARN), body: valid(), idempotencyKey: 'k1' });
    expect(again.created).toBe(false);
    expect(again.record.sweepId).toBe(first.record.sweepId);
    expect(queue.sent).toHaveLength(3);
    await expect(
      submit({ caller: iam(VISION_ARN), body: valid({ maxTrials: 11 }), idempotencyKey: 'k1' }),
    ).rejects.toBeInstanceOf(IdempotencyConflictError);
  });

  it('sends again a released trial whose message was lost, once it has waited a minute without a run', async () => {
    const { submit, queue, table, records } = setup();
    queue.failNext(new Error('send lost'));
    await expect(submit({ caller: iam(VISION_ARN), body: valid(), idempotencyKey: 'lost' })).rejects.toThrow(
      'send lost',
    );
    const sent = queue.sent.length;
    let now = clock.now().getTime() + 61_000;
    const later = makeSweeps({ table, records, clock: { now: () => new Date(now) }, bucket: BUCKET });
    const sweepId = (await table.query<{ sweepId: string }>('active', 'active#sweep', { limit: 10 })).items[0]
      ?.sweepId as string;
    await later.advance(sweepId, { queue });
    const resent = queue.sent.slice(sent).map((m) => RunMessageSchema.parse(m.message).run.runId);
    expect(resent).toContain(trialRunId(sweepId, 0));
    // Not again right away: the re-send restarts the clock.
    now += 1000;
    const before = queue.sent.length;
    await later.advance(sweepId, { queue });
    expect(queue.sent.length).toBe(before);
  });

  it('fills in a seed when none is given and records it, so the sweep can be reproduced', async () => {
    const { submit } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: valid({ algorithm: { name: 'tpe' } }) });
    expect(record.request.algorithm).toEqual({ name: 'tpe', seed: 42 });
  });

  it('chooses the algorithm when none is given (auto), stores the choice and says why', async () => {
    const { submit, sweeps } = setup();
    const body = valid();
    delete (body as { algorithm?: unknown }).algorithm;
    const { record } = await submit({ caller: iam(VISION_ARN), body });
    // A categorical parameter and 10 trials (one CMA-ES generation): TPE, seeded, in place of auto.
    expect(record.request.algorithm).toEqual({ name: 'tpe', seed: 42 });
    expect(record.algorithmChoice).toEqual({
      algorithm: 'tpe',
      reason: expect.stringMatching(/2 numeric parameters and 1 discrete or categorical/),
    });
    expect((await sweeps.get(record.sweepId))?.algorithmChoice?.algorithm).toBe('tpe');
    const numeric = valid({
      parameters: valid().parameters.slice(0, 2),
      algorithm: { name: 'auto', seed: 7 },
    });
    const gp = await submit({ caller: iam(VISION_ARN), body: numeric });
    expect(gp.record.request.algorithm).toEqual({ name: 'gp', seed: 7 });
    expect(gp.record.algorithmChoice?.reason).toMatch(/2 parameters \(≤ 6\), none categorical/);
  });

  it('accepts asha, hyperband and cmaes and fills in their defaults', async () => {
    const { submit } = setup();
    const asha = await submit({
      caller: iam(VISION_ARN),
      body: valid({ algorithm: { name: 'cmaes' }, earlyStopping: { rule: 'asha' }, idempotencyKey: 'a' }),
    });
    expect(asha.record.request.algorithm).toEqual({ name: 'cmaes', seed: 42 });
    expect(asha.record.request.earlyStopping).toEqual({
      rule: 'asha',
      minResourcePercent: 10,
      reductionFactor: 3,
      minTrialsAtRung: 3,
    });
    const hyperband = await submit({
      caller: iam(VISION_ARN),
      body: valid({
        earlyStopping: { rule: 'hyperband', minResourcePercent: 5, reductionFactor: 2 },
        idempotencyKey: 'h',
      }),
    });
    expect(hyperband.record.request.earlyStopping).toEqual({
      rule: 'hyperband',
      minResourcePercent: 5,
      reductionFactor: 2,
      minTrialsAtRung: 3,
    });
  });

  it("applies the template team's tenancy rules", async () => {
    const { submit } = setup();
    await expect(submit({ caller: iam(NLP_ARN), body: valid() })).rejects.toBeInstanceOf(ForbiddenError);
    await expect(
      submit({
        caller: iam(VISION_ARN),
        body: valid({ template: { ...template, image: 'docker.io/evil:1' } }),
      }),
    ).rejects.toBeInstanceOf(ForbiddenError);
  });

  it("refuses a sweep that would publish another team's model name (403 naming the owner)", async () => {
    const { submit, deps, queue } = setup();
    await deps.owners.claim('resnet', 'nlp', 'run-aaaaaaaaaaaaaaaaaaaa');
    const err = await submit({ caller: iam(VISION_ARN), body: valid() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ForbiddenError);
    expect((err as ForbiddenError).rule).toMatch(/^model resnet belongs to team nlp/);
    expect(queue.sent).toHaveLength(0);
  });

  it("refuses a sweep whose parallel trials would hold more GPUs than the team's maxGpusInFlight", async () => {
    const { submit, queue } = setup();
    const body = valid({ template: { ...template, resourcesPerNode: { gpu: 8 } }, parallelTrials: 5 });
    const err = await submit({ caller: iam(VISION_ARN), body }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ForbiddenError);
    expect((err as ForbiddenError).rule).toBe(
      "parallelTrials 5 × 8 GPUs per trial = 40 GPUs exceed team vision's maxGpusInFlight 32",
    );
    expect(queue.sent).toHaveLength(0);
    // Within the cap: 4 × 8 = 32.
    await expect(
      submit({ caller: iam(VISION_ARN), body: { ...body, parallelTrials: 4 } }),
    ).resolves.toMatchObject({ created: true });
  });

  it('a sweep of another team is hidden', async () => {
    const { submit, get } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: valid() });
    const err = await get({ caller: iam(NLP_ARN), sweepId: record.sweepId }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as Error).message).toBe(`sweep ${record.sweepId} does not exist`);
    expect(toSweepView(await get({ caller: iam(VISION_ARN), sweepId: record.sweepId })).plannedTrials).toBe(
      10,
    );
  });
});

describe('invalid sweeps are 400s that name the field and the rule', () => {
  const cases: Array<[string, unknown, string, RegExp]> = [
    ['empty search space', valid({ parameters: [] }), 'parameters', /must not be empty/],
    [
      'min > max',
      valid({ parameters: [{ name: 'lr', type: 'continuous', min: 0.1, max: 0.01 }] }),
      'parameters.0.min',
      /less than max/,
    ],
    [
      'log scale from 0',
      valid({ parameters: [{ name: 'lr', type: 'continuous', min: 0, max: 1, scale: 'log' }] }),
      'parameters.0.min',
      /greater than 0/,
    ],
    [
      'grid larger than maxTrials',
      valid({
        algorithm: { name: 'grid' },
        parameters: [
          { name: 'lr', type: 'discrete', values: [0.1, 0.01, 0.001] },
          { name: 'bs', type: 'integer', min: 16, max: 64, step: 16 },
        ],
        maxTrials: 10,
      }),
      'maxTrials',
      /12 points, more than maxTrials 10/,
    ],
    [
      'grid over a continuous parameter without gridPoints',
      valid({ algorithm: { name: 'grid' } }),
      'parameters.0.gridPoints',
      /required for grid search/,
    ],
    ['unknown algorithm', valid({ algorithm: { name: 'hyperband' } }), 'algorithm.name', /grid, random, tpe/],
    [
      'objective metric missing',
      valid({ objective: { direction: 'maximize' } }),
      'objective.metric',
      /required/,
    ],
    [
      'unknown direction',
      valid({ objective: { metric: 'acc', direction: 'up' } }),
      'objective.direction',
      /minimize or maximize/,
    ],
    ['maxTrials missing', valid({ maxTrials: undefined }), 'maxTrials', /required/],
    [
      'parallelTrials above maxTrials',
      valid({ parallelTrials: 11 }),
      'parallelTrials',
      /must not exceed maxTrials/,
    ],
    [
      'duplicate parameter',
      valid({
        parameters: [
          { name: 'lr', type: 'discrete', values: [1] },
          { name: 'lr', type: 'discrete', values: [2] },
        ],
      }),
      'parameters.1.name',
      /duplicate/,
    ],
    [
      'empty categorical values',
      valid({ parameters: [{ name: 'opt', type: 'categorical', values: [] }] }),
      'parameters.0.values',
      /must not be empty/,
    ],
    [
      'unknown parameter type',
      valid({ parameters: [{ name: 'x', type: 'float', min: 0, max: 1 }] }),
      'parameters.0.type',
      /continuous, integer, discrete, categorical/,
    ],
    [
      'reserved env injection',
      valid({
        parameters: [{ name: 'lr', type: 'discrete', values: [1], inject: { into: 'env', as: 'GANTRY_LR' } }],
      }),
      'parameters.0.inject.as',
      /reserved/,
    ],
    [
      'template invalid',
      valid({ template: { ...template, numNodes: 0 } }),
      'template.numNodes',
      /at least 1/,
    ],
    [
      'template with a key',
      valid({ template: { ...template, idempotencyKey: 'x' } }),
      'template.idempotencyKey',
      /on the sweep/,
    ],
    [
      'template with an output',
      valid({ template: { ...template, output: { uri: 's3://other-bucket/x/' } } }),
      'template.output',
      /own run/,
    ],
    [
      'unknown early-stopping rule',
      valid({ earlyStopping: { rule: 'pbt' } }),
      'earlyStopping.rule',
      /one of median .*asha .*hyperband/,
    ],
    [
      'asha reductionFactor below 2',
      valid({ earlyStopping: { rule: 'asha', reductionFactor: 1 } }),
      'earlyStopping.reductionFactor',
      /at least 2/,
    ],
    [
      'asha minResourcePercent of 0',
      valid({ earlyStopping: { rule: 'asha', minResourcePercent: 0 } }),
      'earlyStopping.minResourcePercent',
      /greater than 0/,
    ],
    [
      'hyperband minResourcePercent of 100',
      valid({ earlyStopping: { rule: 'hyperband', minResourcePercent: 100 } }),
      'earlyStopping.minResourcePercent',
      /less than 100/,
    ],
    [
      'hyperband minTrialsAtRung of 0',
      valid({ earlyStopping: { rule: 'hyperband', minTrialsAtRung: 0 } }),
      'earlyStopping.minTrialsAtRung',
      /at least 1/,
    ],
    [
      'a median-rule field on asha',
      valid({ earlyStopping: { rule: 'asha', startAtPercent: 10 } }),
      'earlyStopping.startAtPercent',
      /unknown field/,
    ],
    [
      'cmaes popSize of 1',
      valid({ algorithm: { name: 'cmaes', popSize: 1 } }),
      'algorithm.popSize',
      /at least 2/,
    ],
    [
      'cmaes startupTrials above maxTrials',
      valid({ algorithm: { name: 'cmaes', startupTrials: 11 } }),
      'algorithm.startupTrials',
      /must not exceed maxTrials/,
    ],
    ['unknown field', { ...valid(), trials: 3 }, 'trials', /unknown field/],
    [
      'a parameter named __proto__',
      valid({ parameters: [{ name: '__proto__', type: 'continuous', min: 0, max: 1 }] }),
      'parameters.0.name',
      /must not be __proto__, constructor or prototype/,
    ],
  ];
  it.each(cases)('%s', async (_name, body, field, rule) => {
    const issues = await issuesOf(body);
    const issue = issues.find((i) => i.field === field);
    expect(issue, JSON.stringify(issues)).toBeDefined();
    expect(issue?.rule).toMatch(rule);
  });

  it('a parameter value that makes the trial invalid is found before any trial runs', async () => {
    const issues = await issuesOf(
      valid({
        parameters: [
          {
            name: 'p',
            type: 'categorical',
            values: ['ok', 'x'.repeat(256)],
            inject: { into: 'args', as: '--p' },
          },
        ],
        template: { ...template, args: Array.from({ length: 128 }, () => '--flag') },
      }),
    );
    expect(issues[0]?.field).toBe('template.args');
    expect(issues[0]?.rule).toMatch(/with the parameters injected/);
  });
});

describe('cancelling a sweep', () => {
  it('stops every trial in flight (run Cancelled, job deleted), ends the sweep Cancelled, and is idempotent', async () => {
    const { submit, deps, queue, records } = setup();
    const workflow = recordingWorkflow();
    const deleted: string[] = [];
    const caps = {
      queue,
      stopRun: makeRunStopper({
        workflow,
        records,
        clock,
        deleteJob: async (job: { name: string }) => {
          deleted.push(job.name);
        },
      }),
    };
    const cancel = makeCancelSweep({ ...deps, caps });
    const { record } = await submit({ caller: iam(VISION_ARN), body: valid() });
    // Trial 0 has a job already; trials 1 and 2 are still on the queue (no run record).
    const spec0 = deps.sweeps.specOf(record, record.trials[0] as never);
    await records.create(newRecord(spec0, 'f', clock.now()));
    await records.update(spec0.runId, {
      phase: 'Pending',
      job: {
        cluster: 'local',
        apiVersion: 'v',
        kind: 'TrainJob',
        namespace: 'team-vision',
        name: spec0.runId,
      },
    });

    // Another team cannot cancel it, and learns nothing: the same 404 as an unknown sweep.
    const foreign = await cancel({ caller: iam(NLP_ARN), sweepId: record.sweepId }).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(NotFoundError);
    expect(workflow.stops).toEqual([]);

    const after = await cancel({ caller: iam(VISION_ARN), sweepId: record.sweepId });
    expect(after.phase).toBe('Cancelled');
    expect(after.trials.map((t) => t.phase)).toEqual(['Cancelled', 'Cancelled', 'Cancelled']);
    expect(workflow.stops.sort()).toEqual(record.trials.map((t) => t.runId).sort());
    expect(deleted).toEqual([spec0.runId]);
    // The queued trials' records exist, Cancelled: the consumer will not start them.
    for (const t of record.trials) expect((await records.get(t.runId))?.phase).toBe('Cancelled');
    expect(queue.sent).toHaveLength(3);
    const again = await cancel({ caller: iam(VISION_ARN), sweepId: record.sweepId });
    expect(again.phase).toBe('Cancelled');
    expect(queue.sent).toHaveLength(3);
  });
});
