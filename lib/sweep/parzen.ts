import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';

/**
 * The adaptive Parzen estimator of TPE (Bergstra et al. 2011; hyperopt's adaptive_parzen_normal):
 * a mixture of Gaussians truncated to [lo, hi], one per observation plus a wide prior, on a
 * search axis (log for log-scale parameters, the index axis for integers).
 */
export interface Parzen {
  readonly lo: number;
  readonly hi: number;
  readonly mus: readonly number[];
  readonly sigmas: readonly number[];
  /** Normalised mixture weights. */
  readonly weights: readonly number[];
  /** Mass of each component inside [lo, hi], its truncation constant. */
  readonly masses: readonly number[];
}

/** Weight of the prior component against one observation (hyperopt's and Optuna's prior_weight). */
export const PRIOR_WEIGHT = 1;
/** Draws of a component before falling back to its mean; each succeeds with probability ≥ ~0.34. */
const MAX_REJECTIONS = 64;

/**
 * Each observation's bandwidth is the larger gap to its sorted neighbours (the prior's mean
 * included), clipped to [range / min(100, 1 + n), range]: crowded regions get sharp peaks, lone
 * points wide ones, and no bandwidth collapses to 0 on repeated values. Points must lie in [lo, hi].
 */
export function parzen(points: readonly number[], lo: number, hi: number): Parzen {
  const priorMu = (lo + hi) / 2;
  const priorSigma = hi - lo;
  const comps = [...points.map((mu) => ({ mu, prior: false })), { mu: priorMu, prior: true }].sort(
    (a, b) => a.mu - b.mu,
  );
  const minSigma = priorSigma / Math.min(100, 1 + comps.length);
  const sigmas = comps.map((c, i) => {
    if (c.prior) return priorSigma;
    const left = i > 0 ? c.mu - comps[i - 1]!.mu : 0;
    const right = i < comps.length - 1 ? comps[i + 1]!.mu - c.mu : 0;
    return Math.min(priorSigma, Math.max(minSigma, left, right));
  });
  const raw = comps.map((c) => (c.prior ? PRIOR_WEIGHT : 1));
  const total = raw.reduce((s, w) => s + w, 0);
  const mus = comps.map((c) => c.mu);
  return {
    lo,
    hi,
    mus,
    sigmas,
    weights: raw.map((w) => w / total),
    masses: mus.map((mu, i) => normalCdf((hi - mu) / sigmas[i]!) - normalCdf((lo - mu) / sigmas[i]!)),
  };
}

/** A draw from the truncated mixture: pick a component by weight, then rejection-sample it. */
export function sampleMixture(m: Parzen, rng: RandomGenerator): number {
  let u = uniformFloat64(rng);
  let k = m.weights.length - 1;
  for (let i = 0; i < m.weights.length - 1; i++) {
    u -= m.weights[i]!;
    if (u < 0) {
      k = i;
      break;
    }
  }
  const mu = m.mus[k]!;
  const sigma = m.sigmas[k]!;
  for (let i = 0; i < MAX_REJECTIONS; i++) {
    const y = mu + sigma * standardNormal(rng);
    if (y >= m.lo && y <= m.hi) return y;
  }
  return Math.min(m.hi, Math.max(m.lo, mu));
}

/** Log density of the truncated mixture at y, by log-sum-exp so far tails do not underflow to -∞. */
export function logDensity(m: Parzen, y: number): number {
  const terms = m.mus.map((mu, k) => {
    const sigma = m.sigmas[k]!;
    const z = (y - mu) / sigma;
    return Math.log(m.weights[k]! / m.masses[k]!) - Math.log(sigma) - LOG_SQRT_2PI - 0.5 * z * z;
  });
  const top = Math.max(...terms);
  return top + Math.log(terms.reduce((s, t) => s + Math.exp(t - top), 0));
}

/**
 * Log probability of the integer k, i.e. of its bin [k-½, k+½] (Optuna's discretisation of int
 * parameters): a density at k alone would misjudge sharp components narrower than a step.
 */
export function logBinMass(m: Parzen, k: number): number {
  let mass = 0;
  m.mus.forEach((mu, i) => {
    const sigma = m.sigmas[i]!;
    const a = Math.max(m.lo, k - 0.5);
    const b = Math.min(m.hi, k + 0.5);
    mass += (m.weights[i]! * (normalCdf((b - mu) / sigma) - normalCdf((a - mu) / sigma))) / m.masses[i]!;
  });
  return Math.log(Math.max(mass, Number.MIN_VALUE));
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
