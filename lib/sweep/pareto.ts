/**
 * Multi-objective sweeps: dominance, non-dominated sorting and crowding distance (as NSGA-II and
 * Optuna's NSGAIISampler define them), the hypervolume of a front, the Pareto front a sweep's view
 * shows, and the publish policy (`select`) that picks one trial of a multi-objective sweep.
 *
 * Losses are objective vectors oriented so that LOWER IS BETTER in every component (a maximised
 * metric negated), as the samplers take them.
 */

/** a dominates b: no worse in every component and better in one. */
export function dominates(a: readonly number[], b: readonly number[]): boolean {
  let better = false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as number;
    const y = b[i] as number;
    if (x > y) return false;
    if (x < y) better = true;
  }
  return better;
}

/**
 * Fast non-dominated sorting (Deb et al. 2002): the indices of `points` by front, the first front
 * the non-dominated points. Each front keeps the points' order.
 */
export function nonDominatedFronts(points: readonly (readonly number[])[]): number[][] {
  const n = points.length;
  const dominatedBy = new Array<number>(n).fill(0);
  const dominatesList: number[][] = points.map(() => []);
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const a = points[i] as number[];
      const b = points[j] as number[];
      if (dominates(a, b)) {
        dominatesList[i]?.push(j);
        dominatedBy[j] = (dominatedBy[j] as number) + 1;
      } else if (dominates(b, a)) {
        dominatesList[j]?.push(i);
        dominatedBy[i] = (dominatedBy[i] as number) + 1;
      }
    }
  }
  const fronts: number[][] = [];
  let current = points.map((_, i) => i).filter((i) => dominatedBy[i] === 0);
  while (current.length > 0) {
    fronts.push(current);
    const next: number[] = [];
    for (const i of current) {
      for (const j of dominatesList[i] as number[]) {
        dominatedBy[j] = (dominatedBy[j] as number) - 1;
        if (dominatedBy[j] === 0) next.push(j);
      }
    }
    current = next.sort((a, b) => a - b);
  }
  return fronts;
}

/**
 * Crowding distance of each point of one front, as Optuna's `_calc_crowding_distance`: per
 * objective, the points sorted by it; an objective where all are equal adds nothing; otherwise each
 * point adds (next − previous) / (max − min), the neighbours of the ends being −∞ and +∞ (so the
 * ends get +∞).
 */
export function crowdingDistances(points: readonly (readonly number[])[]): number[] {
  const n = points.length;
  const out = new Array<number>(n).fill(0);
  if (n === 0) return out;
  const m = (points[0] as number[]).length;
  for (let k = 0; k < m; k++) {
    const order = points
      .map((_, i) => i)
      .sort((a, b) => (points[a]?.[k] as number) - (points[b]?.[k] as number));
    const lo = points[order[0] as number]?.[k] as number;
    const hi = points[order[n - 1] as number]?.[k] as number;
    if (lo === hi) continue;
    const width = hi - lo > 0 ? hi - lo : 1;
    const vs = [
      Number.NEGATIVE_INFINITY,
      ...order.map((i) => points[i]?.[k] as number),
      Number.POSITIVE_INFINITY,
    ];
    for (let j = 0; j < n; j++) {
      const gap = vs[j] === vs[j + 2] ? 0 : (vs[j + 2] as number) - (vs[j] as number);
      out[order[j] as number] = (out[order[j] as number] as number) + gap / width;
    }
  }
  return out;
}

/**
 * The `size` best of `points` for NSGA-II's survival: whole fronts in order, then the points of the
 * front that does not fit with the largest crowding distance (ties by index). Returns indices.
 */
export function eliteIndices(points: readonly (readonly number[])[], size: number): number[] {
  const elite: number[] = [];
  for (const front of nonDominatedFronts(points)) {
    if (elite.length + front.length < size) {
      elite.push(...front);
      continue;
    }
    const crowd = crowdingDistances(front.map((i) => points[i] as number[]));
    const order = front
      .map((i, k) => ({ i, d: crowd[k] as number }))
      .sort((a, b) => b.d - a.d || a.i - b.i)
      .map((x) => x.i);
    elite.push(...order.slice(0, size - elite.length));
    break;
  }
  return elite;
}

/**
 * The hypervolume dominated by `points` and bounded by `reference` (every component of a point
 * must be below the reference's to count; points beyond it are ignored). Exact: a sweep over the
 * first objective in two dimensions, slicing along the last objective above that.
 */
