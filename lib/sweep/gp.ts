/**
 * Bayesian optimisation with a Gaussian process and expected improvement, for spaces where a
 * smooth joint model of the objective pays (few parameters, mostly numeric). Every parameter maps
 * onto [0, 1] (continuous on its search axis, integers and discrete values on their index axis,
 * categorical values one-hot); the GP has a Matérn-5/2 kernel with one length scale per feature,
 * a signal variance and a noise variance (trials' results are noisy), fitted by maximising the
 * marginal likelihood (several starts, then a coordinate search on the logs) with a log-normal
 * prior on the length scales (mean √2 + ½ ln D, sd √3, the dimension-scaled prior of Hvarfner et
 * al. 2024) and one pulling the noise towards small. The losses are modelled standardised, or as
 * the log of their distance above the best when that explains them better (fitOutputs). The next
 * trial maximises log EI over random points, perturbations of the best trials, and a local search
 * around the best candidates.
 *
 * Stateless and deterministic like the other samplers: the model is refitted from the history at
 * each call, draws come from the trial's generator. Pending trials (running in parallel) join the
 * data at the model's predicted value (the kriging believer), so parallel trials spread out.
 */
import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import { standardNormal } from './cmaes.ts';
import { normalCdf } from './parzen.ts';
import {
  type Assignment,
  fromSearchAxis,
  integerCount,
  integerValue,
  type ParameterSpec,
  type ParameterValue,
  toSearchAxis,
} from './space.ts';

/**
 * At most this many trials (the best half, then the most recent) are modelled: a fit costs
 * O(n³) per likelihood evaluation, and 100 keeps a suggestion well under the sweep's per-trial
 * budget (../shared/BUDGETS.md: orchestration overhead ≤ 1 s per trial).
 */
export const GP_MAX_POINTS = 100;
const RANDOM_CANDIDATES = 512;
const LOCAL_CANDIDATES = 24;

interface Feature {
  spec: ParameterSpec;
  width: number;
  encode: (v: unknown) => number[] | undefined;
  decode: (u: readonly number[]) => ParameterValue;
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));
const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function featureOf(spec: ParameterSpec): Feature | undefined {
  switch (spec.type) {
    case 'continuous': {
      const lo = toSearchAxis(spec, spec.min);
      const hi = toSearchAxis(spec, spec.max);
      if (!(hi > lo)) return undefined;
      return {
        spec,
        width: 1,
        encode: (v) =>
          finite(v) && (spec.scale === 'linear' || v > 0)
            ? [clamp01((toSearchAxis(spec, v) - lo) / (hi - lo))]
            : undefined,
        decode: ([u]) => fromSearchAxis(spec, lo + clamp01(u!) * (hi - lo)),
      };
    }
    case 'integer': {
      const n = integerCount(spec);
      if (n <= 1) return undefined;
      return {
        spec,
        width: 1,
        encode: (v) => (finite(v) ? [clamp01(Math.round((v - spec.min) / spec.step) / (n - 1))] : undefined),
        decode: ([u]) => integerValue(spec, Math.round(clamp01(u!) * (n - 1))),
      };
    }
    case 'discrete': {
      const n = spec.values.length;
      if (n <= 1) return undefined;
      return {
        spec,
        width: 1,
        encode: (v) => {
          const i = spec.values.indexOf(v as number);
          return i >= 0 ? [i / (n - 1)] : undefined;
        },
        decode: ([u]) => spec.values[Math.round(clamp01(u!) * (n - 1))]!,
      };
    }
    case 'categorical': {
      const n = spec.values.length;
      if (n <= 1) return undefined;
      return {
        spec,
        width: n,
        encode: (v) => {
          const i = spec.values.indexOf(v as string);
          return i >= 0 ? spec.values.map((_, j) => (j === i ? 1 : 0)) : undefined;
        },
        decode: (u) => spec.values[u.indexOf(Math.max(...u))]!,
      };
    }
  }
}

/** The encoding of a whole assignment, or undefined if the space no longer holds one of its values. */
function encoder(features: readonly Feature[]) {
  const encode = (a: Assignment): number[] | undefined => {
    const out: number[] = [];
    for (const f of features) {
      const e = f.encode(a[f.spec.name]);
      if (!e) return undefined;
      out.push(...e);
    }
    return out;
  };
  const decode = (u: readonly number[]): Assignment => {
    const a: Assignment = {};
    let k = 0;
    for (const f of features) {
      a[f.spec.name] = f.decode(u.slice(k, k + f.width));
      k += f.width;
    }
    return a;
  };
  /** Onto the nearest point of the space (rounded integers, one-hot categories). */
  const snap = (u: readonly number[]) => encode(decode(u)) as number[];
  return { encode, decode, snap };
}

// --- The Gaussian process ----------------------------------------------------------------------------

