import { describe, expect, it } from 'vitest';
import { spreadFactor } from '../../../local/simulator/job-lifecycle.ts';

/** The simulator's per-job spread of the default training duration (SimulatorOptions.durationSpread). */
describe('duration spread', () => {
  const names = Array.from({ length: 500 }, (_, i) => `run-${i.toString(36).padStart(20, 'x')}`);

  it('is 1 without a spread', () => {
    expect(names.map((n) => spreadFactor(n, 0))).toEqual(names.map(() => 1));
  });

  it('stays within ± the spread, the same for one name, and covers the range', () => {
    const factors = names.map((n) => spreadFactor(n, 0.1));

    expect(Math.min(...factors)).toBeGreaterThanOrEqual(0.9);
    expect(Math.max(...factors)).toBeLessThanOrEqual(1.1);
    expect(names.map((n) => spreadFactor(n, 0.1))).toEqual(factors);
    // Spread over the range, not bunched: each fifth of it holds some of 500 names.
    const fifths = new Set(factors.map((f) => Math.min(4, Math.floor(((f - 0.9) / 0.2) * 5))));
    expect([...fifths].sort()).toEqual([0, 1, 2, 3, 4]);
  });
});
