/**
 * CMA-ES (Hansen, "The CMA Evolution Strategy: A Tutorial", arXiv:1604.00772), ported from the
 * `cmaes` Python package by CyberAgent AI Lab (https://github.com/CyberAgentAILab/cmaes, MIT
 * licence, `cmaes/_cma.py`, class `CMA`, commit d4d96d98): the same default population size,
 * recombination weights (with negative weights, eq. 49–53), learning rates, step-size control,
 * h_σ test, ask() with up to 100 resamplings inside the bounds then clipping, and tell(). Left out:
 * learning-rate adaptation (`lr_adapt`, off by default there) and the termination test.
 * numpy.linalg.eigh is replaced by cyclic Jacobi rotations (the matrices are at most 16 × 16).
 *
 * The optimizer is pure and replayable: `tell` updates an immutable state and `ask` draws from a
 * generator the caller passes, so a sampler can rebuild it from a sweep's history at every call.
 */

import { uniformFloat64 } from 'pure-rand/distribution/uniformFloat64';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';

const EPS = 1e-8;
const MEAN_MAX = 1e32;
const SIGMA_MAX = 1e32;
const MAX_RESAMPLING = 100;

type Vec = number[];
type Mat = number[][];

/** Constants that depend only on the dimension and the population size. */
interface Params {
  n: number;
  popsize: number;
  mu: number;
  muEff: number;
  cc: number;
  c1: number;
  cmu: number;
  cSigma: number;
  dSigma: number;
  cm: number;
  chiN: number;
  weights: Vec;
  bounds: ReadonlyArray<readonly [number, number]>;
}

export interface CmaState {
  readonly p: Params;
  readonly mean: Vec;
  readonly sigma: number;
  readonly C: Mat;
  readonly pSigma: Vec;
  readonly pc: Vec;
  /** Generations told so far. */
  readonly g: number;
}

export interface CmaOptions {
  mean: readonly number[];
  sigma: number;
  /** [lower, upper] per dimension; the mean must lie inside. */
  bounds: ReadonlyArray<readonly [number, number]>;
  /** Default 4 + ⌊3 ln n⌋ (eq. 48). */
  popsize?: number;
}

export function defaultPopsize(n: number): number {
  return 4 + Math.floor(3 * Math.log(n));
}

/** CMA.__init__: weights and learning rates as in _cma.py. */
export function initCma(opts: CmaOptions): CmaState {
  const n = opts.mean.length;
  if (n <= 0) throw new RangeError('CMA-ES needs at least one dimension');
  if (!(opts.sigma > 0)) throw new RangeError('sigma must be positive');
  if (opts.bounds.length !== n) throw new RangeError('one bound pair per dimension');
  const popsize = opts.popsize ?? defaultPopsize(n);
  if (!(popsize >= 2)) throw new RangeError('popsize must be at least 2');
  const mu = Math.floor(popsize / 2);
  const wPrime = Array.from({ length: popsize }, (_, i) => Math.log((popsize + 1) / 2) - Math.log(i + 1));
  const sum = (xs: Vec) => xs.reduce((a, b) => a + b, 0);
  const sq = (xs: Vec) => xs.map((x) => x * x);
  const muEff = sum(wPrime.slice(0, mu)) ** 2 / sum(sq(wPrime.slice(0, mu)));
  const muEffMinus = sum(wPrime.slice(mu)) ** 2 / sum(sq(wPrime.slice(mu)));
  const alphaCov = 2;
  const c1 = alphaCov / ((n + 1.3) ** 2 + muEff);
  const cmu = Math.min(
    1 - c1 - 1e-8,
    (alphaCov * (muEff - 2 + 1 / muEff)) / ((n + 2) ** 2 + (alphaCov * muEff) / 2),
  );
  const minAlpha = Math.min(1 + c1 / cmu, 1 + (2 * muEffMinus) / (muEff + 2), (1 - c1 - cmu) / (n * cmu));
  const positiveSum = sum(wPrime.filter((w) => w > 0));
  const negativeSum = sum(wPrime.filter((w) => w < 0).map(Math.abs));
  const weights = wPrime.map((w) => (w >= 0 ? w / positiveSum : (minAlpha / negativeSum) * w));
  const cSigma = (muEff + 2) / (n + muEff + 5);
  const dSigma = 1 + 2 * Math.max(0, Math.sqrt((muEff - 1) / (n + 1)) - 1) + cSigma;
  const cc = (4 + muEff / n) / (n + 4 + (2 * muEff) / n);
  const chiN = Math.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n));
  opts.bounds.forEach(([lo, hi], i) => {
    const m = opts.mean[i]!;
    if (!(lo <= m && m <= hi)) throw new RangeError(`mean[${i}] = ${m} outside [${lo}, ${hi}]`);
  });
  return {
    p: { n, popsize, mu, muEff, cc, c1, cmu, cSigma, dSigma, cm: 1, chiN, weights, bounds: opts.bounds },
    mean: [...opts.mean],
    sigma: opts.sigma,
    C: identity(n),
    pSigma: zeros(n),
    pc: zeros(n),
    g: 0,
  };
}

