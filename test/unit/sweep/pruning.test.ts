import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AshaRule,
  type Curve,
  crc32,
  type HyperbandRule,
  hyperbandBracket,
  hyperbandBrackets,
  type PeerContext,
  promotable,
  rungs,
  rungValue,
  shouldPrune,
  shouldStopEarly,
} from '../../../lib/sweep/early-stopping.ts';

const asha: AshaRule = { rule: 'asha', minResourcePercent: 10, reductionFactor: 3, minTrialsAtRung: 3 };
const hyperband: HyperbandRule = { ...asha, rule: 'hyperband' };

/** A curve whose loss at every sample is `loss` (percents given). */
const flat = (loss: number, ...percents: number[]): Curve => percents.map((p) => [p, loss] as const);
const ctx = (trialIndex: number, ...curves: Curve[]): PeerContext => ({
  trialIndex,
  peers: curves.map((curve, i) => ({ index: 100 + i, curve })),
});

describe('rung positions', () => {
  it.each<[string, AshaRule, number, number[]]>([
    ['10 % × 3^k up to 100/3 %: a trial past 30 % runs to its end', asha, 0, [10, 30]],
    ['bracket 1 starts one rung later', asha, 1, [30]],
    ["bracket 2 of 3 has no rung (Hyperband's full-resource bracket)", asha, 2, []],
    [
      'η = 2 from 5 %: up to 50 %',
      { ...asha, minResourcePercent: 5, reductionFactor: 2 },
      0,
      [5, 10, 20, 40],
    ],
    ['a first rung past 100/η leaves none', { ...asha, minResourcePercent: 60, reductionFactor: 2 }, 0, []],
    ['a rung exactly at 100/η is kept', { ...asha, minResourcePercent: 25, reductionFactor: 2 }, 0, [25, 50]],
  ])('%s', (_name, rule, bracket, expected) => {
    expect(rungs(rule, bracket)).toEqual(expected);
  });

  it.each<[string, Curve, number, number | undefined]>([
    [
      'the first sample at or past the rung',
      [
        [5, 4],
        [12, 3],
        [20, 2],
      ],
      10,
      3,
    ],
    [
      'a sample exactly on the rung',
      [
        [10, 4],
        [12, 3],
      ],
      10,
      4,
    ],
    ['a finished trial that reported only its end', [[100, 0.5]], 30, 0.5],
    [
      'not reached yet',
      [
        [5, 4],
        [9, 3],
      ],
      10,
      undefined,
    ],
    ['no samples (a queued trial)', [], 10, undefined],
  ])('rung value: %s', (_name, curve, r, expected) => {
    expect(rungValue(curve, r)).toBe(expected);
  });
});

describe('promotion at a rung (top 1/η of the trials that reported there)', () => {
  it.each<[string, number, number[], boolean]>([
    ['too few reported (2 < minTrialsAtRung 3): promoted even if worst', 9, [1], true],
    ['best of 3: top ⌊3/3⌋ = 1', 1, [2, 3], true],
    ['second of 3: pruned', 2, [1, 3], false],
    ['tie with the best promotes', 1, [1, 3], true],
    ['second of 6: top ⌊6/3⌋ = 2', 2, [1, 3, 4, 5, 6], true],
    ['third of 6: pruned', 3, [1, 2, 4, 5, 6], false],
    ['NaN is never promoted', Number.NaN, [], false],
  ])('%s', (_name, value, others, expected) => {
    expect(promotable(value, others, asha)).toBe(expected);
  });
});

