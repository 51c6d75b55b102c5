import { describe, expect, it } from 'vitest';
import {
  askCma,
  type CmaState,
  defaultPopsize,
  initCma,
  jacobiEigen,
  tellCma,
} from '../../../lib/sweep/cmaes.ts';
import {
  type Algorithm,
  algorithmFor,
  type Observation,
  sampleRandom,
  suggest,
  trialRng,
} from '../../../lib/sweep/samplers.ts';
import type { Assignment, ParameterSpec } from '../../../lib/sweep/space.ts';

const OPTIMUM = [1, -2, 0.5, 3, -1];
const sphere = (x: readonly number[]) => x.reduce((s, v, i) => s + (v - OPTIMUM[i]!) ** 2, 0);

/** Plain ask/tell loop on the 5-D sphere; returns the best value after each generation. */
function runCma(seed: number, generations: number): { best: number[]; state: CmaState } {
  let state = initCma({ mean: [0, 0, 0, 0, 0], sigma: 2, bounds: OPTIMUM.map(() => [-5, 5] as const) });
  const best: number[] = [];
  let top = Number.POSITIVE_INFINITY;
  for (let g = 0; g < generations; g++) {
    const solutions = Array.from({ length: state.p.popsize }, (_, k) => {
      const x = askCma(state, trialRng(seed, g * state.p.popsize + k));
      return { x, value: sphere(x) };
    });
    for (const s of solutions) top = Math.min(top, s.value);
    best.push(top);
    state = tellCma(state, solutions);
  }
  return { best, state };
}

describe('CMA-ES (port of cmaes/_cma.py)', () => {
  it('has the reference default population and weights', () => {
    expect(defaultPopsize(5)).toBe(8); // 4 + ⌊3 ln 5⌋
    expect(defaultPopsize(1)).toBe(4);
    const { p } = initCma({ mean: [0, 0, 0, 0, 0], sigma: 1, bounds: OPTIMUM.map(() => [-5, 5] as const) });
    // Positive weights sum to 1, negative ones are scaled by min_alpha; ranks are ordered.
    expect(p.weights.slice(0, p.mu).reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
    expect(p.weights.slice(p.mu).every((w) => w <= 0)).toBe(true);
    for (let i = 1; i < p.weights.length; i++) expect(p.weights[i]!).toBeLessThan(p.weights[i - 1]!);
  });

  it('matches the reference implementation: three tells give the mean, σ, C and paths', () => {
    // Reference: cmaes 0.12.0, CMA(mean=[0.5]*3, sigma=1/6, bounds=[[0, 1]]*3), told the same three
    // generations of fixed solutions; printed _mean, _sigma, _C, _p_sigma, _pc.
    const target = [0.2, 0.7, 0.4];
    let state = initCma({ mean: [0.5, 0.5, 0.5], sigma: 1 / 6, bounds: target.map(() => [0, 1] as const) });
    expect(state.p.popsize).toBe(7);
    for (let g = 0; g < 3; g++) {
      const solutions = Array.from({ length: 7 }, (_, k) => {
        const x = target.map((_, j) => 0.5 + 0.3 * Math.sin(1.7 * (g * 7 + k) + 0.9 * j));
        return { x, value: x.reduce((s, v, j) => s + (v - target[j]!) ** 2, 0) };
      });
      state = tellCma(state, solutions);
    }
    const close = (actual: readonly number[], expected: readonly number[]) => {
      for (const [i, e] of expected.entries()) expect(actual[i]!).toBeCloseTo(e, 10);
    };
    close(state.mean, [0.265310210587281, 0.44149168947802436, 0.6619510913184488]);
    expect(state.sigma).toBeCloseTo(0.145343270484083, 10);
    close(state.C[0]!, [0.716279864446257, -0.12380054132244497, 0.037064826963504646]);
    close(state.C[1]!, [-0.123800541322445, 0.8902764866792571, 0.10269128112818193]);
    close(state.C[2]!, [0.03706482696350463, 0.10269128112818193, 0.9978590135804554]);
    close(state.pSigma, [-0.8278900281345074, -0.4242508072199814, 0.3004529665048793]);
    close(state.pc, [-0.6308578993656878, -0.4251237604204079, 0.10233556491362195]);
  });

  it('converges on a 5-D sphere: below 1e-8 within 100 generations (800 evaluations), every seed of 5', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const { best, state } = runCma(seed, 100);
      expect(best.at(-1)!).toBeLessThan(1e-8);
      // Step size shrinks with the distance to the optimum.
      expect(state.sigma).toBeLessThan(1e-3);
    }
  });

  it('is deterministic: the same seed gives the same trajectory', () => {
    expect(runCma(7, 20).best).toEqual(runCma(7, 20).best);
    expect(runCma(7, 20).best).not.toEqual(runCma(8, 20).best);
  });

  it('keeps every draw inside the bounds', () => {
    const state = initCma({ mean: [0.99, 0.01], sigma: 0.5, bounds: [[0, 1] as const, [0, 1] as const] });
    for (let i = 0; i < 200; i++) {
      const x = askCma(state, trialRng(3, i));
      expect(x.every((v) => v >= 0 && v <= 1)).toBe(true);
    }
  });

  it('eigen-decomposes a symmetric matrix (Jacobi): V·diag(λ)·Vᵀ = A', () => {
    const A = [
      [4, 1, 0.5],
      [1, 3, 0.2],
      [0.5, 0.2, 1],
    ];
    const { values, vectors } = jacobiEigen(A);
    for (let i = 0; i < 3; i++) {
      for (let j = 0; j < 3; j++) {
        let s = 0;
        for (let k = 0; k < 3; k++) s += vectors[i]![k]! * values[k]! * vectors[j]![k]!;
        expect(s).toBeCloseTo(A[i]![j]!, 10);
      }
    }
  });
});

