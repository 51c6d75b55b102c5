import type { CallOptions } from '../../ports.ts';
import type { RunRecord } from '../../run/record.ts';
import type { RunSpec } from '../../run/spec.ts';
import type { JobRef } from '../job-ref.ts';
import type { RecordOutcomeDeps } from '../step-deps.ts';
import { type FailedState, failureOf } from './failure.ts';

/**
 * The state machine's RecordOutcome task: the run's terminal record (Succeeded or Failed), told
 * once to `runs.ended`, and a sweep trial's end handed to its sweep within a budget.
 */

export function makeRecordOutcome(deps: RecordOutcomeDeps) {
  const { records } = deps;
  async function recordOutcome(
    input:
      | { outcome: 'Succeeded'; run: RunSpec; job: JobRef; artifacts?: unknown }
      | { outcome: 'Failed'; state: FailedState },
    opts?: CallOptions,
  ) {
    if (input.outcome === 'Succeeded') {
      const { record, changed } = await records.apply(
        input.run.runId,
        { phase: 'Succeeded', ...(input.job.metrics ? { metrics: input.job.metrics } : {}) },
        opts,
      );
      // The outcome's metrics once: a retried RecordOutcome finds the record ended and emits nothing.
      if (changed) await deps.runs?.ended(record);
      await trialEnded(input.run, record, opts);
      return { phase: record.phase };
    }
    const { reason, message } = failureOf(input.state);
    const { record, changed } = await records.apply(
      input.state.run.runId,
      { phase: 'Failed', reason, message },
      opts,
    );
    if (changed) await deps.runs?.ended(record);
    await trialEnded(input.state.run, record, opts);
    return { phase: record.phase, reason: record.reason };
  }

  /**
   * The sweep hook, bounded: it gets TRIAL_HOOK_BUDGET_MS of the step's time, and whatever
   * happens to it the run's outcome stands (the step must not time out or fail because a sweep
   * record is contended; the reconciler advances the sweep on its next tick).
   */
  async function trialEnded(run: RunSpec, ended: RunRecord, opts?: CallOptions) {
    if (!run.trial || !deps.onTrialEnded) return;
    const budget = AbortSignal.timeout(TRIAL_HOOK_BUDGET_MS);
    const signal = opts?.signal ? AbortSignal.any([opts.signal, budget]) : budget;
    try {
      await Promise.race([
        deps.onTrialEnded(run.trial, run.runId, { signal }, ended),
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => reject(signal.reason), { once: true });
        }),
      ]);
    } catch (err) {
      deps.log?.({
        level: 'WARN',
        msg: 'sweep not advanced; the reconciler will',
        runId: run.runId,
        sweepId: run.trial.sweepId,
        error: String(err),
      });
    }
  }

  return recordOutcome;
}

/** How long RecordOutcome may spend advancing a trial's sweep (its Lambda timeout is 30 s). */
export const TRIAL_HOOK_BUDGET_MS = 8000;