describe('ASHA decisions for a running trial', () => {
  // Three peers that reached 10 % with losses 1, 2, 3.
  const A = flat(1, 10, 30);
  const B = flat(2, 10);
  const C = flat(3, 12, 100);

  it.each<[string, Curve, PeerContext, boolean]>([
    ['below the first rung: nothing to decide', flat(9, 5), ctx(0, A, B, C), false],
    ['crossing 10 % as the worst of 4: stopped', flat(9, 5, 11), ctx(0, A, B, C), true],
    ['crossing 10 % as the best of 4: promoted', flat(0.5, 5, 11), ctx(0, A, B, C), false],
    ['second of 4 at 10 % is not in the top ⌊4/3⌋ = 1: stopped', flat(1.5, 11), ctx(0, A, B, C), true],
    ['with only one peer at the rung (2 < 3) the worst is promoted', flat(9, 11), ctx(0, A), false],
    [
      'a pending trial does not block a rung: queued peers (no samples) are not waited for',
      flat(9, 11),
      ctx(0, A, B, C, [], [], []),
      true,
    ],
    [
      'queued peers do not count: with two that reported and three queued, three values decide',
      flat(9, 11),
      ctx(0, A, B, [], [], []),
      true,
    ],
    ['peers still below the rung are not competitors', flat(9, 11), ctx(0, A, flat(0, 5), flat(0, 8)), false],
    [
      'a rung passed with an earlier sample is not decided again',
      [
        [11, 0.5],
        [20, 9],
      ],
      ctx(0, A, B, C),
      false,
    ],
    [
      'the next rung is decided when crossed (30 %: worst of A and three others)',
      [
        [11, 0.5],
        [31, 9],
      ],
      ctx(0, A, flat(1, 10, 30), flat(2, 10, 30)),
      true,
    ],
    [
      'one sample crossing two rungs is decided at both (best at 10 %, worst at 30 %)',
      [[31, 2]],
      ctx(0, flat(5, 10, 30), flat(6, 10, 30), [
        [10, 9],
        [30, 1],
      ]),
      true,
    ],
    [
      'its own earlier curve among the peers is ignored',
      flat(9, 11),
      { trialIndex: 7, peers: [{ index: 7, curve: flat(0, 11) }] },
      false,
    ],
  ])('%s', (_name, running, context, expected) => {
    expect(shouldPrune(running, context, asha)).toBe(expected);
  });

  it('shouldStopEarly dispatches on the rule and keeps the median rule when rule is median or absent', () => {
    const running = flat(9, 5, 11);
    const completed = [flat(1, 10, 100), flat(2, 10, 100), flat(3, 10, 100)];
    expect(shouldStopEarly(running, completed, asha, ctx(0, ...completed))).toBe(true);
    expect(shouldStopEarly(flat(0.5, 11), completed, asha, ctx(0, ...completed))).toBe(false);
    // Median rule: needs startAtPercent reached; the same curve at 11 % is worse than the median 2.
    expect(shouldStopEarly(running, completed, { minTrialsCompleted: 3, startAtPercent: 50 })).toBe(false);
    expect(
      shouldStopEarly(running, completed, { rule: 'median', minTrialsCompleted: 3, startAtPercent: 10 }),
    ).toBe(true);
  });

  it('without the peers (no context) asha and hyperband stop nothing, whatever the completed curves say', () => {
    const completed = [flat(1, 10, 100), flat(2, 10, 100), flat(3, 10, 100)];
    expect(shouldStopEarly(flat(9, 11), completed, asha, ctx(0, ...completed))).toBe(true);
    expect(shouldStopEarly(flat(9, 11), completed, asha)).toBe(false);
    expect(shouldStopEarly(flat(9, 11), completed, hyperband)).toBe(false);
  });
});

