import { describe, expect, it } from 'vitest';
import { type Curve, type MedianRule, median, shouldStopEarly } from '../../../lib/sweep/early-stopping.ts';

// Losses are binary fractions so the hand-computed averages and medians are exact.
// Running averages up to 50%: A (1 + 0.5)/2 = 0.75, B (1.5 + 1)/2 = 1.25, C (0.5 + 0.25)/2 = 0.375 → median 0.75.
// Up to 10%: A 1, B 1.5, C 0.5 → median 1.
const A: Curve = [
  [10, 1],
  [50, 0.5],
  [100, 0.25],
];
const B: Curve = [
  [10, 1.5],
  [50, 1],
  [100, 0.5],
];
const C: Curve = [
  [10, 0.5],
  [50, 0.25],
  [100, 0.125],
];
/** Average 2 up to 50%: with A, B, C the median becomes (0.75 + 1.25)/2 = 1. */
const D: Curve = [
  [10, 2],
  [50, 2],
  [100, 2],
];
/** No sample at or before 50%: does not count at 50%. Counted, it would lower the median to (0.375 + 0.75)/2. */
const E: Curve = [
  [60, 0.125],
  [100, 0.125],
];

const rule: MedianRule = { minTrialsCompleted: 3, startAtPercent: 10 };

describe('shouldStopEarly (median rule)', () => {
  it.each<[string, Curve, Curve[], MedianRule, boolean]>([
    [
      'best 0.875 worse than median 0.75 → stop',
      [
        [10, 1],
        [50, 0.875],
      ],
      [A, B, C],
      rule,
      true,
    ],
    [
      'best 0.5 better than median 0.75 → continue',
      [
        [10, 1],
        [50, 0.5],
      ],
      [A, B, C],
      rule,
      false,
    ],
    [
      'best so far, not the latest: 0.5 at 10% then 1 at 50%',
      [
        [10, 0.5],
        [50, 1],
      ],
      [A, B, C],
      rule,
      false,
    ],
    [
      'tie with the median (0.75) → continue',
      [
        [10, 0.75],
        [50, 1],
      ],
      [A, B, C],
      rule,
      false,
    ],
    [
      'even count: median of 4 is the mean of the middle two (1)',
      [
        [10, 1],
        [50, 0.875],
      ],
      [A, B, C, D],
      rule,
      false,
    ],
    ['at 10%, the averages use samples up to 10% only (median 1)', [[10, 1.25]], [A, B, C], rule, true],
    [
      'too few completed trials',
      [
        [10, 1],
        [50, 0.875],
      ],
      [A, B],
      rule,
      false,
    ],
    ['before startAtPercent', [[10, 1.25]], [A, B, C], { minTrialsCompleted: 3, startAtPercent: 20 }, false],
    ['empty running curve', [], [A, B, C], rule, false],
    [
      'no completed trials, even with minTrialsCompleted 0',
      [[50, 9]],
      [],
      { minTrialsCompleted: 0, startAtPercent: 0 },
      false,
    ],
    [
      'a completed curve without samples up to p does not count towards the minimum',
      [
        [10, 1],
        [50, 0.875],
      ],
      [A, B, E],
      rule,
      false,
    ],
    [
      '…nor towards the median: 0.625 vs median 0.75 of A, B, C',
      [
        [10, 1],
        [50, 0.625],
      ],
      [A, B, C, E],
      rule,
      false,
    ],
  ])('%s', (_, running, completed, r, expected) => {
    // Act
    const stop = shouldStopEarly(running, completed, r);

    // Assess
    expect(stop).toBe(expected);
  });

  it('median of odd and even counts', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
  });
});
