import { trialRunId } from '../run/ids.ts';
import { isInfrastructureFailure, isTerminal as isRunTerminal, type RunPhase } from '../run/phases.ts';
import { type Curve, pruneMessage, shouldStopEarly } from './early-stopping.ts';
import * as multi from './multi.ts';
import {
  type BestTrial,
  type ChainedRun,
  isTrialTerminal,
  MAX_TRIAL_RETRIES,
  OWN_RELEASE_MS,
  type RunObservation,
  type StepResult,
  type StopReason,
  type SweepOutcome,
  type SweepPhase,
  type SweepRecord,
  type Trial,
} from './record-types.ts';
import { type Algorithm, algorithmFor, type Observation } from './samplers.ts';
import type { SweepRequest } from './schema.ts';
import { heldSlots, queueAhead, releasable, trialBudget } from './slots.ts';
import type { Assignment } from './space.ts';

/**
 * The sweep record and the pure decision of what a sweep does next. In the state table a sweep is
 * a `sweep#<id>` item (the record without its trials, plus trial counters) and one
 * `trial#<id>#<index>` item per trial (lib/sweep/sweeps.ts). The record is a cache of what the
 * trials' run records say plus the sweep's own decisions; `step()` recomputes everything from the
 * run records it is shown, so two concurrent advancers reach the same decision and the loser of a
 * conditional write simply finds nothing to do.
 */

export {
  type BestTrial,
  type ChainedRun,
  isTrialTerminal,
  MAX_TRIAL_RETRIES,
  OWN_RELEASE_MS,
  type PublishedModel,
  type RunObservation,
  type StepResult,
  type StopReason,
  SWEEP_PHASES,
  type SweepOutcome,
  type SweepPhase,
  type SweepRecord,
  TRIAL_PHASES,
  type Trial,
  type TrialPhase,
} from './record-types.ts';
export {
  heldSlots,
  notYetRunning,
  type QuotaPressure,
  queueAhead,
  quotaPressure,
  releasable,
  trialBudget,
  underQuotaPressure,
} from './slots.ts';

/**
 * A trial whose run failed with an infrastructure reason (lib/run/phases.ts INFRASTRUCTURE_REASONS)
 * is released again with the same parameters as a new run (derived from the sweep, index and
 * attempt), at most MAX_TRIAL_RETRIES times, while the sweep still runs; it does not count as
 * failed. Undefined: the trial is not retried.
 */
export function retryTrial(
  sweepId: string,
  trial: Trial,
  run: RunObservation,
  at: string,
): Trial | undefined {
  if (run.phase !== 'Failed' || !isInfrastructureFailure(run.reason) || trial.phase === 'Stopping')
    return undefined;
  const attempt = (trial.attempt ?? 0) + 1;
  if (attempt > MAX_TRIAL_RETRIES) return undefined;
  const lost = (trial.lostGpuHours ?? 0) + (run.gpuHours ?? 0);
  return {
    index: trial.index,
    runId: trialRunId(sweepId, trial.index, attempt),
    parameters: trial.parameters,
    phase: 'Queued',
    releasedAt: at,
    attempt,
    retryOf: trial.runId,
    retryReason: run.reason as string,
    ...(lost > 0 ? { lostGpuHours: lost } : {}),
  };
}

/** Samples closer than this (in percent) to the previous one are not kept: a curve stays small. */
const CURVE_SPACING = 5;

export function algorithmOf(request: SweepRequest): Algorithm {
  return algorithmFor(request);
}

/** The objective oriented so that lower is better. */
export function lossOf(request: SweepRequest, value: number): number {
  return request.objective.direction === 'maximize' ? -value : value;
}