const space5: ParameterSpec[] = OPTIMUM.map((_, i) => ({
  name: `x${i}`,
  type: 'continuous',
  min: -5,
  max: 5,
  scale: 'linear',
}));
const asVector = (a: Assignment) => space5.map((p) => a[p.name] as number);

function sweep(
  algorithm: Algorithm,
  params: readonly ParameterSpec[],
  trials: number,
  f: (a: Assignment) => number,
) {
  const history: Observation[] = [];
  for (let i = 0; i < trials; i++) {
    const assignment = suggest(algorithm, params, i, history);
    history.push({ assignment, loss: f(assignment) });
  }
  return history;
}

describe('the cmaes sampler (stateless replay over the sweep history)', () => {
  const cmaes = (seed: number): Algorithm => ({ name: 'cmaes', seed, startupTrials: 0 });

  it('finds the 5-D sphere optimum within 400 trials (< 1e-3) and beats random search 100-fold', () => {
    const f = (a: Assignment) => sphere(asVector(a));
    for (const seed of [1, 2, 3]) {
      const best = Math.min(...sweep(cmaes(seed), space5, 400, f).map((o) => o.loss));
      const random = Math.min(...sweep({ name: 'random', seed }, space5, 400, f).map((o) => o.loss));
      expect(best).toBeLessThan(1e-3);
      expect(best).toBeLessThan(random / 100);
    }
  });

  it('is deterministic in (seed, trial index, history)', () => {
    const f = (a: Assignment) => sphere(asVector(a));
    const a = sweep(cmaes(5), space5, 40, f);
    const b = sweep(cmaes(5), space5, 40, f);
    expect(a).toEqual(b);
  });

  it('draws distinct members of one generation for trials released side by side', () => {
    const history = sweep(cmaes(2), space5, 16, (a) => sphere(asVector(a)));
    const batch = [16, 17, 18, 19].map((i) => JSON.stringify(suggest(cmaes(2), space5, i, history)));
    expect(new Set(batch).size).toBe(4);
  });

  it('searches integers on their step grid and draws categoricals at random, all inside the space', () => {
    const params: ParameterSpec[] = [
      { name: 'lr', type: 'continuous', min: 1e-5, max: 1e-1, scale: 'log' },
      { name: 'bs', type: 'integer', min: 16, max: 256, step: 16 },
      { name: 'opt', type: 'categorical', values: ['adam', 'sgd', 'rmsprop'] },
      { name: 'drop', type: 'discrete', values: [0.1, 0.2, 0.3] },
    ];
    // Optimum: lr = 1e-3, bs = 64.
    const f = (a: Assignment) =>
      (Math.log10(a.lr as number) + 3) ** 2 + ((a.bs as number) / 16 - 4) ** 2 + (a.opt === 'sgd' ? 0.5 : 0);
    const history = sweep(cmaes(4), params, 120, f);
    for (const { assignment: a } of history) {
      expect(a.lr as number).toBeGreaterThanOrEqual(1e-5);
      expect(a.lr as number).toBeLessThanOrEqual(1e-1);
      expect(((a.bs as number) - 16) % 16).toBe(0);
      expect(a.bs as number).toBeLessThanOrEqual(256);
      expect(['adam', 'sgd', 'rmsprop']).toContain(a.opt);
      expect([0.1, 0.2, 0.3]).toContain(a.drop);
    }
    const late = history.slice(80).map((o) => o.assignment);
    // The numeric part has converged: bs = 64 and lr within a factor 2 of 1e-3 in over half the last 40 (random search: bs = 64 one time in 16).
    expect(late.filter((a) => a.bs === 64).length).toBeGreaterThan(20);
    expect(late.filter((a) => Math.abs(Math.log10(a.lr as number) + 3) < 0.3).length).toBeGreaterThan(20);
    // Categoricals stay random, as with Optuna's independent sampler: all three values keep appearing.
    expect(new Set(late.map((a) => a.opt)).size).toBe(3);
  });

  it('samples trials below startupTrials at random and leaves them out of its updates', () => {
    const algorithm: Algorithm = { name: 'cmaes', seed: 9, startupTrials: 3 };
    for (let i = 0; i < 3; i++) {
      expect(suggest(algorithm, space5, i, [])).toEqual(sampleRandom(space5, trialRng(9, i)));
    }
    // With 8 CMA-ES results plus the 3 startup ones, exactly one generation has been told: the
    // suggestion equals the one made from the 8 CMA-ES results alone.
    const f = (a: Assignment) => sphere(asVector(a));
    const startup = [0, 1, 2].map((i) => {
      const assignment = suggest(algorithm, space5, i, []);
      return { assignment, loss: f(assignment) };
    });
    const cma = Array.from({ length: 8 }, (_, k) => {
      const assignment = suggest(algorithm, space5, 3 + k, startup);
      return { assignment, loss: f(assignment) };
    });
    expect(suggest(algorithm, space5, 11, [...startup, ...cma])).toEqual(suggest(algorithm, space5, 11, cma));
  });

  it('algorithmFor fills the defaults of each sampler', () => {
    expect(algorithmFor({ algorithm: { name: 'cmaes', seed: 3 }, maxTrials: 50 })).toEqual({
      name: 'cmaes',
      seed: 3,
      startupTrials: 0,
    });
    expect(algorithmFor({ algorithm: { name: 'cmaes', seed: 3, popSize: 12 }, maxTrials: 50 })).toMatchObject(
      {
        popSize: 12,
      },
    );
    expect(algorithmFor({ algorithm: { name: 'tpe', seed: 1 }, maxTrials: 50 })).toEqual({
      name: 'tpe',
      seed: 1,
      startupTrials: 10,
    });
  });
});

