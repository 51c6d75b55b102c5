/**
 * The default algorithm, `auto`: chosen from the space and the budget when the sweep is created,
 * with the reason, which the sweep record keeps (`algorithmChoice`) and the sweep view shows.
 * The rules follow bench/sweep-vs-optuna.ts (bench/results/sweep-vs-optuna.md).
 */
import type { Algorithm } from './algorithms.ts';
import { defaultPopsize } from './cmaes.ts';
import type { SweepRequest } from './schema.ts';
import { gridSize, type ParameterSpec } from './space.ts';

/** What choosing an algorithm reads of a sweep request. */
export interface AlgorithmRequest {
  algorithm?: SweepRequest['algorithm'] | undefined;
  maxTrials: number;
  /** Required for `auto`, which chooses from them. */
  parameters?: readonly ParameterSpec[] | undefined;
  warmStartFrom?: unknown;
  /** A multi-objective sweep's objectives (2 or more: auto picks NSGA-II). */
  objectives?: readonly unknown[] | undefined;
}

export interface AlgorithmChoice {
  algorithm: Algorithm;
  /** The choice as a request's algorithm, its seed kept: what the sweep record stores in place of auto. */
  request: Exclude<SweepRequest['algorithm'], { name: 'auto' }>;
  reason: string;
}

/** The Gaussian process is chosen up to this many searched parameters… */
export const AUTO_GP_MAX_DIMENSIONS = 6;
/** …and this many trials: it models at most GP_MAX_POINTS (100) of them. */
export const AUTO_GP_MAX_TRIALS = 300;
/** CMA-ES is chosen when the budget holds at least this many of its generations. */
export const AUTO_CMAES_MIN_GENERATIONS = 4;

/** TPE's and the Gaussian process's default random start: max(2, min(10, ⌊maxTrials / 5⌋)). */
export function defaultStartupTrials(maxTrials: number): number {
  return Math.max(2, Math.min(10, Math.floor(maxTrials / 5)));
}

const searched = (p: ParameterSpec) =>
  p.type === 'continuous'
    ? p.max > p.min
    : p.type === 'integer'
      ? p.max - p.min >= p.step
      : p.values.length > 1;

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * `auto`, from bench/sweep-vs-optuna.ts's results (bench/results/sweep-vs-optuna.md):
 * - grid when no parameter is continuous and the whole grid fits in maxTrials: every point once;
 * - a Gaussian process with expected improvement for at most 6 parameters, none categorical, and
 *   at most 300 trials: the best of all samplers there, by far on smooth functions;
 * - CMA-ES for 2 or more continuous/integer parameters otherwise (more of them, or categorical ones
 *   beside them, whose values univariate TPE picks), when the budget holds 4 of its generations:
 *   on the 10-D and the mixed objectives it beat the GP and every TPE;
 * - otherwise univariate TPE, Optuna's default (few numeric parameters, or a budget too short).
 */
export function chooseAlgorithm(request: AlgorithmRequest): AlgorithmChoice {
  const seed = request.algorithm && 'seed' in request.algorithm ? (request.algorithm.seed ?? 0) : 0;
  if (!request.parameters) throw new RangeError('auto chooses from the parameters, and none were given');
  const params = request.parameters.filter(searched);
  const { maxTrials } = request;
  const startupTrials = defaultStartupTrials(maxTrials);
  const categorical = params.filter((p) => p.type === 'categorical').length;
  const numeric = params.filter((p) => p.type === 'continuous' || p.type === 'integer').length;
  const others = params.length - numeric;
  const size = gridSize(request.parameters);
  if (
    size <= maxTrials &&
    request.warmStartFrom === undefined &&
    params.every((p) => p.type !== 'continuous')
  ) {
    return {
      algorithm: { name: 'grid' },
      request: { name: 'grid' },
      reason: `the space has ${size} points and maxTrials ${maxTrials} covers them all: grid tries each once`,
    };
  }
  if ((request.objectives?.length ?? 0) >= 2) {
    const popSize = autoNsga2PopSize(maxTrials);
    return {
      algorithm: { name: 'nsga2', seed, popSize },
      request: { name: 'nsga2', seed, popSize },
      reason: `${request.objectives?.length} objectives: NSGA-II, ${popSize} trials per generation (about 10 generations in maxTrials ${maxTrials}, at most 50)`,
    };
  }
  if (
    categorical === 0 &&
    params.length >= 1 &&
    params.length <= AUTO_GP_MAX_DIMENSIONS &&
    maxTrials <= AUTO_GP_MAX_TRIALS
  ) {
    return {
      algorithm: { name: 'gp', seed, startupTrials },
      request: { name: 'gp', seed },
      reason: `${plural(params.length, 'parameter')} (≤ ${AUTO_GP_MAX_DIMENSIONS}), none categorical, maxTrials ≤ ${AUTO_GP_MAX_TRIALS}: a Gaussian process with expected improvement models them jointly`,
    };
  }
  const generations = Math.floor(maxTrials / defaultPopsize(Math.max(1, numeric)));
  if (numeric >= 2 && generations >= AUTO_CMAES_MIN_GENERATIONS) {
    const mixed = others > 0;
    return {
      algorithm: { name: 'cmaes', seed, startupTrials: 0, ...(mixed ? { others: 'tpe' as const } : {}) },
      request: { name: 'cmaes', seed, ...(mixed ? { others: 'tpe' as const } : {}) },
      reason:
        `${plural(numeric, 'numeric parameter')}${mixed ? ` and ${others} discrete or categorical (drawn by TPE)` : ''}, ` +
        `${generations} generations in maxTrials ${maxTrials}: CMA-ES${categorical > 0 ? ' (a Gaussian process does not take categorical parameters well)' : ` (more than ${AUTO_GP_MAX_DIMENSIONS} parameters, or more than ${AUTO_GP_MAX_TRIALS} trials, for a Gaussian process)`}`,
    };
  }
  return {
    algorithm: { name: 'tpe', seed, startupTrials },
    request: { name: 'tpe', seed },
    reason: `${plural(numeric, 'numeric parameter')} and ${others} discrete or categorical, maxTrials ${maxTrials}: TPE (too few numeric parameters or trials for CMA-ES)`,
  };
}

/**
 * NSGA-II's generation under auto: about 10 generations in the budget (maxTrials / 10), at least 8
 * and at most Optuna's 50 (bench/results/multi-objective.md: at 200–300 trials a generation of 20–30
 * beats 50).
 */
export function autoNsga2PopSize(maxTrials: number): number {
  return Math.max(8, Math.min(50, Math.floor(maxTrials / 10)));
}
