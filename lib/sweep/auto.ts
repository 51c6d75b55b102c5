/**
 * The default algorithm, `auto`: chosen from the space and the budget when the sweep is created,
 * with the reason, which the sweep record keeps (`algorithmChoice`) and the sweep view shows.
 * The rules follow bench/sweep-vs-optuna.ts (bench/results/sweep-vs-optuna.md).
 */
import type { Algorithm } from './algorithms.ts';
import type { SweepRequest } from './schema.ts';
import { gridSize, type ParameterSpec } from './space.ts';

/** What choosing an algorithm reads of a sweep request. */
export interface AlgorithmRequest {
  algorithm?: SweepRequest['algorithm'] | undefined;
  maxTrials: number;
  /** Required for `auto`, which chooses from them. */
  parameters?: readonly ParameterSpec[] | undefined;
  warmStartFrom?: unknown;
}

export interface AlgorithmChoice {
  algorithm: Algorithm;
  /** The choice as a request's algorithm, its seed kept: what the sweep record stores in place of auto. */
  request: Exclude<SweepRequest['algorithm'], { name: 'auto' }>;
  reason: string;
}

/** The Gaussian process is chosen up to this many searched numeric parameters… */
export const AUTO_GP_MAX_DIMENSIONS = 10;
/** …and this many trials: it models at most GP_MAX_POINTS (100) of them, TPE all of them. */
export const AUTO_GP_MAX_TRIALS = 300;

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

/**
 * `auto`: grid when the space is finite and the whole grid fits in maxTrials (nothing to model:
 * every point gets tried once); a Gaussian process with expected improvement when every searched
 * parameter is numeric and there are at most 10 (the smooth, low-dimensional case where a joint
 * model beats TPE); otherwise multivariate TPE (categorical parameters, or many parameters: one
 * joint Parzen estimator keeps the interactions between parameters that univariate TPE loses).
 */
export function chooseAlgorithm(request: AlgorithmRequest): AlgorithmChoice {
  const seed = request.algorithm && 'seed' in request.algorithm ? (request.algorithm.seed ?? 0) : 0;
  if (!request.parameters) throw new RangeError('auto chooses from the parameters, and none were given');
  const params = request.parameters.filter(searched);
  const startupTrials = defaultStartupTrials(request.maxTrials);
  const categorical = params.filter((p) => p.type === 'categorical').length;
  const size = gridSize(request.parameters);
  if (
    size <= request.maxTrials &&
    request.warmStartFrom === undefined &&
    params.every((p) => p.type !== 'continuous')
  ) {
    return {
      algorithm: { name: 'grid' },
      request: { name: 'grid' },
      reason: `the space has ${size} points and maxTrials ${request.maxTrials} covers them all: grid tries each once`,
    };
  }
  const small = params.length >= 1 && params.length <= AUTO_GP_MAX_DIMENSIONS;
  if (categorical === 0 && small && request.maxTrials <= AUTO_GP_MAX_TRIALS) {
    return {
      algorithm: { name: 'gp', seed, startupTrials },
      request: { name: 'gp', seed },
      reason: `${params.length} numeric parameter${params.length === 1 ? '' : 's'} (≤ ${AUTO_GP_MAX_DIMENSIONS}), none categorical, maxTrials ≤ ${AUTO_GP_MAX_TRIALS}: a Gaussian process with expected improvement models them jointly`,
    };
  }
  return {
    algorithm: { name: 'tpe', seed, startupTrials, multivariate: true },
    request: { name: 'tpe', seed, estimator: 'multivariate' },
    reason:
      categorical > 0
        ? `${categorical} categorical of ${params.length} parameters: multivariate TPE models categorical and numeric parameters jointly`
        : small
          ? `maxTrials ${request.maxTrials} > ${AUTO_GP_MAX_TRIALS}: multivariate TPE uses every trial where a Gaussian process would model a subset`
          : `${params.length} parameters (> ${AUTO_GP_MAX_DIMENSIONS}): multivariate TPE scales where a Gaussian process does not`,
  };
}