export function hypervolume(points: readonly (readonly number[])[], reference: readonly number[]): number {
  const inside = points.filter((p) => p.every((v, i) => v < (reference[i] as number)));
  if (inside.length === 0) return 0;
  const m = reference.length;
  if (m === 1) return (reference[0] as number) - Math.min(...inside.map((p) => p[0] as number));
  if (m === 2) {
    const sorted = [...inside].sort(
      (a, b) => (a[0] as number) - (b[0] as number) || (a[1] as number) - (b[1] as number),
    );
    let volume = 0;
    let bestY = reference[1] as number;
    for (const p of sorted) {
      const y = p[1] as number;
      if (y >= bestY) continue;
      volume += ((reference[0] as number) - (p[0] as number)) * (bestY - y);
      bestY = y;
    }
    return volume;
  }
  // Slices along the last objective: between consecutive values, the (m−1)-volume of the points at
  // or below the slice.
  const last = m - 1;
  const levels = [...new Set(inside.map((p) => p[last] as number))].sort((a, b) => a - b);
  let volume = 0;
  for (let i = 0; i < levels.length; i++) {
    const top = i + 1 < levels.length ? (levels[i + 1] as number) : (reference[last] as number);
    const below = inside
      .filter((p) => (p[last] as number) <= (levels[i] as number))
      .map((p) => p.slice(0, last));
    volume += hypervolume(below, reference.slice(0, last)) * (top - (levels[i] as number));
  }
  return volume;
}

// --- A sweep's front and its publish policy --------------------------------------------------------

export interface ObjectiveSpec {
  metric: string;
  direction: 'minimize' | 'maximize';
}

/** `select`: how a multi-objective sweep picks the one trial it publishes (and chains, `then`). */
export interface Selection {
  constraint?: { metric: string; max?: number | undefined; min?: number | undefined } | undefined;
  /** Exactly one of optimize and weights (the request schema checks it). */
  optimize?: string | undefined;
  weights?: Record<string, number> | undefined;
}

export interface ScoredTrial {
  index: number;
  runId: string;
  /** The objectives' values, in the order of the request's objectives. */
  objectives: readonly number[];
}

export interface FrontMember {
  trialIndex: number;
  runId: string;
  /** The objectives' values by metric. */
  values: Record<string, number>;
}

const oriented = (objectives: readonly ObjectiveSpec[], values: readonly number[]) =>
  values.map((v, i) => (objectives[i]?.direction === 'maximize' ? -v : v));

/** The non-dominated trials among `trials` (the completed ones with every objective), by index. */
export function paretoFront(
  objectives: readonly ObjectiveSpec[],
  trials: readonly ScoredTrial[],
): FrontMember[] {
  const scored = trials.filter(
    (t) => t.objectives.length === objectives.length && t.objectives.every(Number.isFinite),
  );
  const fronts = nonDominatedFronts(scored.map((t) => oriented(objectives, t.objectives)));
  return (fronts[0] ?? [])
    .map((i) => scored[i] as ScoredTrial)
    .sort((a, b) => a.index - b.index)
    .map((t) => ({
      trialIndex: t.index,
      runId: t.runId,
      values: Object.fromEntries(objectives.map((o, k) => [o.metric, t.objectives[k] as number])),
    }));
}

/**
 * The trial a multi-objective sweep publishes, by its `select` (default: optimize the first
 * objective). Only trials meeting the constraint (metric ≤ max and/or ≥ min) compete; none: no
 * trial. `optimize`: the best value of that objective, ties broken by the Pareto order (a trial
 * that dominates wins) then by index. `weights`: each objective rescaled to [0, 1] over the
 * competing trials (1 the best value, 0 the worst; an objective all equal counts 1), the largest
 * weighted sum wins, ties by index. Either way the trial picked is on the front of the competing
 * trials (for positive weights).
 */
export function selectTrial<T extends ScoredTrial>(
  objectives: readonly ObjectiveSpec[],
  select: Selection | undefined,
  trials: readonly T[],
): T | undefined {
  const metricIndex = (metric: string) => objectives.findIndex((o) => o.metric === metric);
  const constraint = select?.constraint;
  const candidates = trials.filter((t) => {
    if (t.objectives.length !== objectives.length || !t.objectives.every(Number.isFinite)) return false;
    if (!constraint) return true;
    const v = t.objectives[metricIndex(constraint.metric)] as number;
    return (
      (constraint.max === undefined || v <= constraint.max) &&
      (constraint.min === undefined || v >= constraint.min)
    );
  });
  if (candidates.length === 0) return undefined;
  const losses = candidates.map((t) => oriented(objectives, t.objectives));
  let best = 0;
  const weights = select?.weights;
  if (weights) {
    const m = objectives.length;
    const lo = Array.from({ length: m }, (_, k) => Math.min(...losses.map((l) => l[k] as number)));
    const hi = Array.from({ length: m }, (_, k) => Math.max(...losses.map((l) => l[k] as number)));
    const score = (l: number[]) =>
      objectives.reduce((s, o, k) => {
        const w = weights[o.metric] ?? 0;
        const span = (hi[k] as number) - (lo[k] as number);
        return s + w * (span > 0 ? ((hi[k] as number) - (l[k] as number)) / span : 1);
      }, 0);
    const scores = losses.map(score);
    for (let i = 1; i < candidates.length; i++)
      if ((scores[i] as number) > (scores[best] as number)) best = i;
  } else {
    const k = Math.max(0, metricIndex(select?.optimize ?? (objectives[0]?.metric as string)));
    for (let i = 1; i < candidates.length; i++) {
      const a = losses[i] as number[];
      const b = losses[best] as number[];
      if ((a[k] as number) < (b[k] as number) || (a[k] === b[k] && dominates(a, b))) best = i;
    }
  }
  return candidates[best];
}
