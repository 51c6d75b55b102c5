import { type ArchiveJobLogs, attemptOfJob } from '../logs/archive.ts';
import type { CallOptions, Clock, WorkflowEngine } from '../ports.ts';
import { fingerprintOf } from '../run/ids.ts';
import { isTerminal } from '../run/phases.ts';
import { type JobLocation, newRecord, type RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunSpec } from '../run/spec.ts';
import type { StopReason } from './record.ts';

const MESSAGES: Record<StopReason, string> = {
  // The pruner's own message comes with the stop (record.ts pruneMessage); this is the fallback.
  EarlyStopped: "stopped early by the sweep's early-stopping rule",
  SweepEnded: 'the sweep ended (goal reached, trial budget spent or too many failures)',
  Cancelled: 'the sweep was cancelled',
};

/**
 * Stop a trial's run: stop its execution, end its record Cancelled (with the reason), delete its
 * job. A trial still on the queue gets its record now, already Cancelled, so the consumer never
 * starts it. A run that ended first keeps its phase (a finished trial is not undone). A job
 * created after this is an orphan of an aborted execution, which the reconciler deletes.
 */
export function makeRunStopper(deps: {
  workflow: WorkflowEngine;
  records: RunRecords;
  clock: Clock;
  deleteJob: (job: JobLocation, opts?: CallOptions) => Promise<void>;
  /** Called once when this call ended the run (the run's outcome metrics). */
  onEnded?: (record: RunRecord) => void | Promise<void>;
  /** Archives the job's pod logs before it is deleted (lib/logs/archive.ts); never throws. */
  archiveLogs?: ArchiveJobLogs;
}) {
  return async function stopRun(
    spec: RunSpec,
    reason: StopReason,
    opts?: CallOptions,
    message: string = MESSAGES[reason],
  ): Promise<void> {
    const current = await deps.records.get(spec.runId, opts);
    // Pruning never lands on a run that reached its end (100 % reported, or Publishing): its
    // result is kept, and the trial is recorded as it ends. The sweep's end and a cancel still stop it.
    if (reason === 'EarlyStopped' && current && reachedItsEnd(current)) return;
    await deps.workflow.stop(spec.runId, message, opts);
    if (!current) {
      await deps.records.create(newRecord(spec, fingerprintOf(spec.request), deps.clock.now()), opts);
    }
    const { record: after, changed } = await deps.records.apply(
      spec.runId,
      { phase: 'Cancelled', reason, message },
      opts,
    );
    if (changed && after.phase === 'Cancelled') await deps.onEnded?.(after);
    if (after.phase === 'Cancelled' && after.job) {
      const attempt = attemptOfJob(after.spec.jobName, after.job.name);
      await deps.archiveLogs?.({ ...after.job, runId: after.runId, attempt }, opts);
      await deps.deleteJob(after.job, opts);
    }
  };
}

/**
 * The run has its result, or is about to: Publishing, Succeeded or Failed, or in flight with its
 * last report at 100 %. A Cancelled run is not: a repeated stop finishes its job's deletion.
 */
export function reachedItsEnd(run: RunRecord): boolean {
  if (run.phase === 'Cancelled') return false;
  return run.phase === 'Publishing' || isTerminal(run.phase) || (run.progress?.percent ?? 0) >= 100;
}
