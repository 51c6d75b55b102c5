import { type ArchiveJobLogs, attemptOfJob } from '../logs/archive.ts';
import type { CallOptions, Clock, WorkflowEngine } from '../ports.ts';
import { fingerprintOf } from '../run/ids.ts';
import { type JobLocation, newRecord, type RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunSpec } from '../run/spec.ts';
import type { StopReason } from './record.ts';

const MESSAGES: Record<StopReason, string> = {
  EarlyStopped:
    'stopped early: worse than the median of completed trials at the same progress (median stopping rule)',
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
  return async function stopRun(spec: RunSpec, reason: StopReason, opts?: CallOptions): Promise<void> {
    await deps.workflow.stop(spec.runId, MESSAGES[reason], opts);
    if (!(await deps.records.get(spec.runId, opts))) {
      await deps.records.create(newRecord(spec, fingerprintOf(spec.request), deps.clock.now()), opts);
    }
    const { record: after, changed } = await deps.records.apply(
      spec.runId,
      { phase: 'Cancelled', reason, message: MESSAGES[reason] },
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
