import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sampleUniform, trialRng } from '../../../lib/sweep/samplers.ts';
import type { Assignment, ParameterSpec } from '../../../lib/sweep/space.ts';
import { sampleTpe, type TpeObservation } from '../../../lib/sweep/tpe.ts';

/**
 * Gantry's univariate TPE against Optuna 4.5.0's TPESampler (its defaults) on the same history:
 * the distribution of the next suggestion, over 1,000 generators on each side
 * (fixtures/optuna-tpe-suggestions.json, written by fixtures/optuna-tpe-suggestions.py). This
 * covers what the estimator test (parzen.test.ts) does not: drawing the 24 candidates from l(x),
 * scoring them by l/g and keeping the best, per parameter, on log, integer, discrete and
 * categorical axes.
 */
interface Case {
  params: ParameterSpec[];
  history: TpeObservation[];
  suggestions: Assignment[];
}
const fixture = JSON.parse(
  readFileSync(new URL('./fixtures/optuna-tpe-suggestions.json', import.meta.url), 'utf8'),
) as { optuna: string; seeds: number; rosenbrock4: Case; mixed: Case };

/** Two-sample Kolmogorov–Smirnov distance. */
function ks(a: readonly number[], b: readonly number[]): number {
  const xs = [...a].sort((p, q) => p - q);
  const ys = [...b].sort((p, q) => p - q);
  let i = 0;
  let j = 0;
  let d = 0;
  while (i < xs.length && j < ys.length) {
    const v = Math.min(xs[i]!, ys[j]!);
    while (i < xs.length && xs[i]! <= v) i++;
    while (j < ys.length && ys[j]! <= v) j++;
    d = Math.max(d, Math.abs(i / xs.length - j / ys.length));
  }
  return d;
}

/** Total variation distance between the value frequencies of two samples. */
function tv(a: readonly unknown[], b: readonly unknown[]): number {
  const keys = new Set([...a, ...b].map(String));
  let d = 0;
  for (const k of keys)
    d += Math.abs(
      a.filter((v) => String(v) === k).length / a.length - b.filter((v) => String(v) === k).length / b.length,
    );
  return d / 2;
}

/** The largest distance over the parameters between Gantry's suggestions and Optuna's. */
function distance(c: Case, candidates: number): number {
  const ours = Array.from({ length: fixture.seeds }, (_, s) =>
    sampleTpe(c.params, trialRng(s, 1000), c.history, [], { candidates, multivariate: false }, sampleUniform),
  );
  return Math.max(
    ...c.params.map((p) => {
      const mine = ours.map((a) => a[p.name]);
      const theirs = c.suggestions.map((a) => a[p.name]);
      if (p.type !== 'continuous') return tv(mine, theirs);
      const axis = (v: unknown) => (p.scale === 'log' ? Math.log(v as number) : (v as number));
      return ks(mine.map(axis), theirs.map(axis));
    }),
  );
}

// KS at 1,000 + 1,000 draws: 0.073 is the 1 % critical value for two samples of one distribution.
const SAME = 0.075;

describe(`tpe: the next suggestion, as Optuna ${fixture.optuna}'s TPESampler draws it on the same history`, () => {
  it('matches on a 4-D continuous box', () => {
    expect(distance(fixture.rosenbrock4, 24)).toBeLessThan(SAME);
  });

  it('matches on a mixed space (log-scale, integer, discrete and categorical parameters)', () => {
    expect(distance(fixture.mixed, 24)).toBeLessThan(SAME);
  });

  it('tells a different candidate count apart (the comparison has power)', () => {
    expect(distance(fixture.rosenbrock4, 4)).toBeGreaterThan(2 * SAME);
  });
});
