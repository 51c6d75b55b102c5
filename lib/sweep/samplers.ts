import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { xoroshiro128plusFromState } from 'pure-rand/generator/xoroshiro128plus';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import { askCma, type CmaState, defaultPopsize, initCma, tellCma } from './cmaes.ts';
import { logBinMass, logDensity, PRIOR_WEIGHT, parzen, sampleMixture } from './parzen.ts';
import type { SweepRequest } from './schema.ts';
import {
  type Assignment,
  fromSearchAxis,
  gridPoint,
  integerCount,
  integerValue,
  type ParameterSpec,
  type ParameterValue,
  toSearchAxis,
} from './space.ts';

export type Algorithm =
  | { name: 'grid' }
  | { name: 'random'; seed: number }
  | {
      name: 'tpe';
      seed: number;
      /** Trials sampled at random before TPE takes over (history.length < startupTrials). */
      startupTrials: number;
      /** Draws from l(x) per parameter, of which the best l/g is kept; default 24. */
      candidates?: number;
      /** Fraction of the history, rounded up, taken as the good trials; default 0.25. */
      gamma?: number;
    }
  | {
      name: 'cmaes';
      seed: number;
      /** Trials with index < startupTrials are sampled at random and left out of CMA-ES's updates. */
      startupTrials: number;
      /** Trials per generation; default 4 + ⌊3 ln d⌋ (d: the numeric parameters searched). */
      popSize?: number;
    };

/** A finished trial, its objective already oriented so that LOWER IS BETTER (the caller negates maximised metrics). */
export interface Observation {
  assignment: Assignment;
  loss: number;
  /**
   * Set for a trial stopped early: the progress it reached, `loss` being its last reported value.
   * TPE ranks such trials after every completed one, the furthest first, then by loss (Optuna's
   * TPESampler does the same with pruned trials), so they count as evidence of a bad region.
   * CMA-ES leaves them out (Optuna's CmaEsSampler default, consider_pruned_trials=False).
   */
  stoppedAtPercent?: number;
}

const DEFAULT_CANDIDATES = 24;
const DEFAULT_GAMMA = 0.25;

/**
 * The sampler a sweep request asks for, defaults filled: TPE's startupTrials is
 * max(2, min(10, ⌊maxTrials / 5⌋)); CMA-ES starts at once (Optuna's CmaEsSampler, whose single
 * startup trial only seeds its search space, starts its first generation at the centre as well).
 */
export function algorithmFor(request: Pick<SweepRequest, 'algorithm' | 'maxTrials'>): Algorithm {
  const a = request.algorithm;
  switch (a.name) {
    case 'grid':
      return { name: 'grid' };
    case 'random':
      return { name: 'random', seed: a.seed ?? 0 };
    case 'cmaes':
      return {
        name: 'cmaes',
        seed: a.seed ?? 0,
        startupTrials: a.startupTrials ?? 0,
        ...(a.popSize !== undefined ? { popSize: a.popSize } : {}),
      };
    case 'tpe':
      return {
        name: 'tpe',
        seed: a.seed ?? 0,
        startupTrials: a.startupTrials ?? Math.max(2, Math.min(10, Math.floor(request.maxTrials / 5))),
      };
  }
}

/**
 * The assignment of trial `trialIndex`. Deterministic in (algorithm, params, trialIndex, history,
 * pending): grid → gridPoint; random → depends on (seed, trialIndex) only; tpe → random while
 * history.length < startupTrials (or the history is empty), then TPE; cmaes → see sampleCmaEs.
 * Every value lies in the space.
 *
 * Batch-aware: trials released while others run get their own generator (per trial index), and
 * `pending` — the assignments of trials released but without a result — are taken by TPE as
 * certain failures (the constant liar of Optuna's `constant_liar=True`: pending points join the
 * bad group), so parallel TPE trials spread out instead of piling on the current best region.
 * CMA-ES draws parallel trials as members of one generation's population.
 */