function objectiveValue(request: SweepRequest, metrics: RunObservation['metrics']): number | undefined {
  const raw = metrics?.[request.objective.metric];
  const value = typeof raw === 'string' ? Number(raw) : raw;
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

/** A trial as its run's record says it is now (what `step` records; views show the same). */
export function observeTrial(request: SweepRequest, trial: Trial, run: RunObservation, now: string): Trial {
  const next: Trial = { ...trial };
  delete next.waitingForQuota;
  const value = objectiveValue(request, run.metrics);
  if (request.earlyStopping && value !== undefined && run.percent !== undefined) {
    const curve = [...(trial.curve ?? [])];
    const last = curve[curve.length - 1];
    if (!last || run.percent - last[0] >= CURVE_SPACING) curve.push([run.percent, value]);
    next.curve = curve;
  }
  if (run.gpuHours !== undefined) next.gpuHours = run.gpuHours;
  switch (run.phase) {
    case 'Accepted':
    case 'Submitting':
      break;
    case 'Pending':
      if (trial.phase !== 'Stopping') next.phase = 'Pending';
      if (run.waitingForQuota) next.waitingForQuota = true;
      break;
    case 'Running':
    case 'Publishing':
      if (trial.phase !== 'Stopping') next.phase = 'Running';
      break;
    case 'Succeeded':
      next.endedAt = now;
      if (value === undefined) {
        next.phase = 'Failed';
        next.reason = 'ObjectiveMissing';
        next.message = `the run succeeded without reporting the objective metric ${request.objective.metric}`;
      } else {
        next.phase = 'Succeeded';
        next.objective = value;
        if (request.earlyStopping) {
          const curve = (next.curve ?? []).filter(([p]) => p < 100);
          next.curve = [...curve, [100, value]];
        }
      }
      break;
    case 'Failed':
      next.phase = 'Failed';
      next.endedAt = now;
      if (run.reason !== undefined) next.reason = run.reason;
      if (run.message !== undefined) next.message = clip(run.message);
      break;
    case 'Cancelled':
      next.phase = run.reason === 'EarlyStopped' ? 'EarlyStopped' : 'Cancelled';
      next.endedAt = now;
      next.reason = run.reason ?? 'Cancelled';
      if (run.message !== undefined) next.message = clip(run.message);
      break;
  }
  return multi.observeMulti(request, next, run) ?? next;
}

/** A trial's message as the sweep keeps it (trial items stay small). */
const MAX_TRIAL_MESSAGE = 240;
const clip = (m: string) => (m.length > MAX_TRIAL_MESSAGE ? `${m.slice(0, MAX_TRIAL_MESSAGE - 1)}…` : m);

/**
 * Whether a trial's run may be stopped early now: it runs and has not reached its end. A run at
 * 100 % (its last report) or Publishing has its result; stopping it would discard that result.
 */
export function prunable(run: RunObservation | undefined): boolean {
  return run?.phase === 'Running' && (run.percent === undefined || run.percent < 100);
}

export interface SweepUsage {
  /** GPU-hours of the trials that ended. */
  gpuHours: number;
  /** Trials stopped early (pruned). */
  trialsPruned: number;
  /**
   * GPU-hours pruning saved, estimated: each pruned trial would have run on at its pace to 100 %
   * (its GPU-hours × (100 − p) / p, p the progress it was stopped at).
   */
  gpuHoursSavedByPruning: number;
}

/** What a sweep's trials cost and what pruning saved (from the trials' records). */
export function sweepUsage(trials: readonly Trial[]): SweepUsage {
  let gpuHours = 0;
  let trialsPruned = 0;
  let saved = 0;
  for (const t of trials) {
    gpuHours += (t.gpuHours ?? 0) + (t.lostGpuHours ?? 0);
    if (t.phase !== 'EarlyStopped') continue;
    trialsPruned++;
    const p = t.curve?.at(-1)?.[0];
    if (p !== undefined && p > 0 && p < 100 && t.gpuHours !== undefined)
      saved += (t.gpuHours * (100 - p)) / p;
  }
  const round = (x: number) => Math.round(x * 1e6) / 1e6;
  return { gpuHours: round(gpuHours), trialsPruned, gpuHoursSavedByPruning: round(saved) };
}

export function bestOf(request: SweepRequest, trials: readonly Trial[]): BestTrial | undefined {
  if (multi.isMultiObjective(request)) return multi.multiBest(request, trials);
  let best: Trial | undefined;
  for (const t of trials) {
    if (t.phase !== 'Succeeded' || t.objective === undefined) continue;
    if (!best || lossOf(request, t.objective) < lossOf(request, best.objective as number)) best = t;
  }
  return best
    ? {
        trialIndex: best.index,
        runId: best.runId,
        objective: best.objective as number,
        parameters: best.parameters,
      }
    : undefined;
}

function goalReached(request: SweepRequest, best: BestTrial | undefined): boolean {
  const goal = request.objective.goal;
  if (goal === undefined || !best) return false;
  return request.objective.direction === 'maximize' ? best.objective >= goal : best.objective <= goal;
}

const lossCurve = (request: SweepRequest, curve: ReadonlyArray<[number, number]>): Curve =>
  curve.map(([p, v]) => [p, lossOf(request, v)] as const);

/**
 * One decision step. `runs` holds what the run record of every non-terminal trial says now.
 * `newTrial(index, history)` makes the trial released at `index` (its id and parameters).
 * `canStop`: the caller can stop runs (it may decide early stopping and end-of-sweep stops).
 */
export function step(
  record: SweepRecord,
  runs: ReadonlyMap<string, RunObservation | undefined>,
  now: Date,
  newTrial: (index: number, history: Observation[], pending: Assignment[]) => Trial,
  canStop: boolean,
  only?: ReadonlySet<string>,
): StepResult {
  const at = now.toISOString();
  const { request } = record;
  const before = JSON.stringify(record);
  const trials = record.trials.map((t) => {
    if (isTrialTerminal(t.phase)) return t;
    const run = runs.get(t.runId);
    if (!run) return t;
    const retry = record.phase === 'Running' ? retryTrial(record.sweepId, t, run, at) : undefined;
    return retry ?? observeTrial(request, t, run, at);
  });
  const next: SweepRecord = { ...record, trials };
  // Never a worse best than the one recorded (a stale read of the trials may miss the best one).
  const seenBest = bestOf(request, trials);
  const best =
    record.best && seenBest && multi.keepRecordedBest(request, record.best, seenBest)
      ? record.best
      : (seenBest ?? record.best);
  if (best) next.best = best;
  const release: Trial[] = [];
  const stop: StepResult['stop'] = [];
  const inFlight = () => next.trials.filter((t) => !isTrialTerminal(t.phase));

  if (next.phase === 'Running') {
    const failed = trials.filter((t) => t.phase === 'Failed').length;
    const budget = trialBudget(request);
    if (failed > request.maxFailedTrials) {
      next.outcome = {
        phase: 'Failed',
        reason: 'TooManyFailedTrials',
        message: `${failed} trials failed, more than maxFailedTrials ${request.maxFailedTrials}`,
      };
    } else if (goalReached(request, best)) {
      next.outcome = {
        phase: 'Succeeded',
        reason: 'GoalReached',
        message: `trial ${best?.trialIndex} reached the goal ${request.objective.metric} = ${request.objective.goal}`,
      };
    } else if (trials.length >= budget && inFlight().length === 0) {
      next.outcome = best
        ? { phase: 'Succeeded', reason: 'TrialsExhausted', message: `all ${budget} trials ended` }
        : (multi.noPickOutcome(request, trials, budget) ?? {
            phase: 'Failed',
            reason: 'NoSuccessfulTrial',
            message: `none of the ${budget} trials succeeded`,
          });
    }
    if (next.outcome) {
      next.phase = 'Completing';
    } else {
      const rule = request.earlyStopping;
      if (rule && canStop) {
        const completed = trials
          .filter((t) => t.phase === 'Succeeded' && t.curve && t.curve.length > 0)
          .map((t) => lossCurve(request, t.curve ?? []));
        // ASHA and Hyperband rank a trial against every trial that reported at its rung.
        const peers = trials
          .filter((t) => t.curve && t.curve.length > 0)
          .map((t) => ({ index: t.index, curve: lossCurve(request, t.curve ?? []) }));
        next.trials = next.trials.map((t) => {
          if (t.phase !== 'Running' || !t.curve?.length) return t;
          // Decided on what the run says now, never once it reached its end: a run at 100 % or
          // Publishing has its result, and stopping it would discard it.
          const run = runs.get(t.runId);
          if (!prunable(run)) return t;
          const context = { trialIndex: t.index, peers };
          if (!shouldStopEarly(lossCurve(request, t.curve), completed, rule, context)) return t;
          const message = pruneMessage(
            rule,
            request.objective.metric,
            run?.percent ?? t.curve.at(-1)?.[0] ?? 0,
          );
          const stopping: Trial = { ...t, phase: 'Stopping', stopReason: 'EarlyStopped', message };
          stop.push({ trial: stopping, reason: 'EarlyStopped', message });
          return stopping;
        });
      }
      const waiting = next.trials.filter((t) => t.waitingForQuota).length;
      // Finished trials, and trials stopped early with their last value (samplers rank those
      // after the completed ones, as Optuna does with pruned trials).
      // A warm-started sweep's sampler sees the earlier sweeps' trials first, as if run here.
      const own: Observation[] = next.trials.flatMap((t): Observation[] => {
        if (t.phase === 'Succeeded' && t.objective !== undefined) {
          return [
            { assignment: t.parameters, loss: lossOf(request, t.objective), ...multi.lossesOf(request, t) },
          ];
        }
        const last = t.curve?.at(-1);
        const stopped = t.phase === 'EarlyStopped' || t.stopReason === 'EarlyStopped';
        return stopped && last
          ? [{ assignment: t.parameters, loss: lossOf(request, last[1]), stoppedAtPercent: last[0] }]
          : [];
      });
      const history = record.warmStart ? [...record.warmStart.history, ...own] : own;
      // Trials whose end was recorded before this step (by their own advance, or an earlier one).
      const recorded = record.trials.filter((t) => isTrialTerminal(t.phase));
      const recordedIndexes = new Set(recorded.map((t) => t.index));
      // Under quota pressure (a trial waits, or slots were held back for that), at most
      // queueAhead − waiting trials are released, so a sweep keeps a short queue of trials ready
      // for the GPUs that free up rather than piling its held slots onto the queue at once.
      const pressure = waiting > 0 || heldSlots(next.trials, recorded, request.parallelTrials, budget) > 0;
      // A trial that ended in this step while holding quota (not waiting) frees its GPUs for a
      // trial Kueue holds: that one leaves the queue, so one more may join it now. Without this the
      // ended trial's slot stayed empty until an advance saw the waiting trial admitted.
      const before = new Map(record.trials.map((t) => [t.index, t]));
      const freed = next.trials.filter((t) => {
        const was = before.get(t.index);
        return was && !isTrialTerminal(was.phase) && !was.waitingForQuota && isTrialTerminal(t.phase);
      }).length;
      // A trial's own advance always refills its own slot: the GPUs its end freed go to a trial
      // Kueue holds (or stay free for its successor), so the queue is no longer than before. The
      // waiting flags it counts are only as fresh as the reconciler's last pass: trials that ended
      // at the same moment may have taken every waiting trial's place already, and holding the
      // slot on that stale count left it empty until a later advance (the refill's tail).
      const ownEnded = next.trials.filter(
        (t) => only?.has(t.runId) && isTrialTerminal(t.phase) && !before.get(t.index)?.waitingForQuota,
      );
      const ownFreed = releasable(next.trials, request.parallelTrials, budget, ownEnded, false).length;
      const room = pressure
        ? Math.max(ownFreed, queueAhead(request.parallelTrials) - waiting + freed)
        : budget;
      if (room > 0) {
        // A trial's own advance (`only`: its run) releases its successor the moment it ends, and
        // slots held back earlier (trials recorded ended whose successor was not released); any
        // other advance (the reconciler's) the successors of trials already recorded as ended,
        // so the two do not race for a slot that just freed (see `releasable`).
        // A run whose own advance was cut off (or never came) counts as recorded once
        // OWN_RELEASE_MS passed since it ended.
        const overdue = (t: Trial) => {
          const endedAt = runs.get(t.runId)?.endedAt;
          return endedAt !== undefined && now.getTime() - Date.parse(endedAt) >= OWN_RELEASE_MS;
        };
        const ended = only
          ? next.trials.filter(
              (t) => isTrialTerminal(t.phase) && (only.has(t.runId) || recordedIndexes.has(t.index)),
            )
          : next.trials.filter(
              (t) => isTrialTerminal(t.phase) && (recordedIndexes.has(t.index) || overdue(t)),
            );
        // A trial's own advance refills its own slot first (its successor), then slots held before.
        const own = (i: number) =>
          only?.has(next.trials.find((t) => t.index === i - request.parallelTrials)?.runId ?? '') ? 0 : 1;
        const indexes = releasable(next.trials, request.parallelTrials, budget, ended, !only).sort(
          (a, b) => own(a) - own(b) || a - b,
        );
        for (const index of indexes.slice(0, room)) {
          // Trials still running: samplers keep new suggestions away from them (constant liar).
          const pending = inFlight()
            .filter((t) => t.phase !== 'Stopping')
            .map((t) => t.parameters);
          const trial = newTrial(index, history, pending);
          next.trials = [...next.trials, trial];
          release.push(trial);
        }
      }
    }
  }

  if (next.phase === 'Completing' && canStop) {
    const reason: StopReason = next.outcome?.phase === 'Cancelled' ? 'Cancelled' : 'SweepEnded';
    next.trials = next.trials.map((t) => {
      if (isTrialTerminal(t.phase)) return t;
      const stopping: Trial = { ...t, phase: 'Stopping', stopReason: t.stopReason ?? reason };
      stop.push({ trial: stopping, reason: stopping.stopReason as StopReason });
      return stopping;
    });
  } else if (canStop) {
    for (const t of next.trials) {
      if (t.phase === 'Stopping' && !stop.some((s) => s.trial.runId === t.runId)) {
        stop.push({
          trial: t,
          reason: t.stopReason ?? 'EarlyStopped',
          ...(t.message !== undefined ? { message: t.message } : {}),
        });
      }
    }
  }

  const changed = JSON.stringify(next) !== before;
  if (changed) next.updatedAt = at;
  return { record: next, changed, release, stop };
}

/**
 * The sweep is done once its outcome is decided, nothing is in flight, the best is published and
 * the chained full run (`then`) ended.
 */
export function readyToFinish(record: SweepRecord): boolean {
  if (record.phase !== 'Completing' || !record.outcome) return false;
  if (record.trials.some((t) => !isTrialTerminal(t.phase))) return false;
  if (record.chained && !isRunTerminal(record.chained.phase)) return false;
  return !needsPublish(record) && !needsChain(record);
}

/** The best trial's own model is published (not when `then` runs a full training that publishes). */
export function needsPublish(record: SweepRecord): boolean {
  return (
    record.outcome?.phase === 'Succeeded' &&
    record.request.publish === 'best' &&
    record.request.then === undefined &&
    record.best !== undefined &&
    record.published === undefined
  );
}

/**
 * The chained full run is still to be submitted or to end: the sweep succeeded with a best trial,
 * nothing else is in flight, `then` is asked for and its run has not ended.
 */
export function needsChain(record: SweepRecord): boolean {
  return (
    record.phase === 'Completing' &&
    record.outcome?.phase === 'Succeeded' &&
    record.request.then !== undefined &&
    record.best !== undefined &&
    record.trials.every((t) => isTrialTerminal(t.phase)) &&
    (record.chained === undefined || !isRunTerminal(record.chained.phase))
  );
}

/**
 * What the chained run's record says, folded into the sweep (undefined: nothing changed). A full
 * run that ended Failed or Cancelled fails the sweep (ChainedRunFailed): its model was not published.
 */
export function observeChained(
  record: SweepRecord,
  run: { phase: RunPhase; reason?: string; model?: ChainedRun['model'] },
): SweepRecord | undefined {
  const then = record.chained;
  if (!then || isRunTerminal(then.phase)) return undefined;
  if (then.phase === run.phase && then.reason === run.reason && !run.model) return undefined;
  const next: ChainedRun = {
    ...then,
    phase: run.phase,
    ...(run.reason !== undefined ? { reason: run.reason } : {}),
    ...(run.model ? { model: run.model } : {}),
  };
  const failed = run.phase === 'Failed' || run.phase === 'Cancelled';
  return {
    ...record,
    chained: next,
    ...(failed && record.outcome?.phase === 'Succeeded'
      ? {
          outcome: {
            phase: 'Failed' as const,
            reason: 'ChainedRunFailed',
            message: `the full run ${then.runId} of the best parameters ended ${run.phase}${run.reason ? ` (${run.reason})` : ''}; no model was published`,
          },
        }
      : {}),
  };
}

export function finish(record: SweepRecord, now: Date): SweepRecord {
  const outcome = record.outcome as SweepOutcome;
  const at = now.toISOString();
  const finalCounts: Record<string, number> = {};
  for (const t of record.trials) finalCounts[t.phase] = (finalCounts[t.phase] ?? 0) + 1;
  return {
    ...record,
    phase: outcome.phase,
    reason: outcome.reason,
    message: outcome.message,
    finalCounts,
    endedAt: at,
    updatedAt: at,
  };
}

/** Cancel: stop releasing and stop every trial in flight (a no-op once the sweep ended). */
export function requestCancel(record: SweepRecord, now: Date): SweepRecord | undefined {
  if (record.phase !== 'Running' && record.phase !== 'Completing') return undefined;
  if (record.outcome?.phase === 'Cancelled') return undefined;
  return {
    ...record,
    phase: 'Completing',
    outcome: { phase: 'Cancelled', reason: 'Cancelled', message: 'cancelled through the API' },
    updatedAt: now.toISOString(),
  };
}

export function isSweepFinal(phase: SweepPhase): boolean {
  return phase === 'Succeeded' || phase === 'Failed' || phase === 'Cancelled';
}
