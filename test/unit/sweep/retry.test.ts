import { describe, expect, it } from 'vitest';
import { makeModelOwners } from '../../../lib/artifacts/ownership.ts';
import { RunMessageSchema } from '../../../lib/intake/message-schema.ts';
import { makeSubmitSweep } from '../../../lib/intake/submit-sweep.ts';
import { toSweepView } from '../../../lib/intake/views.ts';
import { trialRunId } from '../../../lib/run/ids.ts';
import { INFRASTRUCTURE_REASONS, isInfrastructureFailure } from '../../../lib/run/phases.ts';
import { newRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import {
  MAX_TRIAL_RETRIES,
  type RunObservation,
  type SweepRecord,
  step,
  type Trial,
} from '../../../lib/sweep/record.ts';
import { SweepRequestSchema } from '../../../lib/sweep/schema.ts';
import { makeSweeps } from '../../../lib/sweep/sweeps.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  memoryStore,
  memoryTable,
  recordingQueue,
  VISION_ARN,
} from '../../helpers/intake-fakes.ts';

/** Same-parameter retry: a trial lost to infrastructure runs again as a new run, up to twice. */

const NOW = new Date('2026-12-03T10:00:00Z');
const SWEEP = 'swp-aaaaaaaaaaaaaaaaaaaa';

describe('isInfrastructureFailure', () => {
  it.each([
    ['Preempted', true],
    ['NodeLost', true],
    ['Evicted', true],
    ['Unschedulable', true],
    ['Stalled', true],
    ['TrainingFailed', false],
    ['CrashLoopBackOff', false],
    ['ImagePullFailed', false],
    [undefined, false],
  ])('%s → %s', (reason, expected) => {
    expect(isInfrastructureFailure(reason)).toBe(expected);
  });
  it('names exactly the five infrastructure reasons', () => {
    expect([...INFRASTRUCTURE_REASONS].sort()).toEqual([
      'Evicted',
      'NodeLost',
      'Preempted',
      'Stalled',
      'Unschedulable',
    ]);
  });
});

function sweep(trials: Trial[], over: Partial<SweepRecord> = {}): SweepRecord {
  return {
    sweepId: SWEEP,
    team: 't',
    phase: 'Running',
    request: SweepRequestSchema.parse({
      template: { modelName: 'm', team: 't', runtime: { name: 'torch' }, image: 'ghcr.io/acme/train:1' },
      parameters: [{ name: 'lr', type: 'discrete', values: [0.1, 0.01] }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 1 },
      maxTrials: 2,
      parallelTrials: 2,
      maxFailedTrials: 0,
    }),
    fingerprint: 'f',
    placement: { cluster: 'c', namespace: 'n' },
    trials,
    createdAt: NOW.toISOString(),
    updatedAt: NOW.toISOString(),
    ...over,
  };
}
const trial = (index: number, phase: Trial['phase'], over: Partial<Trial> = {}): Trial => ({
  index,
  runId: trialRunId(SWEEP, index),
  parameters: { lr: 0.01 },
  phase,
  releasedAt: NOW.toISOString(),
  ...over,
});
const none = () => {
  throw new Error('no new trial expected');
};
const failed = (reason: string, gpuHours = 0): RunObservation => ({ phase: 'Failed', reason, gpuHours });

describe('retrying a trial lost to infrastructure (step)', () => {
  it('releases it again with the same parameters as a new run, not counting it as failed', () => {
    const t0 = trial(0, 'Running');
    const out = step(
      sweep([t0, trial(1, 'Running')]),
      new Map([[t0.runId, failed('NodeLost', 0.5)]]),
      NOW,
      none,
      true,
    );
    // maxFailedTrials 0: a counted failure would have failed the sweep.
    expect(out.record.phase).toBe('Running');
    expect(out.record.outcome).toBeUndefined();
    expect(out.record.trials[0]).toEqual({
      index: 0,
      runId: trialRunId(SWEEP, 0, 1),
      parameters: { lr: 0.01 },
      phase: 'Queued',
      releasedAt: NOW.toISOString(),
      attempt: 1,
      retryOf: t0.runId,
      retryReason: 'NodeLost',
      lostGpuHours: 0.5,
    });
    expect(out.release).toEqual([]);
  });

  it(`a trial lost ${MAX_TRIAL_RETRIES + 1} times fails (and counts)`, () => {
    const t0 = trial(0, 'Running', { runId: trialRunId(SWEEP, 0, 2), attempt: 2, retryOf: 'x' });
    const out = step(
      sweep([t0, trial(1, 'Running')]),
      new Map([[t0.runId, failed('Evicted')]]),
      NOW,
      none,
      true,
    );
    expect(out.record.trials[0]?.phase).toBe('Failed');
    expect(out.record.outcome).toMatchObject({ reason: 'TooManyFailedTrials' });
  });

  it.each([
    ['a training failure', sweep([trial(0, 'Running'), trial(1, 'Running')]), failed('TrainingFailed')],
    [
      'a sweep that stopped releasing',
      sweep([trial(0, 'Running'), trial(1, 'Running')], {
        phase: 'Completing',
        outcome: { phase: 'Cancelled', reason: 'Cancelled', message: 'c' },
      }),
      failed('Preempted'),
    ],
  ])('is not retried after %s', (_what, record, run) => {
    const out = step(record, new Map([[trialRunId(SWEEP, 0), run]]), NOW, none, true);
    expect(out.record.trials[0]?.phase).toBe('Failed');
    expect(out.record.trials[0]?.retryOf).toBeUndefined();
  });
});

