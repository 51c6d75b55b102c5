import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';

/**
 * The Parzen estimator of TPE as Optuna 4.5 builds it (optuna/samplers/_tpe/parzen_estimator.py,
 * _ParzenEstimator with the TPESampler defaults prior_weight 1, consider_magic_clip, no
 * consider_endpoints): a mixture of product kernels, one per observation plus a prior kernel, over
 * the parameters given. With one parameter it is the univariate estimator; with several, the
 * multivariate (joint) one, whose kernels keep each observation's values together.
 */

/** A column of observations of one parameter, on the axis it is searched on. */
export type Column =
  | {
      kind: 'numeric';
      /** Values in [lo, hi]. */
      values: readonly number[];
      lo: number;
      hi: number;
      /** 0 for a continuous axis; the grid step of a discrete axis (1 on an integer's index axis). */
      step: number;
    }
  | { kind: 'categorical'; values: readonly number[]; choices: number };

/** One parameter's kernels, the prior's last. */
export type KernelDim =
  | {
      kind: 'numeric';
      lo: number;
      hi: number;
      step: number;
      mus: readonly number[];
      sigmas: readonly number[];
      /** Mass of each kernel inside [lo - step/2, hi + step/2], its truncation constant. */
      masses: readonly number[];
    }
  | { kind: 'categorical'; probs: readonly (readonly number[])[] };

export interface Mixture {
  /** Normalised kernel weights, the prior's last. */
  readonly weights: readonly number[];
  readonly dims: readonly KernelDim[];
}

/** Weight of the prior kernel against one observation (Optuna's prior_weight default). */
export const PRIOR_WEIGHT = 1;
/** Draws of a kernel before falling back to its mean; each succeeds with probability ≥ ~0.34. */
const MAX_REJECTIONS = 64;

/** Optuna's default_gamma: the good group is the best ⌈n/10⌉ trials, at most 25. */
export function defaultGamma(n: number): number {
  return Math.min(Math.ceil(0.1 * n), 25);
}

/**
 * Optuna's default_weights for n observations in trial order: all 1 below 25; from 25 on the
 * oldest n − 25 ramp from 1/n up to 1 (linspace(1/n, 1, n − 25)) and the newest 25 weigh 1.
 */
export function defaultWeights(n: number): number[] {
  if (n < 25) return new Array<number>(n).fill(1);
  const m = n - 25;
  const ramp = Array.from({ length: m }, (_, i) => (m === 1 ? 1 / n : 1 / n + ((1 - 1 / n) * i) / (m - 1)));
  return [...ramp, ...new Array<number>(25).fill(1)];
}

/**
 * The estimator of `columns` (all of the same length n, row i being observation i) with
 * observation weights `weights` (length n). `multivariate` selects Optuna's multivariate
 * bandwidth, the same for every kernel of a parameter: 0.2 · max(n, 1)^(−1/(d + 4)) · range with d
 * the number of columns; otherwise each kernel's bandwidth is the larger gap to its sorted
 * neighbours (prior mean included; the outermost use their single neighbour). Either is clipped to
 * [range / min(100, n + 2), range] (the "magic clip"), range being hi − lo + step.
 */
export function mixture(
  columns: readonly Column[],
  weights: readonly number[],
  multivariate: boolean,
): Mixture {
  const n = weights.length;
  for (const c of columns) if (c.values.length !== n) throw new RangeError('one value per observation');
  const raw = n === 0 ? [1] : [...weights, PRIOR_WEIGHT];
  const total = raw.reduce((s, w) => s + w, 0);
  return {
    weights: raw.map((w) => w / total),
    dims: columns.map((c) =>
      c.kind === 'categorical'
        ? categoricalKernels(c.values, c.choices)
        : numericKernels(c, multivariate ? columns.length : 0),
    ),
  };
}

function categoricalKernels(observed: readonly number[], choices: number): KernelDim {
  if (observed.length === 0)
    return { kind: 'categorical', probs: [new Array<number>(choices).fill(1 / choices)] };
  // Each kernel, the prior's included, carries prior_weight / n_kernels on every choice; an
  // observation's kernel adds 1 on its own: an unseen choice keeps a real chance in every kernel.
  const nKernels = observed.length + 1;
  const base = PRIOR_WEIGHT / nKernels;
  const rowSum = base * choices;
  const probs = observed.map((o) =>
    Array.from({ length: choices }, (_, j) => (base + (j === o ? 1 : 0)) / (rowSum + 1)),
  );
  probs.push(new Array<number>(choices).fill(1 / choices));
  return { kind: 'categorical', probs };
}

