import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import type { Algorithm } from './algorithms.ts';
import { dominates, eliteIndices } from './pareto.ts';
import {
  type Assignment,
  fromSearchAxis,
  integerCount,
  type ParameterSpec,
  type ParameterValue,
  toSearchAxis,
} from './space.ts';

/**
 * NSGA-II suggestions for multi-objective sweeps, set up as Optuna 4.5's NSGAIISampler
 * (optuna/samplers/nsgaii): a first generation of `popSize` random trials; after that each trial is
 * a child of the parent population — the elite of the completed trials by non-dominated sorting,
 * the last front that does not fit cut by crowding distance. With probability `crossoverProb` two
 * parents, each the winner of a binary tournament (of two random members, the first if it
 * dominates the second, else the second), are crossed: uniform crossover (each parameter from
 * either parent with probability `swappingProb`) or simulated binary crossover (SBX, η = 20 as
 * Optuna for several objectives) on the numeric parameters, categorical ones always uniform; a
 * child outside the space is drawn again. Otherwise one random parent is copied. Then each
 * parameter is mutated — drawn at random — with probability `mutationProb` (default 1/d).
 *
 * Stateless and deterministic in the history: generations are counted in completed trials
 * (generation g: completed trials g·popSize … (g+1)·popSize − 1), so the parent population changes
 * once every `popSize` completed trials and is, as Optuna's, the elite of the previous generation
 * and its parents; trial `trialIndex` draws with its own generator, so trials running side by side
 * are distinct children of the same parents.
 */

export type Nsga2 = Extract<Algorithm, { name: 'nsga2' }>;

/** Optuna's NSGAIISampler defaults. */
export const NSGA2_DEFAULTS = {
  popSize: 50,
  crossoverProb: 0.9,
  swappingProb: 0.5,
  sbxEta: 20,
} as const;

/** A completed trial as NSGA-II reads it: its losses (lower is better in each). */
export interface MultiObservation {
  assignment: Assignment;
  losses: readonly number[];
}

const MAX_CROSSOVER_TRIES = 100;

const searched = (p: ParameterSpec) =>
  p.type === 'continuous' ? p.max > p.min : p.type === 'integer' ? integerCount(p) > 1 : p.values.length > 1;

/** A numeric parameter's transformed axis, as Optuna's _SearchSpaceTransform (int: ±0.5 around the ends). */
function axis(
  spec: ParameterSpec,
): { lo: number; hi: number; to: (v: number) => number; from: (u: number) => ParameterValue } | undefined {
  if (spec.type === 'continuous') {
    return {
      lo: toSearchAxis(spec, spec.min),
      hi: toSearchAxis(spec, spec.max),
      to: (v) => toSearchAxis(spec, v),
      from: (u) => fromSearchAxis(spec, u),
    };
  }
  if (spec.type === 'integer') {
    const n = integerCount(spec);
    return {
      lo: -0.5,
      hi: n - 0.5,
      to: (v) => (v - spec.min) / spec.step,
      from: (u) => spec.min + spec.step * Math.min(n - 1, Math.max(0, Math.round(u))),
    };
  }
  return undefined;
}

function tournament(rng: RandomGenerator, population: readonly MultiObservation[]): MultiObservation {
  const a = population[uniformInt(rng, 0, population.length - 1)] as MultiObservation;
  const b = population[uniformInt(rng, 0, population.length - 1)] as MultiObservation;
  return dominates(a.losses, b.losses) ? a : b;
}

/** SBX on one coordinate pair, both children (Optuna's SBXCrossover, eq. 3–5 of Deb and Agrawal). */
function sbx(
  rng: RandomGenerator,
  x1: number,
  x2: number,
  lo: number,
  hi: number,
  eta: number,
): [number, number] {
  const xmin = Math.min(x1, x2);
  const xmax = Math.max(x1, x2);
  const diff = Math.max(xmax - xmin, 1e-10);
  const beta1 = 1 + (2 * (xmin - lo)) / diff;
  const beta2 = 1 + (2 * (hi - xmax)) / diff;
  const alpha1 = 2 - beta1 ** -(eta + 1);
  const alpha2 = 2 - beta2 ** -(eta + 1);
  const u = uniformFloat64(rng);
  const bq = (alpha: number) =>
    u > 1 / alpha ? (1 / (2 - u * alpha)) ** (1 / (eta + 1)) : (u * alpha) ** (1 / (eta + 1));
  return [0.5 * (xmin + xmax - bq(alpha1) * diff), 0.5 * (xmin + xmax + bq(alpha2) * diff)];
}