/** CMA.ask: x = m + σ·B·D·z, resampled up to 100 times until inside the bounds, then clipped. */
export function askCma(state: CmaState, rng: RandomGenerator): number[] {
  const { B, D } = eigen(state.C);
  const sample = () => {
    const z = Array.from({ length: state.p.n }, () => standardNormal(rng));
    const dz = z.map((zi, i) => D[i]! * zi);
    return state.mean.map((m, i) => m + state.sigma * dot(B[i]!, dz));
  };
  for (let i = 0; i < MAX_RESAMPLING; i++) {
    const x = sample();
    if (feasible(state.p.bounds, x)) return x;
  }
  return sample().map((v, i) => Math.min(state.p.bounds[i]![1], Math.max(state.p.bounds[i]![0], v)));
}

/** CMA.tell: exactly popsize solutions; mean, step size, evolution paths and covariance as in _cma.py. */
export function tellCma(
  state: CmaState,
  solutions: ReadonlyArray<{ x: readonly number[]; value: number }>,
): CmaState {
  const { p } = state;
  if (solutions.length !== p.popsize) throw new RangeError(`tell needs ${p.popsize} solutions`);
  for (const s of solutions) {
    if (s.x.some((v) => !(Math.abs(v) < MEAN_MAX))) throw new RangeError('solution out of range');
  }
  const g = state.g + 1;
  const sorted = [...solutions].sort((a, b) => a.value - b.value);
  const { B, D } = eigen(state.C);
  // The eigen decomposition replaces C by B·D²·B^T (D² floored at EPS) as _eigen_decomposition does.
  const C0 = reconstruct(B, D);
  const yk = sorted.map((s) => s.x.map((v, i) => (v - state.mean[i]!) / state.sigma));
  const yw = zeros(p.n);
  for (let k = 0; k < p.mu; k++) for (let i = 0; i < p.n; i++) yw[i]! += p.weights[k]! * yk[k]![i]!;
  const mean = state.mean.map((m, i) => m + p.cm * state.sigma * yw[i]!);
  // C^(-1/2) = B·D^-1·B^T
  const Cinvsqrt = B.map((_, i) =>
    B.map((_, j) => {
      let s = 0;
      for (let k = 0; k < p.n; k++) s += (B[i]![k]! * B[j]![k]!) / D[k]!;
      return s;
    }),
  );
  const cs = Math.sqrt(p.cSigma * (2 - p.cSigma) * p.muEff);
  const CyW = matVec(Cinvsqrt, yw);
  const pSigma = state.pSigma.map((v, i) => (1 - p.cSigma) * v + cs * CyW[i]!);
  const normPSigma = norm(pSigma);
  let sigma = state.sigma * Math.exp((p.cSigma / p.dSigma) * (normPSigma / p.chiN - 1));
  sigma = Math.min(sigma, SIGMA_MAX);
  const hLeft = normPSigma / Math.sqrt(1 - (1 - p.cSigma) ** (2 * (g + 1)));
  const hRight = (1.4 + 2 / (p.n + 1)) * p.chiN;
  const hSigma = hLeft < hRight ? 1 : 0;
  const cpc = Math.sqrt(p.cc * (2 - p.cc) * p.muEff);
  const pc = state.pc.map((v, i) => (1 - p.cc) * v + hSigma * cpc * yw[i]!);
  const wIo = p.weights.map((w, k) => {
    if (w >= 0) return w;
    const n2 = norm(matVec(Cinvsqrt, yk[k]!)) ** 2;
    return w * (p.n / (n2 + EPS));
  });
  const deltaHSigma = (1 - hSigma) * p.cc * (2 - p.cc);
  const sumW = p.weights.reduce((a, b) => a + b, 0);
  const keep = 1 + p.c1 * deltaHSigma - p.c1 - p.cmu * sumW;
  const C = C0.map((row, i) =>
    row.map((c, j) => {
      let rankMu = 0;
      for (let k = 0; k < p.popsize; k++) rankMu += wIo[k]! * yk[k]![i]! * yk[k]![j]!;
      return keep * c + p.c1 * pc[i]! * pc[j]! + p.cmu * rankMu;
    }),
  );
  return { p, mean, sigma, C, pSigma, pc, g };
}

