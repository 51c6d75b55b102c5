import { describe, expect, it } from 'vitest';
import { makeModelOwners } from '../../../lib/artifacts/ownership.ts';
import { ValidationError } from '../../../lib/errors.ts';
import { RunMessageSchema } from '../../../lib/intake/message-schema.ts';
import { makeSubmitSweep } from '../../../lib/intake/submit-sweep.ts';
import { toSweepView } from '../../../lib/intake/views.ts';
import { chainedRunId } from '../../../lib/run/ids.ts';
import { newRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { chainedRequest } from '../../../lib/sweep/chain.ts';
import { makeRunStopper } from '../../../lib/sweep/stop.ts';
import { makeSweeps } from '../../../lib/sweep/sweeps.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  memoryStore,
  memoryTable,
  recordingQueue,
  recordingWorkflow,
  VISION_ARN,
} from '../../helpers/intake-fakes.ts';

/** Chaining (`then`): the full run of the best parameters, submitted once and followed to its end. */

const clock = { now: () => new Date('2026-12-03T10:00:00Z') };
const template = {
  modelName: 'resnet',
  team: 'vision',
  runtime: { name: 'torch-distributed' },
  image: 'ghcr.io/acme/train:1',
  resourcesPerNode: { gpu: 1 },
  args: ['--data=/d'],
};
const body = (over: Record<string, unknown> = {}) => ({
  template,
  parameters: [
    { name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' },
    { name: 'optimizer', type: 'categorical', values: ['adam', 'sgd'], inject: { into: 'env' } },
  ],
  objective: { metric: 'accuracy', direction: 'maximize' },
  algorithm: { name: 'random', seed: 1 },
  maxTrials: 2,
  parallelTrials: 2,
  // biome-ignore lint/suspicious/noThenProperty: the API's name for the chained run (a plain object, never a function)
  then: { numNodes: 2, hyperparameters: { epochs: 30, optimizer: 'sgd' }, datasetUri: 's3://data/full/' },
  ...over,
});

function setup() {
  const table = memoryTable();
  const queue = recordingQueue();
  const records = makeRunRecords({ table, clock });
  const sweeps = makeSweeps({ table, records, clock, bucket: BUCKET });
  const published: string[] = [];
  const caps = {
    queue,
    stopRun: makeRunStopper({ workflow: recordingWorkflow(), records, clock, deleteJob: async () => {} }),
    publishBest: async (run: { runId: string }) => {
      published.push(run.runId);
      return { runId: run.runId, model: 'resnet', published: true, version: 1 };
    },
  };
  const deps = {
    sweeps,
    owners: makeModelOwners({ store: memoryStore(), clock }),
    config: intakeConfig(),
    bucket: BUCKET,
    clock,
    caps: { queue },
    newSeed: () => 42,
  };
  return { sweeps, records, queue, caps, published, submit: makeSubmitSweep(deps) };
}

const chainedMessages = (queue: ReturnType<typeof recordingQueue>, sweepId: string) =>
  queue.sent
    .map((m) => RunMessageSchema.parse(m.message).run)
    .filter((run) => run.runId === chainedRunId(sweepId));

describe('chaining a full run after the sweep (then)', () => {
  it('submits the best parameters with the overrides once, follows the run and ends with its model', async () => {
    const { submit, sweeps, records, queue, caps, published } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: body() });
    const objective = [0.7, 0.9];
    for (const t of record.trials) {
      const spec = sweeps.specOf(record, t);
      await records.create(newRecord(spec, 'f', clock.now()));
      await records.update(spec.runId, {
        phase: 'Succeeded',
        metrics: { accuracy: objective[t.index] as number },
      });
    }
    // Concurrent ticks: one full run is submitted, not two.
    await Promise.all([sweeps.advance(record.sweepId, caps), sweeps.advance(record.sweepId, caps)]);
    await sweeps.advance(record.sweepId, caps);
    const sent = chainedMessages(queue, record.sweepId);
    expect(sent).toHaveLength(1);
    const best = record.trials[1]?.parameters as Record<string, number | string>;
    const run = sent[0];
    expect(run?.trial).toBeUndefined();
    expect(run?.request).toMatchObject({
      numNodes: 2,
      datasetUri: 's3://data/full/',
      args: ['--data=/d', `--lr=${best.lr}`, '--epochs=30'],
      env: { OPTIMIZER: 'sgd' },
      hyperparameters: { lr: best.lr, optimizer: 'sgd', epochs: 30 },
      queue: 'vision-queue',
    });
    // The best trial itself is not published: the full run publishes the model.
    expect(published).toEqual([]);
    let sweep = await sweeps.get(record.sweepId);
    expect(sweep?.phase).toBe('Completing');
    expect(toSweepView(sweep as never).then).toMatchObject({
      runId: chainedRunId(record.sweepId),
      phase: 'Accepted',
    });

    // The full run runs, then succeeds with its model: the sweep ends Succeeded and shows it.
    const spec = run as NonNullable<typeof run>;
    await records.create(newRecord(spec as never, 'f', clock.now()));
    await records.update(spec.runId, { phase: 'Running' });
    await sweeps.advance(record.sweepId, caps);
    expect((await sweeps.get(record.sweepId))?.chained?.phase).toBe('Running');
    await records.update(spec.runId, {
      phase: 'Succeeded',
      artifacts: { outputUri: spec.outputUri, modelUri: 's3://b/models/resnet/v1/', version: '1' },
    });
    await sweeps.advance(record.sweepId, caps);
    sweep = await sweeps.get(record.sweepId);
    expect(sweep?.phase).toBe('Succeeded');
    expect(sweep?.chained).toMatchObject({
      phase: 'Succeeded',
      model: { name: 'resnet', version: '1', modelUri: 's3://b/models/resnet/v1/' },
    });
    await sweeps.advance(record.sweepId, caps);
    expect(chainedMessages(queue, record.sweepId)).toHaveLength(1);
  });

  it('fails the sweep (ChainedRunFailed) when the full run fails', async () => {
    const { submit, sweeps, records, queue, caps } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: body() });
    for (const t of record.trials) {
      const spec = sweeps.specOf(record, t);
      await records.create(newRecord(spec, 'f', clock.now()));
      await records.update(spec.runId, { phase: 'Succeeded', metrics: { accuracy: 0.5 } });
    }
    await sweeps.advance(record.sweepId, caps);
    const spec = chainedMessages(queue, record.sweepId)[0] as never;
    await records.create(newRecord(spec, 'f', clock.now()));
    await records.update(chainedRunId(record.sweepId), { phase: 'Failed', reason: 'TrainingFailed' });
    await sweeps.advance(record.sweepId, caps);
    const sweep = await sweeps.get(record.sweepId);
    expect(sweep).toMatchObject({
      phase: 'Failed',
      reason: 'ChainedRunFailed',
      chained: { phase: 'Failed' },
    });
  });

  it('cancelling the sweep while the full run runs stops it and ends the sweep Cancelled', async () => {
    const { submit, sweeps, records, queue, caps } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: body() });
    for (const t of record.trials) {
      const spec = sweeps.specOf(record, t);
      await records.create(newRecord(spec, 'f', clock.now()));
      await records.update(spec.runId, { phase: 'Succeeded', metrics: { accuracy: 0.5 } });
    }
    await sweeps.advance(record.sweepId, caps);
    const spec = chainedMessages(queue, record.sweepId)[0] as never;
    await records.create(newRecord(spec, 'f', clock.now()));
    await records.update(chainedRunId(record.sweepId), { phase: 'Running' });
    await sweeps.advance(record.sweepId, caps);
    expect((await sweeps.get(record.sweepId))?.phase).toBe('Completing');
    const after = await sweeps.cancel(record.sweepId, caps);
    expect(after).toMatchObject({ phase: 'Cancelled', chained: { phase: 'Cancelled', reason: 'Cancelled' } });
    expect((await records.get(chainedRunId(record.sweepId)))?.phase).toBe('Cancelled');
  });

  it('submits nothing when no trial succeeded', async () => {
    const { submit, sweeps, records, queue, caps } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body: body() });
    for (const t of record.trials) {
      const spec = sweeps.specOf(record, t);
      await records.create(newRecord(spec, 'f', clock.now()));
      await records.update(spec.runId, { phase: 'Failed', reason: 'TrainingFailed' });
    }
    await sweeps.advance(record.sweepId, caps);
    expect(chainedMessages(queue, record.sweepId)).toEqual([]);
    expect((await sweeps.get(record.sweepId))?.phase).toBe('Failed');
  });

  it.each([
    [{ numNodes: 0 }, 'then.numNodes', /at least 1/],
    [{ datasetUri: 'ftp://x' }, 'then.datasetUri', /./],
    [{ env: { GANTRY_X: '1' } }, 'then.env', /reserved/],
  ])('a then of %j is a 400 naming %s', async (then, field, rule) => {
    const { submit } = setup();
    const err = await submit({ caller: iam(VISION_ARN), body: body({ then }) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    const issue = (err as ValidationError).issues.find((i) => i.field.startsWith(field));
    expect(issue?.rule).toMatch(rule);
  });

  it('then with publish none is a 400', async () => {
    const { submit } = setup();
    const err = await submit({ caller: iam(VISION_ARN), body: body({ publish: 'none' }) }).catch(
      (e: unknown) => e,
    );
    expect((err as ValidationError).issues).toEqual([
      { field: 'then', rule: expect.stringMatching(/publish none/) },
    ]);
  });

  it('chainedRequest: overrides replace, args append, searched hyperparameters are injected where they are', () => {
    const request = chainedRequest(
      { ...template, numNodes: 1, env: { A: '1' } } as never,
      [
        { name: 'lr', type: 'continuous', min: 0, max: 1, scale: 'linear' },
        { name: 'bs', type: 'discrete', values: [8], inject: { into: 'env', as: 'BATCH' } },
      ] as never,
      { lr: 0.5, bs: 8 },
      { hyperparameters: { bs: 16, epochs: 3 }, args: ['--full'], env: { B: '2' }, numNodes: 4 },
    );
    expect(request).toMatchObject({
      numNodes: 4,
      args: ['--data=/d', '--lr=0.5', '--epochs=3', '--full'],
      env: { A: '1', BATCH: '16', B: '2' },
      hyperparameters: { lr: 0.5, bs: 16, epochs: 3 },
    });
  });
});
