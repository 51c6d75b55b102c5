import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import { xoroshiro128plusFromState } from 'pure-rand/generator/xoroshiro128plus';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import type { Algorithm } from './algorithms.ts';
import { type AlgorithmRequest, chooseAlgorithm, defaultStartupTrials } from './auto.ts';
import { askCma, type CmaState, defaultPopsize, initCma, tellCma } from './cmaes.ts';
import { sampleGp } from './gp.ts';
import { type MultiObservation, sampleNsga2 } from './nsga2.ts';
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
import { sampleTpe } from './tpe.ts';

export type { Algorithm } from './algorithms.ts';

/** A finished trial, its objective already oriented so that LOWER IS BETTER (the caller negates maximised metrics). */
export interface Observation {
  assignment: Assignment;
  loss: number;
  /**
   * Set for a trial stopped early: the progress it reached, `loss` being its last reported value.
   * TPE ranks such trials after every completed one, the furthest first, then by loss (Optuna's
   * TPESampler does the same with pruned trials), so they count as evidence of a bad region.
   * CMA-ES and the Gaussian process leave them out (Optuna's CmaEsSampler default,
   * consider_pruned_trials=False).
   */
  stoppedAtPercent?: number;
  /** A multi-objective sweep's trial: every objective, oriented (lower is better); `loss` is the first. */
  losses?: number[];
}

const DEFAULT_CANDIDATES = 24;
/** CMA-ES's `others: 'tpe'` draws at random until the history holds this many trials (Optuna TPE's n_startup_trials). */
const TPE_STARTUP_FOR_OTHERS = 10;

/**
 * The sampler a sweep request asks for, defaults filled: TPE's and GP's startupTrials is
 * defaultStartupTrials(maxTrials); CMA-ES starts at once (Optuna's CmaEsSampler, whose single
 * startup trial only seeds its search space, starts its first generation at the centre as well).
 * `auto` (the default) resolves to the algorithm chooseAlgorithm picks for the request.
 */
export function algorithmFor(request: AlgorithmRequest): Algorithm {
  const a = request.algorithm ?? { name: 'auto' as const };
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
        ...(a.others === 'tpe' ? { others: 'tpe' as const } : {}),
      };
    case 'tpe':
      return {
        name: 'tpe',
        seed: a.seed ?? 0,
        startupTrials: a.startupTrials ?? defaultStartupTrials(request.maxTrials),
        ...(a.estimator === 'multivariate' ? { multivariate: true } : {}),
      };
    case 'gp':
      return {
        name: 'gp',
        seed: a.seed ?? 0,
        startupTrials: a.startupTrials ?? defaultStartupTrials(request.maxTrials),
      };
    case 'nsga2':
      return {
        name: 'nsga2',
        seed: a.seed ?? 0,
        ...(a.popSize !== undefined ? { popSize: a.popSize } : {}),
        ...(a.crossover !== undefined ? { crossover: a.crossover } : {}),
        ...(a.crossoverProb !== undefined ? { crossoverProb: a.crossoverProb } : {}),
        ...(a.swappingProb !== undefined ? { swappingProb: a.swappingProb } : {}),
        ...(a.mutationProb !== undefined ? { mutationProb: a.mutationProb } : {}),
      };
    case 'auto':
      return chooseAlgorithm(request).algorithm;
  }
}

/**
 * The assignment of trial `trialIndex`. Deterministic in (algorithm, params, trialIndex, history,
 * pending): grid → gridPoint; random → depends on (seed, trialIndex) only; tpe and gp → random
 * while history.length < startupTrials (or the history is empty), then the model; cmaes → see
 * sampleCmaEs. Every value lies in the space.
 *
 * Batch-aware: trials released while others run get their own generator (per trial index), and
 * `pending` — the assignments of trials released but without a result — are taken by TPE as
 * certain failures (the constant liar of Optuna's `constant_liar=True`: pending points join the
 * bad group), so parallel TPE trials spread out instead of piling on the current best region; the
 * Gaussian process takes them at its predicted value (the kriging believer), with the same effect.
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
      return sampleTpe(
        params,
        rng,
        history,
        pending,
        {
          candidates: Math.max(1, Math.floor(algorithm.candidates ?? DEFAULT_CANDIDATES)),
          gamma: algorithm.gamma,
          multivariate: algorithm.multivariate === true,
        },
        sampleUniform,
      );
    }
    case 'gp': {
      const rng = trialRng(algorithm.seed, trialIndex);
      const complete = history.filter((o) => o.stoppedAtPercent === undefined && Number.isFinite(o.loss));
      if (complete.length < Math.max(2, algorithm.startupTrials)) return sampleRandom(params, rng);
      return sampleGp(params, rng, complete, pending, sampleUniform);
    }
    case 'cmaes':
      return sampleCmaEs(params, algorithm, trialIndex, history, pending);
    case 'nsga2': {
      const complete = history.flatMap((o): MultiObservation[] =>
        o.losses && o.stoppedAtPercent === undefined ? [{ assignment: o.assignment, losses: o.losses }] : [],
      );
      return sampleNsga2(params, algorithm, trialRng(algorithm.seed, trialIndex), complete, sampleUniform);
    }
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

export function sampleUniform(spec: ParameterSpec, rng: RandomGenerator): ParameterValue {
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

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

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
  pending: readonly Assignment[] = [],
): Assignment {
  const rng = trialRng(algorithm.seed, trialIndex);
  const coords = coordinates(params);
  if (trialIndex < algorithm.startupTrials) return sampleRandom(params, rng);
  const others = params.filter((spec) => !coords.some((c) => c.spec === spec));
  const tpeOthers =
    algorithm.others === 'tpe' && others.length > 0 && history.length >= TPE_STARTUP_FOR_OTHERS;
  const drawn = tpeOthers
    ? sampleTpe(
        others,
        rng,
        history,
        pending,
        { candidates: DEFAULT_CANDIDATES, multivariate: false },
        sampleUniform,
      )
    : undefined;
  if (coords.length === 0)
    return drawn ? { ...sampleRandom(params, rng), ...drawn } : sampleRandom(params, rng);
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
    assignment[spec.name] =
      k >= 0 ? coords[k]!.decode(x[k]!) : (drawn?.[spec.name] ?? sampleUniform(spec, rng));
  }
  return assignment;
}
