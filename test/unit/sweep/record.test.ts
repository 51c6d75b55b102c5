import { describe, expect, it } from 'vitest';
import { pruneMessage } from '../../../lib/sweep/early-stopping.ts';
import {
  isTrialTerminal,
  OWN_RELEASE_MS,
  queueAhead,
  quotaPressure,
  type RunObservation,
  readyToFinish,
  releasable,
  type SweepRecord,
  step,
  sweepUsage,
  type Trial,
  underQuotaPressure,
} from '../../../lib/sweep/record.ts';
import { type SweepRequestInput, SweepRequestSchema } from '../../../lib/sweep/schema.ts';

/** The sweep's decision step, on records built by hand: what is released, stopped and decided. */

const NOW = new Date('2026-12-02T10:00:00Z');

function sweep(over: Partial<SweepRequestInput> = {}, trials: Trial[] = []): SweepRecord {
  const request = SweepRequestSchema.parse({
    template: {
      modelName: 'm',
      team: 't',
      runtime: { name: 'torch' },
      image: 'ghcr.io/acme/train:1',
    },
    parameters: [{ name: 'lr', type: 'discrete', values: [0.1, 0.01, 0.001, 0.0001] }],
    objective: { metric: 'accuracy', direction: 'maximize' },
    algorithm: { name: 'random', seed: 1 },
    maxTrials: 10,
    parallelTrials: 3,
    ...over,
  });
  return {
    sweepId: 'swp-aaaaaaaaaaaaaaaaaaaa',
    team: 't',
    phase: 'Running',
    request,
    fingerprint: 'f',
    placement: { cluster: 'c', namespace: 'n' },
    trials,
    createdAt: NOW.toISOString(),
    updatedAt: NOW.toISOString(),
  };
}

const trial = (index: number, phase: Trial['phase'], over: Partial<Trial> = {}): Trial => ({
  index,
  runId: `run-${index}`,
  parameters: { lr: 0.01 },
  phase,
  releasedAt: NOW.toISOString(),
  ...over,
});

const newTrial = (index: number) => trial(index, 'Queued');
const runs = (entries: Array<[string, RunObservation]>) =>
  new Map<string, RunObservation | undefined>(entries);