describe('TPE with trials pending (constant liar)', () => {
  const params: ParameterSpec[] = [{ name: 'x', type: 'continuous', min: 0, max: 1, scale: 'linear' }];
  const tpe: Algorithm = { name: 'tpe', seed: 3, startupTrials: 5 };
  const history: Observation[] = Array.from({ length: 30 }, (_, i) => {
    const x = (i + 0.5) / 30;
    return { assignment: { x }, loss: (x - 0.2) ** 2 };
  });

  it('moves suggestions away from the points of trials still running', () => {
    const free = Array.from({ length: 40 }, (_, i) => suggest(tpe, params, 100 + i, history).x as number);
    const pending = Array.from({ length: 8 }, () => ({ x: 0.2 }));
    const lied = Array.from(
      { length: 40 },
      (_, i) => suggest(tpe, params, 100 + i, history, pending).x as number,
    );
    const near = (xs: number[]) => xs.filter((x) => Math.abs(x - 0.2) < 0.02).length;
    expect(near(lied)).toBeLessThan(near(free));
    // Without pending trials nothing changes: the argument defaults to none.
    expect(suggest(tpe, params, 100, history, [])).toEqual(suggest(tpe, params, 100, history));
  });
});

describe('trials stopped early in the history', () => {
  const params: ParameterSpec[] = [{ name: 'x', type: 'continuous', min: 0, max: 1, scale: 'linear' }];
  const completed: Observation[] = Array.from({ length: 20 }, (_, i) => {
    const x = (i + 0.5) / 20;
    return { assignment: { x }, loss: (x - 0.8) ** 2 };
  });
  // Stopped at 10 % near x = 0.2 with low intermediate values (early losses are not final ones).
  const stopped: Observation[] = Array.from({ length: 10 }, (_, i) => ({
    assignment: { x: 0.15 + i * 0.01 },
    loss: -1,
    stoppedAtPercent: 10,
  }));

  it('TPE ranks them after every completed trial: they never make a region look good', () => {
    const tpe: Algorithm = { name: 'tpe', seed: 5, startupTrials: 5 };
    const picks = Array.from(
      { length: 40 },
      (_, i) => suggest(tpe, params, 100 + i, [...completed, ...stopped]).x as number,
    );
    const nearGood = picks.filter((x) => Math.abs(x - 0.8) < 0.15).length;
    const nearStopped = picks.filter((x) => Math.abs(x - 0.2) < 0.1).length;
    expect(nearGood).toBeGreaterThan(nearStopped * 3);
    // Counted as completed trials instead, their low values would fill the good group and pull
    // TPE away from x ≈ 0.8 (with Optuna's γ the good group is only the best 3 of 30).
    const naive = stopped.map(({ assignment, loss }) => ({ assignment, loss }));
    const pulled = Array.from(
      { length: 40 },
      (_, i) => suggest(tpe, params, 100 + i, [...completed, ...naive]).x as number,
    );
    expect(pulled.filter((x) => Math.abs(x - 0.8) < 0.15).length).toBeLessThan(nearGood / 3);
  });

  it('CMA-ES leaves them out', () => {
    const cmaes: Algorithm = { name: 'cmaes', seed: 5, startupTrials: 0 };
    expect(suggest(cmaes, params, 30, [...completed, ...stopped])).toEqual(
      suggest(cmaes, params, 30, completed),
    );
  });
});
