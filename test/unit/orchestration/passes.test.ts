import { describe, expect, it } from 'vitest';
import { runPasses } from '../../../lib/orchestration/passes.ts';
import type { TickReport } from '../../../lib/orchestration/reconcile.ts';

/** The reconciler's passes within one invocation, on a fake clock (each pass takes `passMs`). */
function play(opts: {
  everyMs: number;
  timeoutMs: number;
  passMs: number;
  abortAtMs?: number;
  /** Times (ms) at which a job changes: a wait that spans one ends there (`wake`). */
  changesAtMs?: number[];
  minGapMs?: number;
}) {
  let now = 0;
  const starts: number[] = [];
  const wokenFlags: boolean[] = [];
  const report = (answered: number): TickReport => ({
    jobs: 100,
    answered,
    failed: 0,
    heartbeats: 20,
    orphansDeleted: 0,
    cancelled: 0,
    recordsUpdated: 1,
    stalled: 0,
    sweeps: 0,
    errors: 0,
  });
  return runPasses({
    tick: async () => {
      starts.push(now);
      now += opts.passMs;
      return report(starts.length);
    },
    everyMs: opts.everyMs,
    remainingMs: () => opts.timeoutMs - now,
    now: () => now,
    sleep: async (ms) => {
      now += ms;
    },
    aborted: () => opts.abortAtMs !== undefined && now >= opts.abortAtMs,
    onPass: (_pass, _report, woken) => wokenFlags.push(woken),
    ...(opts.changesAtMs
      ? {
          wake: {
            // The watch starts from the last pass's LIST (its start): a change during the pass wakes at once.
            until: async (ms: number) => {
              const listedAt = starts.at(-1) ?? 0;
              const change = opts.changesAtMs?.find((t) => t > listedAt && t < now + ms);
              now = change === undefined ? now + ms : Math.max(now, change);
              return change === undefined ? 'period' : 'changed';
            },
            minGapMs: opts.minGapMs ?? 0,
          },
        }
      : {}),
  }).then((total) => ({ total, starts, wokenFlags }));
}

describe('reconciler passes within one invocation', () => {
  it.each([
    // everyMs, timeout, pass → pass start times
    [10_000, 55_000, 500, [0, 10_000, 20_000, 30_000, 40_000]], // the 6th would start at 50 s: no room
    [10_000, 55_000, 8_000, [0, 10_000, 20_000, 30_000]], // slow passes (8 s) leave room for fewer
    [0, 55_000, 500, [0]], // not configured: one pass
    [10_000, 55_000, 60_000, [0]], // a pass longer than the invocation: never a second one
  ])('every %i ms, timeout %i ms, passes of %i ms → starts %j', async (everyMs, timeoutMs, passMs, want) => {
    // Act
    const { starts, total } = await play({ everyMs, timeoutMs, passMs });

    // Assess
    expect(starts).toEqual(want);
    expect(total.passes).toBe(want.length);
    // Sums of the counts; jobs is the largest pass's
    expect(total.jobs).toBe(100);
    expect(total.heartbeats).toBe(20 * want.length);
    expect(total.answered).toBe((want.length * (want.length + 1)) / 2);
  });

  it('stops after the pass during which the invocation was aborted', async () => {
    // Act
    const { starts } = await play({ everyMs: 10_000, timeoutMs: 55_000, passMs: 500, abortAtMs: 15_000 });

    // Assess
    expect(starts).toEqual([0, 10_000]);
  });

  it.each([
    // changes at, min gap → pass start times
    [[3_000], 1_000, [0, 3_000, 13_000, 23_000, 33_000, 43_000]], // one change: a pass at once, then the period from there
    [[100], 1_000, [0, 1_000, 11_000, 21_000, 31_000, 41_000]], // a change right after a pass: no sooner than the gap
    [[3_000, 3_200, 3_400], 1_000, [0, 3_000, 4_000, 14_000, 24_000, 34_000, 44_000]], // a burst: passes a gap apart
    [[], 1_000, [0, 10_000, 20_000, 30_000, 40_000]], // nothing changes: the period, as without the watch
  ])('woken by changes at %j (gap %i ms) → starts %j', async (changesAtMs, minGapMs, want) => {
    // Act
    const { starts, total, wokenFlags } = await play({
      everyMs: 10_000,
      timeoutMs: 55_000,
      passMs: 500,
      changesAtMs,
      minGapMs,
    });

    // Assess
    expect(starts).toEqual(want);
    const onPeriod = starts.filter((t, i) => i > 0 && t - (starts[i - 1] ?? 0) === 10_000).length;
    expect(total.woken).toBe(want.length - 1 - onPeriod);
    // Each pass says what started it: the first and those a period apart the period, the rest a change.
    expect(wokenFlags).toEqual(starts.map((t, i) => i > 0 && t - (starts[i - 1] ?? 0) !== 10_000));
  });
});