describe('Hyperband', () => {
  it('CRC-32 matches zlib (Python binascii.crc32)', () => {
    // binascii.crc32(b"123456789") == 0xCBF43926, the check value of CRC-32/ISO-HDLC.
    expect(crc32('123456789')).toBe(0xcbf43926);
    expect(crc32('')).toBe(0);
  });

  it.each<[string, HyperbandRule, number]>([
    ['10 % and η = 3: ⌊log₃ 10⌋ + 1 = 3 brackets', hyperband, 3],
    ['1 % and η = 3: ⌊log₃ 100⌋ + 1 = 5', { ...hyperband, minResourcePercent: 1 }, 5],
    ['50 % and η = 2: ⌊log₂ 2⌋ + 1 = 2', { ...hyperband, minResourcePercent: 50, reductionFactor: 2 }, 2],
  ])('bracket count: %s', (_name, rule, expected) => {
    expect(hyperbandBrackets(rule)).toBe(expected);
  });

  it('assigns trials to brackets by hash in the proportions ⌈n·η^s/(s+1)⌉ = 9 : 5 : 3', () => {
    const counts = [0, 0, 0];
    for (let i = 0; i < 17_000; i++) counts[hyperbandBracket(i, hyperband)]! += 1;
    expect(counts[0]! / 17_000).toBeCloseTo(9 / 17, 1);
    expect(counts[1]! / 17_000).toBeCloseTo(5 / 17, 1);
    expect(counts[2]! / 17_000).toBeCloseTo(3 / 17, 1);
    // Deterministic: the same index, the same bracket.
    expect(hyperbandBracket(42, hyperband)).toBe(hyperbandBracket(42, hyperband));
  });

  it('compares a trial only with the trials of its bracket, from that bracket’s first rung', () => {
    const indices = Array.from({ length: 200 }, (_, i) => i);
    const inBracket = (b: number) => indices.filter((i) => hyperbandBracket(i, hyperband) === b);
    const [t0, p0a, p0b, p0c] = inBracket(0) as [number, number, number, number];
    const [t1, p1a, p1b, p1c] = inBracket(1) as [number, number, number, number];
    const peersAt = (curve: Curve, ...idx: number[]) => idx.map((index) => ({ index, curve }));
    // Bracket 0: rung at 10 %. Worst of four at 11 % → stopped.
    const b0 = { trialIndex: t0, peers: peersAt(flat(1, 10), p0a, p0b, p0c) };
    expect(shouldPrune(flat(9, 11), b0, hyperband)).toBe(true);
    // Bracket 1's first rung is 30 %: the same crossing of 10 % decides nothing.
    const b1 = { trialIndex: t1, peers: peersAt(flat(1, 10, 30), p1a, p1b, p1c) };
    expect(shouldPrune(flat(9, 11), b1, hyperband)).toBe(false);
    expect(shouldPrune(flat(9, 31), b1, hyperband)).toBe(true);
    // Peers of another bracket are not competitors: bracket-0 peers do not make a bracket-1 trial stop.
    const mixed = { trialIndex: t1, peers: peersAt(flat(1, 10, 30), p0a, p0b, p0c) };
    expect(shouldPrune(flat(9, 31), mixed, hyperband)).toBe(false);
  });
});

describe('ASHA invariants (property-based)', () => {
  const sample = fc.tuple(
    fc.double({ min: 0, max: 99, noNaN: true }),
    fc.double({ min: -10, max: 10, noNaN: true }),
  );
  const curve = fc.array(sample, { maxLength: 6 }).map((xs) => [...xs].sort((a, b) => a[0] - b[0]) as Curve);
  const peers = fc.array(curve, { maxLength: 12 });

  it('queued trials (no samples yet) never change a decision: nothing waits for them', () => {
    fc.assert(
      fc.property(curve, peers, fc.integer({ min: 0, max: 8 }), (running, others, queued) => {
        const base = ctx(0, ...others);
        const withQueued = ctx(0, ...others, ...Array.from({ length: queued }, (): Curve => []));
        expect(shouldPrune(running, withQueued, asha)).toBe(shouldPrune(running, base, asha));
      }),
    );
  });

  it('the best value at a rung is never stopped', () => {
    fc.assert(
      fc.property(curve, peers, (running, others) => {
        const last = running.at(-1);
        fc.pre(last !== undefined);
        const best = -1000;
        const lowered: Curve = [...running.slice(0, -1), [last![0], best]];
        expect(shouldPrune(lowered, ctx(0, ...others), asha)).toBe(false);
      }),
    );
  });
});