export function suggest(
  algorithm: Algorithm,
  params: readonly ParameterSpec[],
  trialIndex: number,
  history: readonly Observation[],
  pending: readonly Assignment[] = [],
): Assignment {
  switch (algorithm.name) {
    case 'grid':
      return gridPoint(params, trialIndex);
    case 'random':
      return sampleRandom(params, trialRng(algorithm.seed, trialIndex));
    case 'tpe': {
      const rng = trialRng(algorithm.seed, trialIndex);
      if (history.length === 0 || history.length < algorithm.startupTrials) return sampleRandom(params, rng);
      const gamma = algorithm.gamma ?? DEFAULT_GAMMA;
      const candidates = Math.max(1, Math.floor(algorithm.candidates ?? DEFAULT_CANDIDATES));
      return sampleTpe(params, rng, history, gamma, candidates, pending);
    }
    case 'cmaes':
      return sampleCmaEs(params, algorithm, trialIndex, history);
  }
}

// --- Per-trial generator --------------------------------------------------------------------------

const M64 = (1n << 64n) - 1n;
const GOLDEN = 0x9e3779b97f4a7c15n;

/** SplitMix64's output function: a bijection on 64 bits that spreads any input change over all bits. */
function splitmix64(x: bigint): bigint {
  let z = (x + GOLDEN) & M64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  return z ^ (z >> 31n);
}

const hi32 = (x: bigint) => Number(BigInt.asIntN(32, x >> 32n));
const lo32 = (x: bigint) => Number(BigInt.asIntN(32, x));

/**
 * The generator of one trial. Its 128-bit xoroshiro128+ state is hashed from (seed, trialIndex) —
 * key = splitmix64(splitmix64(seed) XOR trialIndex), state = (splitmix64(key), splitmix64(key + γ)),
 * the seeding Vigna recommends for xoroshiro — so trial i needs no knowledge of trials 0…i-1
 * (unlike stepping or jumping one shared stream), costs O(1), and neighbouring indices and seeds
 * give unrelated streams. For a fixed seed, distinct trial indices give distinct states.
 */
export function trialRng(seed: number, trialIndex: number): RandomGenerator {
  if (!Number.isSafeInteger(seed)) throw new RangeError(`seed ${seed} is not a safe integer`);
  if (!Number.isSafeInteger(trialIndex) || trialIndex < 0) {
    throw new RangeError(`trial index ${trialIndex} is not a non-negative safe integer`);
  }
  const key = splitmix64(splitmix64(BigInt.asUintN(64, BigInt(seed))) ^ BigInt(trialIndex));
  const s0 = splitmix64(key);
  const s1 = splitmix64((key + GOLDEN) & M64);
  return xoroshiro128plusFromState([hi32(s0), lo32(s0), hi32(s1), lo32(s1)]);
}

function pickIndex(rng: RandomGenerator, n: number, name: string): number {
  if (!(n >= 1)) throw new RangeError(`parameter ${name} has no values`);
  return uniformInt(rng, 0, n - 1);
}

// --- Random search --------------------------------------------------------------------------------

/** Uniform on each parameter's search axis (so log-uniform for scale 'log'), parameters in order. */
export function sampleRandom(params: readonly ParameterSpec[], rng: RandomGenerator): Assignment {
  const assignment: Assignment = {};
  for (const spec of params) assignment[spec.name] = sampleUniform(spec, rng);
  return assignment;
}

function sampleUniform(spec: ParameterSpec, rng: RandomGenerator): ParameterValue {
  switch (spec.type) {
    case 'continuous': {
      const lo = toSearchAxis(spec, spec.min);
      const hi = toSearchAxis(spec, spec.max);
      return fromSearchAxis(spec, lo + uniformFloat64(rng) * (hi - lo));
    }
    case 'integer':
      return integerValue(spec, pickIndex(rng, integerCount(spec), spec.name));
    case 'discrete':
    case 'categorical':
      return spec.values[pickIndex(rng, spec.values.length, spec.name)]!;
  }
}

// --- TPE ------------------------------------------------------------------------------------------

/**
 * Univariate TPE as hyperopt and Optuna do it by default: each parameter independently draws
 * `candidates` values from l (the good trials' estimator) and keeps the one maximising l/g.
 * Ties on loss keep history order, so the split is deterministic; NaN losses rank worst.
 */
