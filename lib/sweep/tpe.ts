import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import { type Column, defaultGamma, defaultWeights, logPdf, mixture, sampleMixture } from './parzen.ts';
import {
  type Assignment,
  fromSearchAxis,
  integerCount,
  integerValue,
  type ParameterSpec,
  type ParameterValue,
  toSearchAxis,
} from './space.ts';

/** What TPE needs of a finished trial (samplers.ts's Observation). */
export interface TpeObservation {
  assignment: Assignment;
  loss: number;
  stoppedAtPercent?: number;
}

export interface TpeOptions {
  /** Draws from l(x), of which the best l/g is kept (Optuna's n_ei_candidates, 24). */
  candidates: number;
  /** A fixed fraction of the history, rounded up, as the good group; default Optuna's ⌈n/10⌉ ≤ 25. */
  gamma?: number | undefined;
  /** One joint estimator over all parameters (Optuna's multivariate=True) instead of one per parameter. */
  multivariate: boolean;
}

/** A searched parameter on TPE's axis; fixed (single-valued) parameters are left out, as Optuna does. */
interface Axis {
  spec: ParameterSpec;
  /** The observed value on the axis, undefined if the space no longer holds it. */
  encode: (v: unknown) => number | undefined;
  decode: (y: number) => ParameterValue;
  column: (values: number[]) => Column;
}

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));
const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function axisOf(spec: ParameterSpec): Axis | undefined {
  switch (spec.type) {
    case 'continuous': {
      const lo = toSearchAxis(spec, spec.min);
      const hi = toSearchAxis(spec, spec.max);
      if (!(hi > lo)) return undefined;
      return {
        spec,
        // The space may have been narrowed since: values outside are clamped onto it.
        encode: (v) =>
          finite(v) && (spec.scale === 'linear' || v > 0) ? clamp(toSearchAxis(spec, v), lo, hi) : undefined,
        decode: (y) => fromSearchAxis(spec, y),
        column: (values) => ({ kind: 'numeric', values, lo, hi, step: 0 }),
      };
    }
    case 'integer': {
      // The index axis 0…n-1, step 1: Optuna's discrete kernels on [low - step/2, high + step/2].
      const n = integerCount(spec);
      if (n <= 1) return undefined;
      return {
        spec,
        encode: (v) => (finite(v) ? clamp(Math.round((v - spec.min) / spec.step), 0, n - 1) : undefined),
        decode: (y) => integerValue(spec, clamp(Math.round(y), 0, n - 1)),
        column: (values) => ({ kind: 'numeric', values, lo: 0, hi: n - 1, step: 1 }),
      };
    }
    case 'discrete':
    case 'categorical': {
      const values = spec.values as readonly ParameterValue[];
      if (values.length <= 1) return undefined;
      return {
        spec,
        encode: (v) => {
          const i = values.indexOf(v as ParameterValue);
          return i >= 0 ? i : undefined;
        },
        decode: (y) => values[y]!,
        column: (vs) => ({ kind: 'categorical', values: vs, choices: values.length }),
      };
    }
  }
}

/**
 * Splits the history as Optuna's TPESampler does: completed trials by loss (NaN worst), then
 * trials stopped early (the furthest first, then by loss); the best `nBelow` are good, the rest
 * bad along with the running (pending) trials. Each group keeps trial order, which the weights use.
 */
function split(
  history: readonly TpeObservation[],
  pending: readonly Assignment[],
  gamma: number | undefined,
) {
  const ranked = history
    .map((o, i) => ({
      i,
      stopped: o.stoppedAtPercent === undefined ? Number.NEGATIVE_INFINITY : -o.stoppedAtPercent,
      loss: Number.isNaN(o.loss) ? Number.POSITIVE_INFINITY : o.loss,
    }))
    .sort((a, b) => a.stopped - b.stopped || a.loss - b.loss || a.i - b.i);
  const n = history.length;
  const nBelow = Math.min(n, gamma === undefined ? defaultGamma(n) : Math.max(1, Math.ceil(gamma * n) || 0));
  const good = new Set(ranked.slice(0, nBelow).map((r) => r.i));
  const below: Assignment[] = [];
  const above: Assignment[] = [];
  history.forEach((o, i) => {
    (good.has(i) ? below : above).push(o.assignment);
  });
  return { below, above: [...above, ...pending] };
}

/** The estimator of `group` over `axes`; an observation missing any of them is left out. */
function estimator(axes: readonly Axis[], group: readonly Assignment[], multivariate: boolean) {
  const rows: number[][] = [];
  for (const a of group) {
    const row = axes.map((ax) => ax.encode(a[ax.spec.name]));
    if (row.every((v) => v !== undefined)) rows.push(row as number[]);
  }
  return mixture(
    axes.map((ax, j) => ax.column(rows.map((r) => r[j]!))),
    defaultWeights(rows.length),
    multivariate,
  );
}

/**
 * TPE as Optuna's TPESampler does it with its defaults: the good and bad groups' estimators l and
 * g, `candidates` draws from l, the one maximising log l − log g kept. Univariate: per parameter,
 * parameters in order; multivariate: all searched parameters drawn and scored jointly.
 */
export function sampleTpe(
  params: readonly ParameterSpec[],
  rng: RandomGenerator,
  history: readonly TpeObservation[],
  pending: readonly Assignment[],
  opts: TpeOptions,
  fixed: (spec: ParameterSpec, rng: RandomGenerator) => ParameterValue,
): Assignment {
  const { below, above } = split(history, pending, opts.gamma);
  const axes = params.map(axisOf);
  const searched = axes.filter((a): a is Axis => a !== undefined);
  const groups = opts.multivariate ? [searched] : searched.map((a) => [a]);
  const chosen = new Map<string, ParameterValue>();
  for (const group of groups) {
    if (group.length === 0) continue;
    const l = estimator(group, below, opts.multivariate);
    const g = estimator(group, above, opts.multivariate);
    let best: number[] | undefined;
    let top = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < opts.candidates; i++) {
      const c = sampleMixture(l, rng);
      const s = logPdf(l, c) - logPdf(g, c);
      if (best === undefined || s > top) [best, top] = [c, s];
    }
    group.forEach((ax, j) => {
      chosen.set(ax.spec.name, ax.decode(best![j]!));
    });
  }
  const assignment: Assignment = {};
  for (const spec of params) assignment[spec.name] = chosen.get(spec.name) ?? fixed(spec, rng);
  return assignment;
}
