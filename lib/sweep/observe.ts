import { mapLimit } from '../concurrency.ts';
import { gpuHoursOf } from '../observability/metrics.ts';
import type { CallOptions } from '../ports.ts';
import { isTerminal as isRunTerminal } from '../run/phases.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import { isTrialTerminal, observeTrial, type RunObservation, type SweepRecord } from './record.ts';
import { READ_CONCURRENCY } from './store.ts';

/**
 * What the run records of the open trials say. `seen` carries what an earlier attempt of the
 * same call read: a lost write race re-reads the sweep record, not every run record (a stale
 * observation only delays a release to the next advance; it never over-releases, because a
 * trial counts as in flight until a run record says it ended). `only` limits the reads to those
 * runs (a trial's own RecordOutcome looks at its own run).
 */
export async function observeRuns(
  records: Pick<RunRecords, 'get'>,
  record: SweepRecord,
  seen: Map<string, RunObservation | undefined>,
  only: ReadonlySet<string> | undefined,
  opts?: CallOptions,
) {
  const open = record.trials.filter(
    (t) => !isTrialTerminal(t.phase) && !seen.has(t.runId) && (only === undefined || only.has(t.runId)),
  );
  const runs = seen;
  await mapLimit(open, READ_CONCURRENCY, async (t) => {
    const run = await records.get(t.runId, opts);
    runs.set(t.runId, run ? observationOf(run) : undefined);
  });
  return { runs };
}

/** What a sweep takes from a trial's run record. */
export function observationOf(run: RunRecord): RunObservation {
  return {
    phase: run.phase,
    ...(run.reason !== undefined ? { reason: run.reason } : {}),
    ...(run.message !== undefined && isRunTerminal(run.phase) ? { message: run.message } : {}),
    ...(run.metrics ? { metrics: run.metrics } : {}),
    ...(run.progress?.percent !== undefined ? { percent: run.progress.percent } : {}),
    ...(run.phase === 'Pending' && run.admission ? { waitingForQuota: true } : {}),
    ...(isRunTerminal(run.phase)
      ? { endedAt: run.transitions.at(-1)?.at ?? run.updatedAt, gpuHours: gpuHoursOf(run) }
      : {}),
  };
}

/**
 * The sweep with each open trial's phase as its run record says now (the same mapping `step`
 * records): what a view shows, so a trial reads the same phase in the sweep as its run in the run
 * list, whatever advance last wrote the trial item. Nothing is decided or released here.
 */
export function observedTrials(
  record: SweepRecord,
  runs: ReadonlyMap<string, RunObservation | undefined>,
  now: Date,
): SweepRecord {
  const at = now.toISOString();
  const trials = record.trials.map((t) => {
    if (isTrialTerminal(t.phase)) return t;
    const run = runs.get(t.runId);
    return run ? observeTrial(record.request, t, run, at) : t;
  });
  return { ...record, trials };
}