interface Hyper {
  logLengths: number[];
  logSignal: number;
  logNoise: number;
}

export interface Model {
  X: number[][];
  L: number[][];
  alpha: number[];
  h: Hyper;
  lengths: number[];
  signal: number;
}

function kernel(
  a: readonly number[],
  b: readonly number[],
  lengths: readonly number[],
  signal: number,
): number {
  let r2 = 0;
  for (let i = 0; i < a.length; i++) {
    const d = (a[i]! - b[i]!) / lengths[i]!;
    r2 += d * d;
  }
  const r = Math.sqrt(5 * r2);
  return signal * (1 + r + (r * r) / 3) * Math.exp(-r);
}

/** Cholesky factor of a symmetric positive definite matrix, or undefined if it is not. */
function cholesky(A: number[][]): number[][] | undefined {
  const n = A.length;
  const L = A.map(() => new Array<number>(n).fill(0));
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let s = A[i]![j]!;
      const Li = L[i]!;
      const Lj = L[j]!;
      for (let k = 0; k < j; k++) s -= Li[k]! * Lj[k]!;
      if (i === j) {
        if (!(s > 0)) return undefined;
        Li[i] = Math.sqrt(s);
      } else Li[j] = s / Lj[j]!;
    }
  }
  return L;
}

/** L⁻¹b */
function forward(L: number[][], b: readonly number[]): number[] {
  const x = new Array<number>(b.length);
  for (let i = 0; i < b.length; i++) {
    let s = b[i]!;
    const Li = L[i]!;
    for (let k = 0; k < i; k++) s -= Li[k]! * x[k]!;
    x[i] = s / Li[i]!;
  }
  return x;
}

/** L⁻ᵀb */
function backward(L: number[][], b: readonly number[]): number[] {
  const n = b.length;
  const x = new Array<number>(n);
  for (let i = n - 1; i >= 0; i--) {
    let s = b[i]!;
    for (let k = i + 1; k < n; k++) s -= L[k]![i]! * x[k]!;
    x[i] = s / L[i]![i]!;
  }
  return x;
}

function factor(X: number[][], y: readonly number[], h: Hyper): Model | undefined {
  const lengths = h.logLengths.map(Math.exp);
  const signal = Math.exp(h.logSignal);
  const noise = Math.exp(h.logNoise);
  const K = X.map((a, i) => X.map((b, j) => kernel(a, b, lengths, signal) + (i === j ? noise + 1e-9 : 0)));
  const L = cholesky(K);
  if (!L) return undefined;
  return { X, L, alpha: backward(L, forward(L, y)), h, lengths, signal };
}

const LOG_2PI = Math.log(2 * Math.PI);
const SQRT2 = Math.SQRT2;
const SQRT3 = Math.sqrt(3);
const NOISE_PRIOR_MEAN = Math.log(1e-3);

/** Log marginal likelihood plus the log priors, up to constants. */
function objective(X: number[][], y: readonly number[], h: Hyper): number {
  const m = factor(X, y, h);
  if (!m) return Number.NEGATIVE_INFINITY;
  let logDet = 0;
  for (let i = 0; i < y.length; i++) logDet += Math.log(m.L[i]![i]!);
  const fit = -0.5 * y.reduce((s, v, i) => s + v * m.alpha[i]!, 0) - logDet - 0.5 * y.length * LOG_2PI;
  const mu = SQRT2 + 0.5 * Math.log(h.logLengths.length);
  const prior = h.logLengths.reduce((s, l) => s - 0.5 * ((l - mu) / SQRT3) ** 2, 0);
  // A weak pull of the signal variance towards 1 (the outputs are standardised), and of the noise
  // towards small (≈ 1e-3 of it; BoTorch's Gamma(1.1, 0.05) prior has its mode there too), so
  // structure the kernel can explain is not written off as noise.
  return fit + prior - 0.5 * (h.logSignal / 2) ** 2 - 0.5 * ((h.logNoise - NOISE_PRIOR_MEAN) / 2) ** 2;
}

const BOUNDS = {
  length: [Math.log(0.01), Math.log(30)],
  signal: [Math.log(0.05), Math.log(20)],
  noise: [Math.log(1e-6), Math.log(1)],
};