function crossover(
  rng: RandomGenerator,
  algorithm: Nsga2,
  params: readonly ParameterSpec[],
  parents: readonly MultiObservation[],
): Assignment {
  const swapping = algorithm.swappingProb ?? NSGA2_DEFAULTS.swappingProb;
  for (let attempt = 0; ; attempt++) {
    const p0 = tournament(rng, parents);
    const rest = parents.length > 1 ? parents.filter((p) => p !== p0) : parents;
    const p1 = tournament(rng, rest);
    const child: Assignment = {};
    let inside = true;
    // SBX builds two children and keeps one at random (Optuna keeps child 1 when rand < 0.5).
    const second: Assignment = {};
    for (const spec of params) {
      const a = p0.assignment[spec.name] as ParameterValue;
      const b = p1.assignment[spec.name] as ParameterValue;
      const ax = axis(spec);
      if (algorithm.crossover === 'sbx' && ax && typeof a === 'number' && typeof b === 'number') {
        const x1 = ax.to(a);
        const x2 = ax.to(b);
        let c1: number;
        let c2: number;
        if (uniformFloat64(rng) < 0.5) {
          [c1, c2] = sbx(rng, x1, x2, ax.lo, ax.hi, NSGA2_DEFAULTS.sbxEta);
        } else {
          [c1, c2] = [x1, x2];
        }
        if (uniformFloat64(rng) < 0.5) [c1, c2] = [c2, c1];
        if (!(c1 >= ax.lo && c1 <= ax.hi && c2 >= ax.lo && c2 <= ax.hi)) inside = false;
        const clip = (u: number) => Math.min(ax.hi, Math.max(ax.lo, u));
        child[spec.name] = ax.from(clip(c1));
        second[spec.name] = ax.from(clip(c2));
      } else {
        const pick = uniformFloat64(rng) >= swapping ? b : a;
        child[spec.name] = pick;
        second[spec.name] = pick;
      }
    }
    if (inside || attempt >= MAX_CROSSOVER_TRIES) return uniformFloat64(rng) < 0.5 ? child : second;
  }
}

/**
 * Trial `trialIndex`'s assignment. `history` holds the completed trials in order; `rng` is the
 * trial's own generator; `draw` draws one parameter at random (the random sampler's rule).
 */
export function sampleNsga2(
  params: readonly ParameterSpec[],
  algorithm: Nsga2,
  rng: RandomGenerator,
  history: readonly MultiObservation[],
  draw: (spec: ParameterSpec, rng: RandomGenerator) => ParameterValue,
): Assignment {
  const random = () => Object.fromEntries(params.map((p) => [p.name, draw(p, rng)])) as Assignment;
  const popSize = algorithm.popSize ?? NSGA2_DEFAULTS.popSize;
  const complete = history.filter((o) => o.losses.length > 0 && o.losses.every(Number.isFinite));
  if (complete.length < popSize) return random();
  // Optuna's recursion: the parents of generation g are the elite of generation g − 1 and its
  // parents (each step sorts at most 2 × popSize trials, however long the sweep).
  let parents: MultiObservation[] = [];
  for (let g = 0; (g + 1) * popSize <= complete.length; g++) {
    const pool = [...complete.slice(g * popSize, (g + 1) * popSize), ...parents];
    parents = eliteIndices(
      pool.map((o) => o.losses),
      popSize,
    ).map((i) => pool[i] as MultiObservation);
  }
  const space = params.filter(searched);
  const child =
    uniformFloat64(rng) < (algorithm.crossoverProb ?? NSGA2_DEFAULTS.crossoverProb)
      ? crossover(rng, algorithm, space, parents)
      : { ...(parents[uniformInt(rng, 0, parents.length - 1)] as MultiObservation).assignment };
  const mutation = algorithm.mutationProb ?? 1 / Math.max(1, space.length);
  const out: Assignment = {};
  for (const spec of params) {
    const keep = searched(spec) && spec.name in child && uniformFloat64(rng) >= mutation;
    out[spec.name] = keep ? (child[spec.name] as ParameterValue) : draw(spec, rng);
  }
  return out;
}
