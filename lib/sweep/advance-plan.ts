import { isTerminal as isRunTerminal } from '../run/phases.ts';
import type { RunObservation, StepResult, SweepRecord, Trial } from './record.ts';
import { REQUEUE_AFTER_MS } from './store.ts';

/** Pure parts of an advance's plan (sweeps.ts `planAdvance`): which runs it takes, what it may do. */

/**
 * `step`'s decision fitted to the caller: only a caller that can release (`canQueue`) may grow
 * the trial list or release a retry; others leave them for the next advance. Trials released
 * again after an infrastructure failure (a new run id, same index) are sent once their item is
 * written; a released trial whose run never appeared is sent again (REQUEUE_AFTER_MS).
 */
export function fitToCaps(
  record: SweepRecord,
  result: StepResult,
  runs: ReadonlyMap<string, RunObservation | undefined>,
  canQueue: boolean,
  now: Date,
  at: string,
): { next: SweepRecord; release: Trial[]; retried: Trial[]; requeue: Trial[] } {
  let next = result.record;
  let release = result.release;
  if (!canQueue && release.length > 0) {
    const left = new Set(release);
    next = { ...next, trials: next.trials.filter((t) => !left.has(t)) };
    release = [];
  }
  const readBefore = new Map(record.trials.map((t) => [t.index, t]));
  const isRetry = (t: Trial) => {
    const old = readBefore.get(t.index);
    return old !== undefined && old.runId !== t.runId;
  };
  if (!canQueue && next.trials.some(isRetry)) {
    next = {
      ...next,
      trials: next.trials.map((t) => (isRetry(t) ? (readBefore.get(t.index) as Trial) : t)),
    };
  }
  const retried = canQueue ? next.trials.filter(isRetry) : [];
  let requeue = canQueue
    ? next.trials.filter(
        (t) =>
          t.phase === 'Queued' &&
          runs.has(t.runId) &&
          runs.get(t.runId) === undefined &&
          !release.includes(t) &&
          now.getTime() - Date.parse(t.releasedAt) > REQUEUE_AFTER_MS,
      )
    : [];
  if (requeue.length > 0) {
    const again = new Set(requeue);
    requeue = requeue.map((t) => ({ ...t, releasedAt: at }));
    const byIndex = new Map(requeue.map((t) => [t.index, t]));
    next = {
      ...next,
      trials: next.trials.map((t) => (again.has(t) ? (byIndex.get(t.index) as Trial) : t)),
    };
  }
  return { next, release, retried, requeue };
}

/** The own runs' observations, and the others' only while they are in flight. */
export function inFlightOrOwn(
  runs: ReadonlyMap<string, RunObservation | undefined>,
  only: ReadonlySet<string>,
): Map<string, RunObservation | undefined> {
  return new Map(
    [...runs].filter(([runId, run]) => only.has(runId) || (run !== undefined && !isRunTerminal(run.phase))),
  );
}