function sampleTpe(
  params: readonly ParameterSpec[],
  rng: RandomGenerator,
  history: readonly Observation[],
  gamma: number,
  candidates: number,
  pending: readonly Assignment[] = [],
): Assignment {
  const ranked = history
    .map((o, i) => ({
      o,
      i,
      stopped: o.stoppedAtPercent === undefined ? Number.NEGATIVE_INFINITY : -o.stoppedAtPercent,
      loss: Number.isNaN(o.loss) ? Number.POSITIVE_INFINITY : o.loss,
    }))
    .sort((a, b) => a.stopped - b.stopped || a.loss - b.loss || a.i - b.i)
    .map(({ o }) => o);
  const nGood = Math.min(ranked.length, Math.max(1, Math.ceil(gamma * ranked.length) || 0));
  const good = ranked.slice(0, nGood).map((o) => o.assignment);
  const bad = [...ranked.slice(nGood).map((o) => o.assignment), ...pending];
  const assignment: Assignment = {};
  for (const spec of params) {
    const values = (group: Assignment[]) => group.map((a) => a[spec.name]);
    assignment[spec.name] = suggestOne(spec, values(good), values(bad), rng, candidates);
  }
  return assignment;
}

function suggestOne(
  spec: ParameterSpec,
  good: unknown[],
  bad: unknown[],
  rng: RandomGenerator,
  candidates: number,
): ParameterValue {
  switch (spec.type) {
    case 'continuous': {
      const lo = toSearchAxis(spec, spec.min);
      const hi = toSearchAxis(spec, spec.max);
      if (!(hi > lo)) return spec.min;
      // Observations outside the space (it may have been narrowed) or on a log axis ≤ 0 are dropped.
      const axis = (vs: unknown[]) =>
        numbers(vs)
          .filter((v) => spec.scale === 'linear' || v > 0)
          .map((v) => clamp(toSearchAxis(spec, v), lo, hi));
      const l = parzen(axis(good), lo, hi);
      const g = parzen(axis(bad), lo, hi);
      const y = best(
        candidates,
        () => sampleMixture(l, rng),
        (c) => logDensity(l, c) - logDensity(g, c),
      );
      return fromSearchAxis(spec, y);
    }
    case 'integer': {
      // On the index axis 0…n-1, each index owning the bin [k-½, k+½]: the step drops out.
      const n = integerCount(spec);
      if (n <= 1) return integerValue(spec, pickIndex(rng, n, spec.name));
      const axis = (vs: unknown[]) => numbers(vs).map((v) => clamp((v - spec.min) / spec.step, 0, n - 1));
      const l = parzen(axis(good), -0.5, n - 0.5);
      const g = parzen(axis(bad), -0.5, n - 0.5);
      const k = best(
        candidates,
        () => clamp(Math.round(sampleMixture(l, rng)), 0, n - 1),
        (c) => logBinMass(l, c) - logBinMass(g, c),
      );
      return integerValue(spec, k);
    }
    case 'discrete':
    case 'categorical': {
      const k = spec.values.length;
      if (k <= 1) return spec.values[pickIndex(rng, k, spec.name)]!;
      const l = smoothedCategorical(spec.values, good);
      const g = smoothedCategorical(spec.values, bad);
      const i = best(
        candidates,
        () => pickWeighted(rng, l),
        (c) => Math.log(l[c]!) - Math.log(g[c]!),
      );
      return spec.values[i]!;
    }
  }
}

function best<T>(n: number, draw: () => T, score: (c: T) => number): T {
  let chosen = draw();
  let top = score(chosen);
  for (let i = 1; i < n; i++) {
    const c = draw();
    const s = score(c);
    if (s > top) [chosen, top] = [c, s];
  }
  return chosen;
}

const numbers = (vs: unknown[]) => vs.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

/** Prior weight spread evenly over the values plus one per observation: no value's probability is 0. */
function smoothedCategorical(values: readonly ParameterValue[], observed: unknown[]): number[] {
  const weights = values.map(() => PRIOR_WEIGHT / values.length);
  for (const v of observed) {
    const i = values.indexOf(v as ParameterValue);
    if (i >= 0) weights[i]! += 1;
  }
  const total = weights.reduce((s, w) => s + w, 0);
  return weights.map((w) => w / total);
}

function pickWeighted(rng: RandomGenerator, weights: readonly number[]): number {
  let u = uniformFloat64(rng);
  for (let i = 0; i < weights.length - 1; i++) {
    u -= weights[i]!;
    if (u < 0) return i;
  }
  return weights.length - 1;
}

// --- CMA-ES ---------------------------------------------------------------------------------------