function numericKernels(c: Extract<Column, { kind: 'numeric' }>, multivariateD: number): KernelDim {
  const { lo, hi, step } = c;
  const range = hi - lo + step;
  const n = c.values.length;
  let sigmas: number[];
  const priorMu = 0.5 * (lo + hi);
  if (multivariateD > 0) {
    sigmas = new Array<number>(n).fill(0.2 * Math.max(n, 1) ** (-1 / (multivariateD + 4)) * range);
  } else {
    const withPrior = [...c.values, priorMu];
    const order = withPrior.map((_, i) => i).sort((a, b) => withPrior[a]! - withPrior[b]! || a - b);
    const sorted = [lo - step / 2, ...order.map((i) => withPrior[i]!), hi + step / 2];
    const sortedSigmas = order.map((_, k) =>
      Math.max(sorted[k + 1]! - sorted[k]!, sorted[k + 2]! - sorted[k + 1]!),
    );
    if (sorted.length >= 4) {
      sortedSigmas[0] = sorted[2]! - sorted[1]!;
      sortedSigmas[sortedSigmas.length - 1] = sorted[sorted.length - 2]! - sorted[sorted.length - 3]!;
    }
    sigmas = new Array<number>(n + 1);
    order.forEach((i, k) => {
      sigmas[i] = sortedSigmas[k]!;
    });
    sigmas = sigmas.slice(0, n);
  }
  const minSigma = range / Math.min(100, 1 + (n + 1));
  sigmas = sigmas.map((s) => Math.min(range, Math.max(minSigma, s)));
  const mus = [...c.values, priorMu];
  sigmas.push(range);
  const a = lo - step / 2;
  const b = hi + step / 2;
  const masses = mus.map((mu, i) => normalCdf((b - mu) / sigmas[i]!) - normalCdf((a - mu) / sigmas[i]!));
  return { kind: 'numeric', lo, hi, step, mus, sigmas, masses };
}

/** A draw: pick a kernel by weight, then draw every parameter from it (rejection inside the bounds). */
export function sampleMixture(m: Mixture, rng: RandomGenerator): number[] {
  const k = pickWeighted(rng, m.weights);
  return m.dims.map((d) => {
    if (d.kind === 'categorical') return pickWeighted(rng, d.probs[k]!);
    const mu = d.mus[k]!;
    const sigma = d.sigmas[k]!;
    const a = d.lo - d.step / 2;
    const b = d.hi + d.step / 2;
    let y = Math.min(b, Math.max(a, mu));
    for (let i = 0; i < MAX_REJECTIONS; i++) {
      const t = mu + sigma * standardNormal(rng);
      if (t >= a && t <= b) {
        y = t;
        break;
      }
    }
    if (d.step === 0) return y;
    return Math.min(d.hi, Math.max(d.lo, d.lo + Math.round((y - d.lo) / d.step) * d.step));
  });
}

/**
 * Log density (log probability for discrete and categorical parameters, whose kernel mass is
 * that of the bin [x − step/2, x + step/2]) of the point x, by log-sum-exp over kernels.
 */
export function logPdf(m: Mixture, x: readonly number[]): number {
  const terms = m.weights.map((w, k) => {
    let t = Math.log(w);
    m.dims.forEach((d, j) => {
      const v = x[j]!;
      if (d.kind === 'categorical') {
        t += Math.log(d.probs[k]![v]!);
        return;
      }
      const sigma = d.sigmas[k]!;
      const mu = d.mus[k]!;
      if (d.step === 0) {
        const z = (v - mu) / sigma;
        t += -Math.log(sigma) - LOG_SQRT_2PI - 0.5 * z * z - Math.log(d.masses[k]!);
      } else {
        const p = normalCdf((v + d.step / 2 - mu) / sigma) - normalCdf((v - d.step / 2 - mu) / sigma);
        t += Math.log(Math.max(p, Number.MIN_VALUE)) - Math.log(d.masses[k]!);
      }
    });
    return t;
  });
  const top = Math.max(...terms);
  return top + Math.log(terms.reduce((s, t) => s + Math.exp(t - top), 0));
}

export function pickWeighted(rng: RandomGenerator, weights: readonly number[]): number {
  let u = uniformFloat64(rng);
  for (let i = 0; i < weights.length - 1; i++) {
    u -= weights[i]!;
    if (u < 0) return i;
  }
  return weights.length - 1;
}

const LOG_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);

/** Box–Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
function standardNormal(rng: RandomGenerator): number {
  const u1 = 1 - uniformFloat64(rng);
  const u2 = uniformFloat64(rng);
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

export function normalCdf(z: number): number {
  return 0.5 * erfc(-z / Math.SQRT2);
}

/** Complementary error function, Chebyshev fit of Numerical Recipes (erfcc): relative error < 1.2e-7. */
function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const poly =
    -1.26551223 +
    t *
      (1.00002368 +
        t *
          (0.37409196 +
            t *
              (0.09678418 +
                t *
                  (-0.18628806 +
                    t *
                      (0.27886807 +
                        t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  const r = t * Math.exp(-z * z + poly);
  return x >= 0 ? r : 2 - r;
}