describe('retrying a trial lost to infrastructure (advance)', () => {
  const clock = { now: () => NOW };
  function setup() {
    const table = memoryTable();
    const queue = recordingQueue();
    const records = makeRunRecords({ table, clock });
    const sweeps = makeSweeps({ table, records, clock, bucket: BUCKET });
    const submit = makeSubmitSweep({
      sweeps,
      owners: makeModelOwners({ store: memoryStore(), clock }),
      config: intakeConfig(),
      bucket: BUCKET,
      clock,
      caps: { queue },
      newSeed: () => 42,
    });
    return { sweeps, records, queue, submit };
  }
  const body = {
    template: {
      modelName: 'resnet',
      team: 'vision',
      runtime: { name: 'torch-distributed' },
      image: 'ghcr.io/acme/train:1',
      resourcesPerNode: { gpu: 1 },
    },
    parameters: [{ name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' }],
    objective: { metric: 'accuracy', direction: 'maximize' },
    algorithm: { name: 'random', seed: 1 },
    maxTrials: 2,
    parallelTrials: 2,
    maxFailedTrials: 0,
  };

  it('sends the retry once (the trial index kept, retryOf in the view), then a third loss fails it', async () => {
    const { sweeps, records, queue, submit } = setup();
    const { record } = await submit({ caller: iam(VISION_ARN), body });
    const t0 = record.trials[0] as Trial;
    const lose = async (runId: string, attempt: number) => {
      const spec = sweeps.specOf(record, { ...t0, runId, ...(attempt ? { attempt } : {}) });
      await records.create(newRecord(spec, 'f', clock.now()));
      await records.update(runId, { phase: 'Failed', reason: 'Preempted' });
    };
    const sentFor = (runId: string) =>
      queue.sent.map((m) => RunMessageSchema.parse(m.message).run).filter((r) => r.runId === runId);

    await lose(t0.runId, 0);
    // The trial's own advance (it can send, not stop) and a tick at once: one retry, sent once.
    await Promise.all([
      sweeps.advance(record.sweepId, { queue }, undefined, { onlyRuns: [t0.runId] }),
      sweeps.advance(record.sweepId, { queue }),
    ]);
    const retry1 = trialRunId(record.sweepId, 0, 1);
    const sent = sentFor(retry1);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.trial).toEqual({ sweepId: record.sweepId, trialIndex: 0, publish: false });
    expect(sent[0]?.request.args).toEqual([`--lr=${t0.parameters.lr}`]);
    let view = toSweepView((await sweeps.get(record.sweepId)) as SweepRecord);
    expect(view.trials[0]).toMatchObject({
      index: 0,
      runId: retry1,
      phase: 'Queued',
      attempt: 1,
      retryOf: t0.runId,
    });
    expect(view.trials).toHaveLength(2);
    expect(view.phase).toBe('Running');

    await lose(retry1, 1);
    await sweeps.advance(record.sweepId, { queue });
    const retry2 = trialRunId(record.sweepId, 0, 2);
    expect(sentFor(retry2)).toHaveLength(1);
    await lose(retry2, 2);
    await sweeps.advance(record.sweepId, { queue });
    view = toSweepView((await sweeps.get(record.sweepId)) as SweepRecord);
    expect(view.trials[0]).toMatchObject({ runId: retry2, phase: 'Failed', reason: 'Preempted', attempt: 2 });
    expect(view.outcome).toMatchObject({ reason: 'TooManyFailedTrials' });
  });
});