/** The numeric parameters CMA-ES searches, each mapped onto [0, 1]. */
interface Coordinate {
  spec: ParameterSpec;
  encode: (v: ParameterValue | undefined) => number | undefined;
  decode: (u: number) => ParameterValue;
}

function coordinates(params: readonly ParameterSpec[]): Coordinate[] {
  const out: Coordinate[] = [];
  for (const spec of params) {
    if (spec.type === 'continuous') {
      const lo = toSearchAxis(spec, spec.min);
      const hi = toSearchAxis(spec, spec.max);
      if (!(hi > lo)) continue;
      out.push({
        spec,
        encode: (v) =>
          typeof v === 'number' && Number.isFinite(v) && (spec.scale === 'linear' || v > 0)
            ? clamp((toSearchAxis(spec, v) - lo) / (hi - lo), 0, 1)
            : undefined,
        decode: (u) => fromSearchAxis(spec, lo + u * (hi - lo)),
      });
    } else if (spec.type === 'integer') {
      // Index k owns [k/n, (k+1)/n): Optuna's half-step widening of int bounds, scaled to [0, 1].
      const n = integerCount(spec);
      if (n <= 1) continue;
      out.push({
        spec,
        encode: (v) =>
          typeof v === 'number' && Number.isFinite(v)
            ? (clamp(Math.round((v - spec.min) / spec.step), 0, n - 1) + 0.5) / n
            : undefined,
        decode: (u) => integerValue(spec, clamp(Math.floor(u * n), 0, n - 1)),
      });
    }
  }
  return out;
}

/**
 * CMA-ES over the numeric parameters (lib/sweep/cmaes.ts, a port of the `cmaes` package that
 * Optuna's CmaEsSampler drives), set up as Optuna does: every continuous axis (its log for scale
 * 'log') and every integer's index axis mapped onto [0, 1], mean 0.5, σ₀ = 1/6, the bounds
 * [0, 1]. Discrete and categorical parameters, which have no order CMA-ES could use, are drawn
 * at random, as Optuna's CmaEsSampler hands them to its independent (random) sampler.
 *
 * Stateless: the optimizer is rebuilt at each call by telling it the history in order, popSize
 * observations per generation (trials left out of the history — failed or stopped — are skipped,
 * as Optuna only tells complete trials), then trial `trialIndex` is drawn from the current
 * distribution with its own generator. Trials running side by side thus draw distinct members of
 * one generation. Trials below startupTrials are random and their results are not told.
 */
export function sampleCmaEs(
  params: readonly ParameterSpec[],
  algorithm: Extract<Algorithm, { name: 'cmaes' }>,
  trialIndex: number,
  history: readonly Observation[],
): Assignment {
  const rng = trialRng(algorithm.seed, trialIndex);
  const coords = coordinates(params);
  if (trialIndex < algorithm.startupTrials || coords.length === 0) return sampleRandom(params, rng);
  const startup = new Set<string>();
  for (let i = 0; i < algorithm.startupTrials; i++) {
    startup.add(JSON.stringify(sampleRandom(params, trialRng(algorithm.seed, i))));
  }
  const solutions: Array<{ x: number[]; value: number }> = [];
  for (const o of history) {
    if (o.stoppedAtPercent !== undefined) continue;
    if (startup.size > 0 && startup.has(JSON.stringify(o.assignment))) continue;
    const x = coords.map((c) => c.encode(o.assignment[c.spec.name]));
    if (x.some((v) => v === undefined)) continue;
    solutions.push({ x: x as number[], value: Number.isNaN(o.loss) ? Number.POSITIVE_INFINITY : o.loss });
  }
  let state: CmaState = initCma({
    mean: coords.map(() => 0.5),
    sigma: 1 / 6,
    bounds: coords.map(() => [0, 1] as const),
    popsize: algorithm.popSize ?? defaultPopsize(coords.length),
  });
  for (let g = 0; (g + 1) * state.p.popsize <= solutions.length; g++) {
    state = tellCma(state, solutions.slice(g * state.p.popsize, (g + 1) * state.p.popsize));
  }
  const x = askCma(state, rng);
  const assignment: Assignment = {};
  for (const spec of params) {
    const k = coords.findIndex((c) => c.spec === spec);
    assignment[spec.name] = k >= 0 ? coords[k]!.decode(x[k]!) : sampleUniform(spec, rng);
  }
  return assignment;
}