/** Coordinate search over the log hyperparameters, the step halving when no move improves. */
function fitGp(X: number[][], y: readonly number[], dims: number): Model {
  // Several starts (short and long length scales, little and much noise); the best one is refined.
  let h: Hyper = { logLengths: [], logSignal: 0, logNoise: 0 };
  let best = Number.NEGATIVE_INFINITY;
  for (const length of [0.1, 0.3, 1, 3]) {
    for (const noise of [1e-4, 1e-2, 0.1]) {
      const c = {
        logLengths: new Array<number>(dims).fill(Math.log(length)),
        logSignal: 0,
        logNoise: Math.log(noise),
      };
      const v = objective(X, y, c);
      if (v > best) [h, best] = [c, v];
    }
  }
  const coords = dims + 2;
  const get = (x: Hyper, i: number) => (i < dims ? x.logLengths[i]! : i === dims ? x.logSignal : x.logNoise);
  const set = (x: Hyper, i: number, v: number): Hyper => {
    const [lo, hi] = i < dims ? BOUNDS.length : i === dims ? BOUNDS.signal : BOUNDS.noise;
    const c = Math.min(hi!, Math.max(lo!, v));
    if (i < dims) return { ...x, logLengths: x.logLengths.map((l, j) => (j === i ? c : l)) };
    return i === dims ? { ...x, logSignal: c } : { ...x, logNoise: c };
  };
  for (const step of [1.5, 0.7, 0.3, 0.12]) {
    for (let pass = 0; pass < 2; pass++) {
      let moved = false;
      for (let i = 0; i < coords; i++) {
        for (const dir of [1, -1]) {
          const c = set(h, i, get(h, i) + dir * step);
          const v = objective(X, y, c);
          if (v > best + 1e-9) [h, best, moved] = [c, v, true];
        }
      }
      if (!moved) break;
    }
  }
  return factor(X, y, h) ?? (factor(X, y, { ...h, logNoise: Math.log(0.1) }) as Model);
}

function predict(m: Model, x: readonly number[]): { mean: number; sd: number } {
  const k = m.X.map((xi) => kernel(x, xi, m.lengths, m.signal));
  const mean = k.reduce((s, v, i) => s + v * m.alpha[i]!, 0);
  const v = forward(m.L, k);
  const variance = m.signal - v.reduce((s, t) => s + t * t, 0);
  return { mean, sd: Math.sqrt(Math.max(variance, 1e-12)) };
}

/** log EI for minimisation below `best`, stable far in the tail (zΦ(z) + φ(z) ≈ φ(z)/z² there). */
function logEi(mean: number, sd: number, best: number): number {
  const z = (best - mean) / sd;
  const logPhi = -0.5 * z * z - 0.5 * LOG_2PI;
  if (z > -6) {
    const ei = z * normalCdf(z) + Math.exp(logPhi);
    return Math.log(sd) + Math.log(Math.max(ei, 1e-300));
  }
  return Math.log(sd) + logPhi - 2 * Math.log(-z);
}

/**
 * Losses standardised (mean 0, sd 1), then capped at +2.5: a diverged trial 1000× worse than the
 * rest would otherwise stretch the scale and flatten the model where the good trials are. (Tried
 * on Branin, Hartmann-6 and a 3-parameter log/integer space: the cap leaves the results as plain
 * standardisation's; a normal-score (rank) transform and a log warp did worse on all three.)
 */
export function standardise(losses: readonly number[]): number[] {
  const mean = losses.reduce((s, x) => s + x, 0) / losses.length;
  const sd = Math.sqrt(losses.reduce((s, x) => s + (x - mean) ** 2, 0) / losses.length) || 1;
  return losses.map((x) => Math.min((x - mean) / sd, OUTLIER_CAP));
}

const OUTLIER_CAP = 2.5;

/**
 * The model of the losses as they are (standardised) or of their logarithm above the best,
 * log(loss − min + δ) with δ a tenth of the way from the best to the median, whichever explains
 * the losses better: the higher marginal likelihood counted on the losses' own scale (the log
 * Jacobian of each transform added, the Box–Cox way of comparing them). On objectives whose
 * values span orders of magnitude (a curved valley such as Rosenbrock's) standardising leaves the
 * good trials indistinguishable from one another, the log tells them apart; on a bowl such as a
 * sphere the plain model wins the comparison and is kept.
 */
export function fitOutputs(
  X: number[][],
  losses: readonly number[],
  dims: number,
): { y: number[]; model: Model; warped: boolean } {
  const plain = standardise(losses);
  const plainModel = fitGp(X, plain, dims);
  const sorted = [...losses].sort((a, b) => a - b);
  const lo = sorted[0]!;
  const delta = 0.1 * (sorted[Math.floor(sorted.length / 2)]! - lo);
  if (!(delta > 0)) return { y: plain, model: plainModel, warped: false };
  const logs = losses.map((v) => Math.log(v - lo + delta));
  const warped = standardise(logs);
  const warpedModel = fitGp(X, warped, dims);
  const logSd = (v: readonly number[]) => {
    const m = v.reduce((s, x) => s + x, 0) / v.length;
    return 0.5 * Math.log(v.reduce((s, x) => s + (x - m) ** 2, 0) / v.length || 1);
  };
  const n = losses.length;
  const plainScore = objective(X, plain, plainModel.h) - n * logSd(losses);
  const warpedScore = objective(X, warped, warpedModel.h) - n * logSd(logs) - logs.reduce((s, v) => s + v, 0);
  return warpedScore > plainScore
    ? { y: warped, model: warpedModel, warped: true }
    : { y: plain, model: plainModel, warped: false };
}