describe('releasing trials', () => {
  it('releases up to parallelTrials, and one more for each trial that ends', () => {
    const first = step(sweep(), runs([]), NOW, newTrial, false);
    expect(first.release.map((t) => t.index)).toEqual([0, 1, 2]);
    const busy = step(first.record, runs([['run-0', { phase: 'Running' }]]), NOW, newTrial, false);
    expect(busy.release).toEqual([]);
    const ended = runs([['run-0', { phase: 'Succeeded', metrics: { accuracy: 0.9 } }]]);
    // The trial's own advance releases its successor (0 + parallelTrials 3) as it sees it end.
    const one = step(first.record, ended, NOW, newTrial, false, new Set(['run-0']));
    expect(one.release.map((t) => t.index)).toEqual([3]);
    expect(one.record.best).toMatchObject({ trialIndex: 0, objective: 0.9 });
    // Any other advance records the end first and releases the successor on its next step, so
    // it does not race the trial's own advance for index 3.
    const tick = step(first.record, ended, NOW, newTrial, false);
    expect(tick.release).toEqual([]);
    expect(tick.record.trials[0]?.phase).toBe('Succeeded');
    expect(step(tick.record, runs([]), NOW, newTrial, false).release.map((t) => t.index)).toEqual([3]);
    // Unless the run ended long enough ago that its own advance is over (cut off, or never came).
    const endedAgo = (ms: number) =>
      runs([
        [
          'run-0',
          {
            phase: 'Succeeded',
            metrics: { accuracy: 0.9 },
            endedAt: new Date(NOW.getTime() - ms).toISOString(),
          },
        ],
      ]);
    expect(step(first.record, endedAgo(2_000), NOW, newTrial, false).release).toEqual([]);
    expect(
      step(first.record, endedAgo(OWN_RELEASE_MS), NOW, newTrial, false).release.map((t) => t.index),
    ).toEqual([3]);
  });

  it('keeps at most queueAhead trials waiting for quota, releasing the slots it held back a few at a time', () => {
    // parallelTrials 3: queueAhead is 2 (at least 2; a sixteenth of parallelTrials above 32).
    expect([3, 32, 33, 96, 500].map(queueAhead)).toEqual([2, 2, 3, 6, 32]);
    const waiting = { phase: 'Pending', waitingForQuota: true } as const;
    const record = sweep({}, [
      trial(0, 'Pending'),
      trial(1, 'Pending'),
      trial(2, 'Succeeded', { objective: 0.5 }),
    ]);
    // Two wait: nothing is released, though trial 2 ended and its slot is free.
    const held = step(
      record,
      runs([
        ['run-0', waiting],
        ['run-1', waiting],
      ]),
      NOW,
      newTrial,
      false,
    );
    expect(held.release).toEqual([]);
    expect(underQuotaPressure(held.record)).toBe(true);
    // One admitted, one still waits: one more may wait, so one trial is released (2's successor).
    const one = step(
      held.record,
      runs([
        ['run-0', { phase: 'Running' }],
        ['run-1', waiting],
      ]),
      NOW,
      newTrial,
      false,
    );
    expect(one.release.map((t) => t.index)).toEqual([5]);
  });

  it('releases held slots at most queueAhead at a time once nothing waits, then as freely as before', () => {
    // parallel 3, budget 10: trials 0-2 ended while others waited, their successors 3-5 held back.
    const ended = [0, 1, 2].map((i) => trial(i, 'Succeeded', { objective: 0.5 }));
    const held = sweep({}, ended);
    expect(underQuotaPressure(held)).toBe(true);
    const refill = step(held, runs([]), NOW, newTrial, false);
    expect(refill.release.map((t) => t.index)).toEqual([3, 4]);
    // The slot still held is released by the next step (nothing waits: a queueAhead's worth).
    const rest = step(refill.record, runs([]), NOW, newTrial, false);
    expect(rest.release.map((t) => t.index)).toEqual([5]);
    // No pressure left: the sweep releases every free slot at once, as a sweep that never waited.
    expect(underQuotaPressure(rest.record)).toBe(false);
  });

  it('shows held slots only under quota pressure: while a trial waits for quota', () => {
    // Three ends recorded by an advance that leaves their release to the next: no trial waits.
    const ended = sweep(
      {},
      [0, 1, 2].map((i) => trial(i, 'Succeeded', { objective: 0.5 })),
    );
    expect(quotaPressure(ended)).toBeUndefined();
    const waiting = sweep({ parallelTrials: 4 }, [
      ...[0, 1, 2].map((i) => trial(i, 'Succeeded', { objective: 0.5 })),
      trial(3, 'Pending', { waitingForQuota: true }),
    ]);
    expect(quotaPressure(waiting)).toEqual({ waiting: 1, heldSlots: 3, queueAhead: 2 });
  });

  it("lets a trial's own advance release slots held back earlier besides its successor", () => {
    // parallel 3: trial 1 ended while others waited (successor 4 held); trial 0 ends now.
    const record = sweep({}, [
      trial(0, 'Running'),
      trial(1, 'Succeeded', { objective: 0.5 }),
      trial(2, 'Running'),
    ]);
    const own = new Set(['run-0']);
    const end0 = runs([['run-0', { phase: 'Succeeded', metrics: { accuracy: 0.9 } }]]);
    expect(step(record, end0, NOW, newTrial, false, own).release.map((t) => t.index)).toEqual([3, 4]);
    // One trial waits, and trial 0's end frees its GPUs for it: one more may join the queue
    // besides it, so both still go.
    const waitingRecord = sweep({}, [
      trial(0, 'Running'),
      trial(1, 'Succeeded', { objective: 0.5 }),
      trial(2, 'Pending', { waitingForQuota: true }),
    ]);
    expect(step(waitingRecord, end0, NOW, newTrial, false, own).release.map((t) => t.index)).toEqual([3, 4]);
  });

  it("refills the ended trial's own slot in its own advance over quota, before slots held earlier", () => {
    // parallel 4 (queueAhead 2): trial 0 ended earlier (successor 4 held), trials 2 and 3 wait,
    // trial 1 ran and ends now. Its GPU goes to a waiting trial, so its successor 5 takes that
    // trial's place in the queue at once (before: nothing until an advance saw one admitted).
    const waits = { phase: 'Pending', waitingForQuota: true } as const;
    const record = sweep({ parallelTrials: 4 }, [
      trial(0, 'Succeeded', { objective: 0.5 }),
      trial(1, 'Running'),
      trial(2, 'Pending', { waitingForQuota: true }),
      trial(3, 'Pending', { waitingForQuota: true }),
    ]);
    const out = step(
      record,
      runs([
        ['run-1', { phase: 'Succeeded', metrics: { accuracy: 0.9 } }],
        ['run-2', waits],
        ['run-3', waits],
      ]),
      NOW,
      newTrial,
      false,
      new Set(['run-1']),
    );
    expect(out.release.map((t) => t.index)).toEqual([5]);
    // A trial that ended while it waited held no GPU: it frees no place beyond its own in the queue.
    const waitedAndFailed = step(
      record,
      runs([
        ['run-1', { phase: 'Running' }],
        ['run-2', { phase: 'Failed', reason: 'TrainingFailed' }],
        ['run-3', waits],
      ]),
      NOW,
      newTrial,
      false,
      new Set(['run-2']),
    );
    expect(waitedAndFailed.release.map((t) => t.index)).toEqual([6]);
  });

  it('refills its own slot in its own advance even while more than queueAhead trials read as waiting', () => {
    // parallel 4 (queueAhead 2): trials 1-3 read as waiting (flags as fresh as the reconciler's
    // last pass: trials ending at the same moment may have taken their places already). Trial 0
    // held quota and ends: its GPUs go to one of them, so its successor keeps the queue as long.
    const waits = { phase: 'Pending', waitingForQuota: true } as const;
    const record = sweep({ parallelTrials: 4 }, [
      trial(0, 'Running'),
      ...[1, 2, 3].map((i) => trial(i, 'Pending', { waitingForQuota: true })),
    ]);
    const seen = runs([
      ['run-0', { phase: 'Succeeded', metrics: { accuracy: 0.9 } }],
      ['run-1', waits],
      ['run-2', waits],
      ['run-3', waits],
    ]);
    expect(step(record, seen, NOW, newTrial, false, new Set(['run-0'])).release.map((t) => t.index)).toEqual([
      4,
    ]);
    // Its end recorded already by another advance: the own advance still refills the slot ...
    const recorded = sweep({ parallelTrials: 4 }, [
      trial(0, 'Succeeded', { objective: 0.9 }),
      ...[1, 2, 3].map((i) => trial(i, 'Pending', { waitingForQuota: true })),
    ]);
    expect(
      step(recorded, seen, NOW, newTrial, false, new Set(['run-0'])).release.map((t) => t.index),
    ).toEqual([4]);
    // ... but only once: with its successor there, it takes no held slot's turn (the queue would grow).
    const refilled = sweep({ parallelTrials: 4 }, [...recorded.trials, trial(4, 'Queued')]);
    expect(step(refilled, seen, NOW, newTrial, false, new Set(['run-0'])).release).toEqual([]);
    // Any other advance still holds on that count: it cannot tell whose GPUs freed.
    expect(step(record, seen, NOW, newTrial, false).release).toEqual([]);
  });

  // Slots by succession: trial i + parallel follows trial i once it ended (parallel 3, budget 10).
  it.each<[string, Array<[number, Trial['phase']]>, number[]]>([
    ['a new sweep opens the slots', [], [0, 1, 2]],
    [
      'nothing ended: nothing to release',
      [
        [0, 'Running'],
        [1, 'Queued'],
        [2, 'Pending'],
      ],
      [],
    ],
    [
      'each ended trial frees its own successor',
      [
        [0, 'Succeeded'],
        [1, 'Running'],
        [2, 'Failed'],
      ],
      [3, 5],
    ],
    [
      'a Stopping trial still holds its slot',
      [
        [0, 'Stopping'],
        [1, 'EarlyStopped'],
        [2, 'Running'],
      ],
      [4],
    ],
    [
      'a successor already there is not released again',
      [
        [0, 'Succeeded'],
        [1, 'Running'],
        [2, 'Running'],
        [3, 'Running'],
      ],
      [],
    ],
    [
      'a missing index (a release cut off) is released again',
      [
        [0, 'Succeeded'],
        [1, 'Succeeded'],
        [2, 'Running'],
        [4, 'Running'],
      ],
      [3],
    ],
    [
      'never past the budget',
      [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map((i): [number, Trial['phase']] => [
        i,
        i < 8 ? 'Succeeded' : 'Running',
      ]),
      [],
    ],
  ])('%s', (_name, trials, expected) => {
    const all = trials.map(([i, phase]) => trial(i, phase));
    expect(releasable(all, 3, 10)).toEqual(expected);
    // At most `parallel` in flight once they are released.
    const open = all.filter((t) => !isTrialTerminal(t.phase)).length;
    expect(open + expected.length).toBeLessThanOrEqual(3);
  });

  it('stops at the grid size when the grid is smaller than maxTrials', () => {
    const record = sweep({ algorithm: { name: 'grid' }, parallelTrials: 8 });
    expect(step(record, runs([]), NOW, newTrial, false).release).toHaveLength(4);
  });
});

describe('ending a sweep', () => {
  it('fails once more trials failed than maxFailedTrials, and stops the rest', () => {
    const record = sweep({ maxFailedTrials: 1 }, [
      trial(0, 'Failed'),
      trial(1, 'Running'),
      trial(2, 'Running'),
    ]);
    const out = step(
      record,
      runs([['run-1', { phase: 'Failed', reason: 'TrainingFailed' }]]),
      NOW,
      newTrial,
      true,
    );
    expect(out.record.phase).toBe('Completing');
    expect(out.record.outcome).toMatchObject({ phase: 'Failed', reason: 'TooManyFailedTrials' });
    expect(out.release).toEqual([]);
    expect(out.stop.map((s) => [s.trial.index, s.reason])).toEqual([[2, 'SweepEnded']]);
  });

  it('succeeds early when a trial reaches the goal', () => {
    const record = sweep({ objective: { metric: 'loss', direction: 'minimize', goal: 0.2 } }, [
      trial(0, 'Running'),
      trial(1, 'Running'),
    ]);
    const out = step(
      record,
      runs([['run-0', { phase: 'Succeeded', metrics: { loss: 0.15 } }]]),
      NOW,
      newTrial,
      true,
    );
    expect(out.record.outcome).toMatchObject({ phase: 'Succeeded', reason: 'GoalReached' });
    expect(out.stop.map((s) => s.trial.index)).toEqual([1]);
  });

  it('a trial that succeeds without the objective metric counts as failed', () => {
    const record = sweep({}, [trial(0, 'Running')]);
    const out = step(
      record,
      runs([['run-0', { phase: 'Succeeded', metrics: { loss: 0.1 } }]]),
      NOW,
      newTrial,
      false,
    );
    expect(out.record.trials[0]).toMatchObject({ phase: 'Failed', reason: 'ObjectiveMissing' });
  });

  it('ends with TrialsExhausted once every trial ended, or NoSuccessfulTrial when none succeeded', () => {
    const done = sweep({ maxTrials: 2, parallelTrials: 2 }, [
      trial(0, 'Succeeded', { objective: 0.7 }),
      trial(1, 'Running'),
    ]);
    const out = step(
      done,
      runs([['run-1', { phase: 'Succeeded', metrics: { accuracy: 0.8 } }]]),
      NOW,
      newTrial,
      true,
    );
    expect(out.record.outcome).toMatchObject({ phase: 'Succeeded', reason: 'TrialsExhausted' });
    expect(out.record.best?.trialIndex).toBe(1);
    // Publishing the best is still to do.
    expect(readyToFinish(out.record)).toBe(false);
    expect(readyToFinish({ ...out.record, published: { runId: 'run-1', model: 'm', published: true } })).toBe(
      true,
    );

    const failed = sweep({ maxTrials: 1, parallelTrials: 1, maxFailedTrials: 1 }, [trial(0, 'Failed')]);
    expect(step(failed, runs([]), NOW, newTrial, true).record.outcome).toMatchObject({
      phase: 'Failed',
      reason: 'NoSuccessfulTrial',
    });
  });
});

describe('early stopping (median rule)', () => {
  const completed = (i: number, value: number) =>
    trial(i, 'Succeeded', {
      objective: value,
      curve: [
        [30, value * 0.8],
        [60, value * 0.95],
        [100, value],
      ],
    });

  it('stops a running trial that is worse than the median of completed ones at the same progress', () => {
    const record = sweep(
      { earlyStopping: { rule: 'median', minTrialsCompleted: 3, startAtPercent: 20 }, parallelTrials: 2 },
      [
        completed(0, 0.9),
        completed(1, 0.85),
        completed(2, 0.8),
        trial(3, 'Running', { curve: [[30, 0.2]] }),
        trial(4, 'Running', { curve: [[30, 0.8]] }),
      ],
    );
    const out = step(
      record,
      runs([['run-3', { phase: 'Running', percent: 40, metrics: { accuracy: 0.25 } }]]),
      NOW,
      newTrial,
      true,
    );
    expect(out.stop.map((s) => [s.trial.index, s.reason])).toEqual([[3, 'EarlyStopped']]);
    expect(out.record.trials[3]?.phase).toBe('Stopping');
    // A stopping trial still holds its slot until its run says Cancelled.
    expect(out.release).toEqual([]);
    const ended = step(
      out.record,
      runs([['run-3', { phase: 'Cancelled', reason: 'EarlyStopped' }]]),
      NOW,
      newTrial,
      true,
      new Set(['run-3']),
    );
    expect(ended.record.trials[3]?.phase).toBe('EarlyStopped');
    expect(ended.release.map((t) => t.index)).toEqual([5]);
  });

  it('a caller that cannot stop runs decides no early stop', () => {
    const record = sweep({ earlyStopping: { rule: 'median', minTrialsCompleted: 1, startAtPercent: 0 } }, [
      completed(0, 0.9),
      trial(1, 'Running', { curve: [[30, 0.1]] }),
    ]);
    const running = runs([['run-1', { phase: 'Running', percent: 30 }]]);
    expect(step(record, running, NOW, newTrial, false).stop).toEqual([]);
    expect(step(record, running, NOW, newTrial, true).stop).toHaveLength(1);
  });

  it('decides on the run as it is now: never once it reached 100 % or Publishing, nor unseen', () => {
    const record = sweep({ earlyStopping: { rule: 'median', minTrialsCompleted: 1, startAtPercent: 0 } }, [
      completed(0, 0.9),
      trial(1, 'Running', { curve: [[95, 0.1]] }),
    ]);
    // The stored curve says 95 %, the run says it reached its end: its result is kept.
    const at100 = runs([['run-1', { phase: 'Running', percent: 100, metrics: { accuracy: 0.1 } }]]);
    expect(step(record, at100, NOW, newTrial, true).stop).toEqual([]);
    const publishing = runs([['run-1', { phase: 'Publishing', percent: 100, metrics: { accuracy: 0.1 } }]]);
    expect(step(record, publishing, NOW, newTrial, true).stop).toEqual([]);
    // Not read in this advance (another trial's own advance): its stored curve decides nothing.
    expect(step(record, runs([]), NOW, newTrial, true).stop).toEqual([]);
    const at96 = runs([['run-1', { phase: 'Running', percent: 96, metrics: { accuracy: 0.1 } }]]);
    expect(step(record, at96, NOW, newTrial, true).stop).toHaveLength(1);
  });

  it('says which rule stopped the trial, each pruner in its own words', () => {
    const trials = [completed(0, 0.9), trial(1, 'Running', { curve: [[30, 0.1]] })];
    const running = runs([['run-1', { phase: 'Running', percent: 30, metrics: { accuracy: 0.1 } }]]);
    const median = step(
      sweep({ earlyStopping: { rule: 'median', minTrialsCompleted: 1, startAtPercent: 0 } }, trials),
      running,
      NOW,
      newTrial,
      true,
    );
    expect(median.stop[0]?.message).toMatch(/^stopped early by the median stopping rule at 30 % progress/);
    expect(median.record.trials[1]?.message).toBe(median.stop[0]?.message);
    expect(
      pruneMessage(
        { rule: 'asha', minResourcePercent: 10, reductionFactor: 3, minTrialsAtRung: 2 },
        'accuracy',
        11,
      ),
    ).toMatch(/^pruned by ASHA \(asynchronous successive halving\) at 11 % progress: .*top 1\/3/);
    expect(
      pruneMessage(
        { rule: 'hyperband', minResourcePercent: 10, reductionFactor: 3, minTrialsAtRung: 2 },
        'accuracy',
        33,
      ),
    ).toMatch(/^pruned by Hyperband at 33 % progress/);
    for (const rule of ['asha', 'hyperband'] as const)
      expect(
        pruneMessage(
          { rule, minResourcePercent: 10, reductionFactor: 3, minTrialsAtRung: 2 },
          'accuracy',
          11,
        ),
      ).not.toMatch(/median/);
  });
});
describe('early stopping (asha), wired', () => {
  it('stops a trial crossing a rung as the worst of the trials that reported there, in any phase', () => {
    // maximize accuracy: losses are -accuracy. Peers at the 10 % rung: 0.9 (running), 0.8 (stopped), 0.7 (running).
    const record = sweep({ earlyStopping: { rule: 'asha' }, parallelTrials: 4, maxTrials: 10 }, [
      trial(0, 'Running', { curve: [[12, 0.9]] }),
      trial(1, 'EarlyStopped', { curve: [[11, 0.8]] }),
      trial(2, 'Running', { curve: [[15, 0.7]] }),
      trial(3, 'Running', { curve: [[5, 0.1]] }),
      trial(4, 'Queued'),
    ]);
    const out = step(
      record,
      runs([
        ['run-0', { phase: 'Running', percent: 12, metrics: { accuracy: 0.9 } }],
        ['run-2', { phase: 'Running', percent: 15, metrics: { accuracy: 0.7 } }],
        ['run-3', { phase: 'Running', percent: 11, metrics: { accuracy: 0.2 } }],
      ]),
      NOW,
      newTrial,
      true,
    );
    expect(out.stop.map((s) => [s.trial.index, s.reason])).toEqual([
      [2, 'EarlyStopped'],
      [3, 'EarlyStopped'],
    ]);
    expect(out.stop.every((s) => s.message?.startsWith('pruned by ASHA'))).toBe(true);
  });
});

describe('usage', () => {
  it('sums the GPU-hours of ended trials and estimates what pruning saved', () => {
    const out = step(
      sweep({}, [trial(0, 'Running'), trial(1, 'Running')]),
      runs([
        ['run-0', { phase: 'Succeeded', metrics: { accuracy: 0.9 }, gpuHours: 2 }],
        ['run-1', { phase: 'Cancelled', reason: 'EarlyStopped', gpuHours: 0.5 }],
      ]),
      NOW,
      newTrial,
      true,
    );
    expect(out.record.trials.slice(0, 2).map((t) => t.gpuHours)).toEqual([2, 0.5]);
    // Trial 1 was stopped at 25 %: run on to 100 % it would have spent 3 × 0.5 more.
    const stopped = { ...(out.record.trials[1] as Trial), curve: [[25, 0.4]] as Array<[number, number]> };
    expect(sweepUsage([out.record.trials[0] as Trial, stopped])).toEqual({
      gpuHours: 2.5,
      trialsPruned: 1,
      gpuHoursSavedByPruning: 1.5,
    });
    expect(sweepUsage([])).toEqual({ gpuHours: 0, trialsPruned: 0, gpuHoursSavedByPruning: 0 });
  });
});