// --- Linear algebra --------------------------------------------------------------------------------

const zeros = (n: number) => new Array<number>(n).fill(0);
const identity = (n: number): Mat =>
  Array.from({ length: n }, (_, i) => zeros(n).map((_, j) => (i === j ? 1 : 0)));
const dot = (a: readonly number[], b: readonly number[]) => a.reduce((s, v, i) => s + v * b[i]!, 0);
const norm = (a: readonly number[]) => Math.sqrt(dot(a, a));
const matVec = (m: Mat, v: readonly number[]) => m.map((row) => dot(row, v));

function feasible(bounds: Params['bounds'], x: readonly number[]): boolean {
  return x.every((v, i) => v >= bounds[i]![0] && v <= bounds[i]![1]);
}

/** B·diag(D²)·B^T */
function reconstruct(B: Mat, D: readonly number[]): Mat {
  return B.map((_, i) =>
    B.map((_, j) => {
      let s = 0;
      for (let k = 0; k < D.length; k++) s += B[i]![k]! * D[k]! * D[k]! * B[j]![k]!;
      return s;
    }),
  );
}

/**
 * _eigen_decomposition: symmetrise C, eigen-decompose it (B's columns are the eigenvectors), and
 * take D = sqrt(eigenvalues), a negative eigenvalue replaced by EPS.
 */
export function eigen(C: Mat): { B: Mat; D: number[] } {
  const n = C.length;
  const A = C.map((row, i) => row.map((v, j) => (v + C[j]![i]!) / 2));
  const { values, vectors } = jacobiEigen(A);
  return { B: vectors, D: values.map((v) => Math.sqrt(v < 0 ? EPS : v)).slice(0, n) };
}

/** Cyclic Jacobi eigenvalue algorithm for a symmetric matrix: A = V·diag(values)·V^T. */
export function jacobiEigen(input: Mat): { values: number[]; vectors: Mat } {
  const n = input.length;
  const a = input.map((row) => [...row]);
  const v = identity(n);
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) off += a[i]![j]! ** 2;
    if (off < 1e-30) break;
    for (let p = 0; p < n; p++) {
      for (let q = p + 1; q < n; q++) {
        const apq = a[p]![q]!;
        if (Math.abs(apq) < 1e-300) continue;
        const theta = (a[q]![q]! - a[p]![p]!) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < n; k++) {
          const akp = a[k]![p]!;
          const akq = a[k]![q]!;
          a[k]![p] = c * akp - s * akq;
          a[k]![q] = s * akp + c * akq;
        }
        for (let k = 0; k < n; k++) {
          const apk = a[p]![k]!;
          const aqk = a[q]![k]!;
          a[p]![k] = c * apk - s * aqk;
          a[q]![k] = s * apk + c * aqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = v[k]![p]!;
          const vkq = v[k]![q]!;
          v[k]![p] = c * vkp - s * vkq;
          v[k]![q] = s * vkp + c * vkq;
        }
      }
    }
  }
  return { values: a.map((row, i) => row[i]!), vectors: v };
}

/** Box–Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
export function standardNormal(rng: RandomGenerator): number {
  const u1 = 1 - uniformFloat64(rng);
  const u2 = uniformFloat64(rng);
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}
