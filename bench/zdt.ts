/**
 * ZDT test problems (Zitzler, Deb and Thiele 2000) for multi-objective sweeps: n parameters
 * x_i ∈ [0, 1], two objectives, both minimised, with a known Pareto front (g = 1, x_2…x_n = 0):
 * ZDT1 f2 = g·(1 − √(f1/g)) (convex front 1 − √f1), ZDT2 f2 = g·(1 − (f1/g)²) (concave front
 * 1 − f1²), g = 1 + 9·Σ_{i≥2} x_i / (n − 1). Used by bench/multi-objective.ts and its unit test.
 */

import type { Algorithm } from '../lib/sweep/algorithms.ts';
import { hypervolume } from '../lib/sweep/pareto.ts';
import type { Observation } from '../lib/sweep/samplers.ts';
import { suggest } from '../lib/sweep/samplers.ts';
import type { Assignment, ParameterSpec } from '../lib/sweep/space.ts';

export type Zdt = 'zdt1' | 'zdt2';

/**
 * The reference point of the hypervolume figures (both objectives minimised): f1 ≤ 1 always, and
 * f2 up to 6 keeps the points of sweeps of a few hundred trials (ZDT's usual (1.1, 1.1) suits tens
 * of thousands of evaluations: at this budget most sweeps score 0 against it).
 */
export const ZDT_REFERENCE = [1.1, 6] as const;

export function zdtSpace(n: number): ParameterSpec[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `x${i}`,
    type: 'continuous' as const,
    min: 0,
    max: 1,
    scale: 'linear' as const,
  }));
}

export function zdt(problem: Zdt, a: Assignment, n: number): [number, number] {
  const x = Array.from({ length: n }, (_, i) => Number(a[`x${i}`]));
  const f1 = x[0] as number;
  const g = 1 + (9 * x.slice(1).reduce((s, v) => s + v, 0)) / Math.max(1, n - 1);
  const r = f1 / g;
  const f2 = g * (problem === 'zdt1' ? 1 - Math.sqrt(r) : 1 - r * r);
  return [f1, f2];
}

/** The hypervolume of the front's exact Pareto set against ZDT_REFERENCE (its upper bound). */
export function zdtOptimalHypervolume(problem: Zdt): number {
  const points = Array.from({ length: 10_001 }, (_, i) => {
    const f1 = i / 10_000;
    return [f1, problem === 'zdt1' ? 1 - Math.sqrt(f1) : 1 - f1 * f1];
  });
  return hypervolume(points, ZDT_REFERENCE);
}

/**
 * A sweep on ZDT run through the sweep's sampler as the sweep loop calls it: `parallel` trials in
 * flight, each trial's successor drawn when it ends (trials end in release order). Returns every
 * trial's objectives.
 */
export function runZdt(
  problem: Zdt,
  algorithm: Algorithm,
  n: number,
  trials: number,
  parallel = 1,
): Array<[number, number]> {
  const space = zdtSpace(n);
  const history: Observation[] = [];
  const results: Array<[number, number]> = [];
  const running: Array<{ index: number; assignment: Assignment }> = [];
  let next = 0;
  while (results.length < trials) {
    while (running.length < parallel && next < trials) {
      const pending = running.map((r) => r.assignment);
      running.push({ index: next, assignment: suggest(algorithm, space, next, history, pending) });
      next++;
    }
    const done = running.shift() as { index: number; assignment: Assignment };
    const f = zdt(problem, done.assignment, n);
    results.push(f);
    history.push({ assignment: done.assignment, loss: f[0], losses: f });
  }
  return results;
}
