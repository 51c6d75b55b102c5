import { type FrontMember, paretoFront, selectTrial } from './pareto.ts';
import type { BestTrial, RunObservation, Trial } from './record-types.ts';
import type { SweepRequest } from './schema.ts';

/**
 * A multi-objective sweep (`objectives`) as the sweep record reads it: each trial's values of
 * every objective, the losses its sampler gets, the trial its publish policy picks and its Pareto
 * front. A single-objective sweep gets undefined from each (its code path is unchanged).
 */

export const isMultiObjective = (request: SweepRequest) => (request.objectives?.length ?? 0) >= 2;

const numeric = (raw: number | string | undefined) => {
  const value = typeof raw === 'string' ? Number(raw) : raw;
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
};

/**
 * The objectives' values a succeeded run reported, in order, or the first metric it did not
 * report (`missing`). Undefined for a single-objective sweep.
 */
export function objectiveValues(
  request: SweepRequest,
  metrics: RunObservation['metrics'],
): { values: number[] } | { missing: string } | undefined {
  if (!isMultiObjective(request)) return undefined;
  const values: number[] = [];
  for (const o of request.objectives ?? []) {
    const v = numeric(metrics?.[o.metric]);
    if (v === undefined) return { missing: o.metric };
    values.push(v);
  }
  return { values };
}

/** A succeeded trial of a multi-objective sweep, its values recorded (or Failed ObjectiveMissing). */
export function observeMulti(request: SweepRequest, trial: Trial, run: RunObservation): Trial | undefined {
  const seen = objectiveValues(request, run.metrics);
  if (!seen || run.phase !== 'Succeeded') return undefined;
  if ('missing' in seen) {
    const { objective: _o, objectives: _os, ...rest } = trial;
    return {
      ...rest,
      phase: 'Failed',
      reason: 'ObjectiveMissing',
      message: `the run succeeded without reporting the objective metric ${seen.missing}`,
    };
  }
  return { ...trial, objective: seen.values[0] as number, objectives: seen.values };
}

/** The oriented losses (lower is better) of a succeeded multi-objective trial, for the sampler. */
export function lossesOf(request: SweepRequest, trial: Trial): { losses: number[] } | Record<string, never> {
  if (!isMultiObjective(request) || !trial.objectives) return {};
  const objectives = request.objectives ?? [];
  return { losses: trial.objectives.map((v, i) => (objectives[i]?.direction === 'maximize' ? -v : v)) };
}

const scored = (trials: readonly Trial[]) =>
  trials.flatMap((t) =>
    t.phase === 'Succeeded' && t.objectives
      ? [{ index: t.index, runId: t.runId, objectives: t.objectives, trial: t }]
      : [],
  );

/** The trial the publish policy (`select`) picks among the succeeded trials. */
export function multiBest(request: SweepRequest, trials: readonly Trial[]): BestTrial | undefined {
  const picked = selectTrial(request.objectives ?? [], request.select, scored(trials));
  return picked
    ? {
        trialIndex: picked.index,
        runId: picked.runId,
        objective: picked.objectives[0] as number,
        objectives: [...picked.objectives],
        parameters: picked.trial.parameters,
      }
    : undefined;
}

/** The non-dominated succeeded trials (the sweep view's `paretoFront`); undefined for one objective. */
export function frontOf(request: SweepRequest, trials: readonly Trial[]): FrontMember[] | undefined {
  if (!isMultiObjective(request)) return undefined;
  return paretoFront(request.objectives ?? [], scored(trials));
}

/** A multi-objective sweep that ran out of trials with some succeeded but none meeting its constraint. */
export function noPickOutcome(request: SweepRequest, trials: readonly Trial[], budget: number) {
  if (!isMultiObjective(request) || scored(trials).length === 0) return undefined;
  const c = request.select?.constraint;
  const bounds = `${c?.min !== undefined ? ` ≥ ${c.min}` : ''}${c?.max !== undefined ? ` ≤ ${c.max}` : ''}`;
  return {
    phase: 'Failed' as const,
    reason: 'NoTrialMeetsConstraint',
    message: `all ${budget} trials ended; no succeeded trial meets the constraint ${c?.metric}${bounds}`,
  };
}

/**
 * Whether the best recorded stays over the best seen now (a stale read of the trials may miss the
 * best one): a single-objective sweep never records a worse best; a multi-objective sweep's pick
 * depends on all its trials (weights rescale over them), so it is always the one seen now.
 */
export function keepRecordedBest(request: SweepRequest, recorded: BestTrial, seen: BestTrial): boolean {
  if (isMultiObjective(request)) return false;
  const sign = request.objective.direction === 'maximize' ? -1 : 1;
  return sign * recorded.objective <= sign * seen.objective;
}
