import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type Column, defaultGamma, defaultWeights, logPdf, mixture } from '../../../lib/sweep/parzen.ts';

/**
 * lib/sweep/parzen.ts against Optuna 4.5.0's _ParzenEstimator (TPESampler defaults) on the same
 * observations: fixtures/optuna-parzen.json, written by fixtures/optuna-parzen.py.
 */
interface Case {
  name: string;
  multivariate: boolean;
  observations: Record<string, number[]>;
  estimator: { weights: number[]; dims: Array<{ mu: number[]; sigma: number[] } | { probs: number[][] }> };
  points: Array<Record<string, number>>;
  logPdf: number[];
}
const fixture = JSON.parse(
  readFileSync(new URL('./fixtures/optuna-parzen.json', import.meta.url), 'utf8'),
) as {
  optuna: string;
  gamma: Record<string, number>;
  weights: Record<string, number[]>;
  cases: Case[];
};

/** The parameters of each case, as Optuna's distributions in the fixture script. */
const AXES: Record<
  string,
  | { kind: 'numeric'; lo: number; hi: number; step: number; log?: boolean }
  | { kind: 'categorical'; choices: number }
> = {
  x: { kind: 'numeric', lo: 0, hi: 1, step: 0 },
  lr: { kind: 'numeric', lo: Math.log(1e-5), hi: Math.log(1e-1), step: 0, log: true },
  bs: { kind: 'numeric', lo: 16, hi: 128, step: 16 },
  o: { kind: 'categorical', choices: 3 },
};
const axisOf = (c: Case, name: string) =>
  c.name === 'linear-40' ? { kind: 'numeric' as const, lo: -2, hi: 3, step: 0 } : AXES[name]!;
const onAxis = (c: Case, name: string, v: number) =>
  'log' in axisOf(c, name) && (axisOf(c, name) as { log?: boolean }).log ? Math.log(v) : v;

function build(c: Case) {
  const names = Object.keys(c.observations);
  const columns: Column[] = names.map((name) => {
    const axis = axisOf(c, name);
    const values = c.observations[name]!.map((v) => onAxis(c, name, v));
    return axis.kind === 'categorical'
      ? { kind: 'categorical', values, choices: axis.choices }
      : { kind: 'numeric', values, lo: axis.lo, hi: axis.hi, step: axis.step };
  });
  const n = columns[0]!.values.length;
  return { names, m: mixture(columns, defaultWeights(n), c.multivariate) };
}

function closeAll(got: readonly number[], want: readonly number[], digits: number) {
  expect(got).toHaveLength(want.length);
  for (const [i, w] of want.entries()) expect(got[i]).toBeCloseTo(w, digits);
}

describe('the Parzen estimator, against Optuna 4.5.0 on the same data', () => {
  it('was computed by the Optuna the bench pins', () => {
    expect(fixture.optuna).toBe('4.5.0');
  });

  it('has Optuna’s γ schedule (⌈n/10⌉, at most 25) and weights (a ramp for the oldest from 25 on)', () => {
    for (const [n, g] of Object.entries(fixture.gamma)) expect(defaultGamma(Number(n))).toBe(g);
    for (const [n, w] of Object.entries(fixture.weights)) {
      const ours = defaultWeights(Number(n));
      expect(ours).toHaveLength(w.length);
      closeAll(ours, w, 12);
    }
  });

  for (const c of fixture.cases) {
    it(`${c.name}: the same kernel weights, means, bandwidths (magic clip) and categorical kernels`, () => {
      const { m } = build(c);
      expect(m.weights).toHaveLength(c.estimator.weights.length);
      closeAll(m.weights, c.estimator.weights, 12);
      c.estimator.dims.forEach((want, j) => {
        const got = m.dims[j]!;
        if ('probs' in want) {
          if (got.kind !== 'categorical') throw new Error('expected a categorical dimension');
          for (const [k, row] of want.probs.entries()) closeAll(got.probs[k]!, row, 12);
        } else {
          if (got.kind !== 'numeric') throw new Error('expected a numeric dimension');
          closeAll(got.mus, want.mu, 9);
          closeAll(got.sigmas, want.sigma, 9);
        }
      });
    });

    it(`${c.name}: the same log density at fixed points (to the erfc fit's 1e-6)`, () => {
      const { names, m } = build(c);
      c.points.forEach((p, i) => {
        const x = names.map((name) => onAxis(c, name, p[name]!));
        expect(Math.abs(logPdf(m, x) - c.logPdf[i]!)).toBeLessThan(1e-6);
      });
    });
  }
});
