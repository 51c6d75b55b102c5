import type { Observation } from './samplers.ts';
import type { Parameter, SweepRequest } from './schema.ts';
import type { Assignment } from './space.ts';

/**
 * Warm start (`warmStartFrom`): the finished trials of earlier sweeps of the same search space
 * seed a new sweep's sampler as history, as if they had run in it (SageMaker's warm start,
 * Optuna's `enqueue_trial`/`add_trials` of an earlier study). Pure: the intake reads the earlier
 * sweeps, these functions check them and take their trials.
 */

/**
 * Seeded trials kept at most (the best first), and their size as JSON: the history lives in the
 * sweep item, which must stay well below DynamoDB's 400 KB per item.
 */
export const WARM_START_MAX_TRIALS = 1000;
export const WARM_START_MAX_BYTES = 150_000;

/** The earlier sweep as warm start needs it. */
export interface WarmSource {
  sweepId: string;
  request: Pick<SweepRequest, 'parameters' | 'objective'>;
  trials: ReadonlyArray<{
    index: number;
    parameters: Assignment;
    phase: string;
    objective?: number;
    curve?: ReadonlyArray<readonly [number, number]>;
  }>;
}

/** What a warm-started sweep carries in its record. */
export interface WarmStart {
  /** The sweeps it was seeded from. */
  from: string[];
  /** Their finished trials as history (losses oriented lower-is-better), earliest sweep first. */
  history: Observation[];
}

/**
 * Why the earlier sweep's space is not this one's (undefined: the same space). Same parameter
 * names and types; continuous parameters on the same scale with overlapping ranges; integer ones
 * with overlapping ranges; discrete and categorical ones sharing at least one value. The same
 * objective metric and direction, so the losses mean the same.
 */
export function incompatibility(
  target: Pick<SweepRequest, 'parameters' | 'objective'>,
  source: Pick<SweepRequest, 'parameters' | 'objective'>,
): string | undefined {
  if (
    target.objective.metric !== source.objective.metric ||
    target.objective.direction !== source.objective.direction
  ) {
    return `its objective is ${source.objective.direction} ${source.objective.metric}, not ${target.objective.direction} ${target.objective.metric}`;
  }
  const names = (ps: readonly Parameter[]) =>
    ps
      .map((p) => p.name)
      .sort()
      .join(', ');
  if (names(target.parameters) !== names(source.parameters)) {
    return `its parameters are [${names(source.parameters)}], not [${names(target.parameters)}]`;
  }
  for (const t of target.parameters) {
    const s = source.parameters.find((p) => p.name === t.name) as Parameter;
    if (s.type !== t.type) return `parameter ${t.name} is ${s.type} there, ${t.type} here`;
    if (t.type === 'continuous' && s.type === 'continuous') {
      if (t.scale !== s.scale) return `parameter ${t.name} is on a ${s.scale} scale there, ${t.scale} here`;
      if (s.max < t.min || s.min > t.max) {
        return `parameter ${t.name}'s range [${s.min}, ${s.max}] there does not overlap [${t.min}, ${t.max}]`;
      }
    } else if (t.type === 'integer' && s.type === 'integer') {
      if (s.max < t.min || s.min > t.max) {
        return `parameter ${t.name}'s range [${s.min}, ${s.max}] there does not overlap [${t.min}, ${t.max}]`;
      }
    } else if ((t.type === 'discrete' || t.type === 'categorical') && s.type === t.type) {
      const values = new Set<number | string>(t.values);
      if (!(s.values as Array<number | string>).some((v) => values.has(v))) {
        return `parameter ${t.name} shares no value with this sweep's`;
      }
    }
  }
  return undefined;
}

/** Whether an assignment lies in the search space (an earlier trial outside a narrowed range is left out). */
export function inSpace(params: readonly Parameter[], assignment: Assignment): boolean {
  return params.every((p) => {
    const v = assignment[p.name];
    switch (p.type) {
      case 'continuous':
        return typeof v === 'number' && v >= p.min && v <= p.max;
      case 'integer':
        return (
          typeof v === 'number' &&
          Number.isInteger(v) &&
          v >= p.min &&
          v <= p.max &&
          (v - p.min) % p.step === 0
        );
      case 'discrete':
        return typeof v === 'number' && p.values.includes(v);
      case 'categorical':
        return typeof v === 'string' && p.values.includes(v);
    }
    return false;
  });
}

/**
 * The history the earlier sweeps seed: their Succeeded trials (the objective) and trials stopped
 * early (their last value, marked as pruned), inside this sweep's space, losses oriented
 * lower-is-better. More than WARM_START_MAX_TRIALS or WARM_START_MAX_BYTES: the best are kept
 * (stopped ones rank last).
 */
export function seedHistory(
  target: Pick<SweepRequest, 'parameters' | 'objective'>,
  sources: readonly WarmSource[],
): Observation[] {
  const sign = target.objective.direction === 'maximize' ? -1 : 1;
  const history: Observation[] = [];
  for (const source of sources) {
    for (const t of source.trials) {
      if (!inSpace(target.parameters, t.parameters)) continue;
      const assignment = Object.fromEntries(target.parameters.map((p) => [p.name, t.parameters[p.name]]));
      if (t.phase === 'Succeeded' && t.objective !== undefined && Number.isFinite(t.objective)) {
        history.push({ assignment: assignment as Assignment, loss: sign * t.objective });
        continue;
      }
      const last = t.curve?.at(-1);
      if (t.phase === 'EarlyStopped' && last && Number.isFinite(last[1])) {
        history.push({
          assignment: assignment as Assignment,
          loss: sign * last[1],
          stoppedAtPercent: last[0],
        });
      }
    }
  }
  const bytes = (o: Observation) => JSON.stringify(o).length;
  if (
    history.length <= WARM_START_MAX_TRIALS &&
    history.reduce((n, o) => n + bytes(o), 0) <= WARM_START_MAX_BYTES
  ) {
    return history;
  }
  const rank = (o: Observation) => (o.stoppedAtPercent === undefined ? 0 : 1);
  const kept = new Set<Observation>();
  let size = 0;
  for (const o of [...history].sort((a, b) => rank(a) - rank(b) || a.loss - b.loss)) {
    if (kept.size >= WARM_START_MAX_TRIALS || size + bytes(o) > WARM_START_MAX_BYTES) break;
    kept.add(o);
    size += bytes(o);
  }
  return history.filter((o) => kept.has(o));
}