// --- Sampling ---------------------------------------------------------------------------------------

interface GpObservation {
  assignment: Assignment;
  loss: number;
}

/** The trials modelled: all if few, else the best half of the cap and the most recent rest. */
function modelled(history: readonly GpObservation[]): GpObservation[] {
  if (history.length <= GP_MAX_POINTS) return [...history];
  const byLoss = history.map((_, i) => i).sort((a, b) => history[a]!.loss - history[b]!.loss || a - b);
  const keep = new Set(byLoss.slice(0, GP_MAX_POINTS / 2));
  for (let i = history.length - 1; keep.size < GP_MAX_POINTS; i--) keep.add(i);
  return [...keep].sort((a, b) => a - b).map((i) => history[i]!);
}

/**
 * The next trial: fit the GP to the completed trials (losses finite, standardised), add the
 * pending trials at their predicted value, and maximise log EI below the best predicted value
 * among the trials seen. Parameters with one value are drawn by `fixed`.
 */
export function sampleGp(
  params: readonly ParameterSpec[],
  rng: RandomGenerator,
  history: readonly GpObservation[],
  pending: readonly Assignment[],
  fixed: (spec: ParameterSpec, rng: RandomGenerator) => ParameterValue,
): Assignment {
  const features = params.map(featureOf).filter((f): f is Feature => f !== undefined);
  const { encode, decode, snap } = encoder(features);
  const rows: Array<{ x: number[]; loss: number }> = [];
  for (const o of modelled(history)) {
    const x = encode(o.assignment);
    if (x) rows.push({ x, loss: o.loss });
  }
  const dims = features.reduce((s, f) => s + f.width, 0);
  const withFixed = (a: Assignment) => {
    const out: Assignment = {};
    for (const spec of params) out[spec.name] = a[spec.name] ?? fixed(spec, rng);
    return out;
  };
  const randomPoint = () => snap(Array.from({ length: dims }, () => uniformFloat64(rng)));
  if (dims === 0 || rows.length < 2) return withFixed(dims === 0 ? {} : decode(randomPoint()));
  const X = rows.map((r) => r.x);
  const { y, model: fitted } = fitOutputs(
    X,
    rows.map((r) => r.loss),
    dims,
  );
  let model = fitted;
  const best = Math.min(...X.map((x) => predict(model, x).mean));
  const room = Math.max(0, GP_MAX_POINTS - X.length);
  const lies = (room === 0 ? [] : pending.slice(-room))
    .map(encode)
    .filter((x): x is number[] => x !== undefined);
  if (lies.length > 0) {
    const believed = lies.map((x) => predict(model, x).mean);
    model = factor([...X, ...lies], [...y, ...believed], model.h) ?? model;
  }
  const score = (x: readonly number[]) => {
    const p = predict(model, x);
    return logEi(p.mean, p.sd, best);
  };
  return withFixed(decode(maximise(score, randomPoint, snap, X, y, dims, rng)));
}

/** Random points, perturbations of the five best trials, then a shrinking local search. */
function maximise(
  score: (x: readonly number[]) => number,
  randomPoint: () => number[],
  snap: (u: readonly number[]) => number[],
  X: readonly number[][],
  y: readonly number[],
  dims: number,
  rng: RandomGenerator,
): number[] {
  const scored: Array<{ x: number[]; s: number }> = [];
  const consider = (x: number[]) => scored.push({ x, s: score(x) });
  const jitter = (x: readonly number[], scale: number) =>
    snap(x.map((v) => clamp01(v + scale * standardNormal(rng))));
  for (let i = 0; i < RANDOM_CANDIDATES; i++) consider(randomPoint());
  const top = y
    .map((v, i) => ({ v, i }))
    .sort((a, b) => a.v - b.v || a.i - b.i)
    .slice(0, 5);
  for (const { i } of top)
    for (let k = 0; k < LOCAL_CANDIDATES; k++) consider(jitter(X[i]!, k % 2 ? 0.1 : 0.03));
  scored.sort((a, b) => b.s - a.s);
  const starts = scored.slice(0, 3);
  let chosen = scored[0]!;
  for (const start of starts) {
    let cur = start;
    for (const scale of [0.05, 0.02, 0.008, 0.003]) {
      for (let k = 0; k < Math.max(8, 2 * dims); k++) {
        const x = jitter(cur.x, scale);
        const s = score(x);
        if (s > cur.s) cur = { x, s };
      }
    }
    if (cur.s > chosen.s) chosen = cur;
  }
  return chosen.x;
}
