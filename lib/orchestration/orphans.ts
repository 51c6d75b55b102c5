import { NotFoundError } from '../errors.ts';
import { type Backoff, retryDelaySeconds } from '../events/backoff.ts';
import type { ArchiveJobLogs } from '../logs/archive.ts';
import { orphanNote } from '../observability/events.ts';
import type { CallOptions, ClusterGateway, JobApi, WorkflowEngine } from '../ports.ts';
import type { RunRecords } from '../run/records.ts';
import { LABEL } from '../trainjob/labels.ts';
import type { K8sObject } from '../trainjob/types.ts';
import type { Log, NoteJob } from './job-notes.ts';
import type { Pacer } from './pacing.ts';
import type { TickReport } from './tick-report.ts';

/**
 * Orphan removal: a job no task token waits on, past its grace, is deleted once its execution is
 * no longer RUNNING. An ABORTED execution's run (a cancel) is recorded Cancelling first (its job
 * still exists and holds its quota), and Cancelled once the job's deletion went through. A failed
 * deletion is tried again with back-off (DELETE_BACKOFF), not at every pass: a cluster that refuses
 * deletes is not hammered, and the run stays Cancelling meanwhile.
 */

/** Back-off of a job's failed deletions: 1 s after the first, doubling, at most a minute apart. */
export const DELETE_BACKOFF: Backoff = { baseSeconds: 1, maxSeconds: 60 };
/** Jobs whose failed deletions are remembered at once (the oldest forgotten first). */
const MAX_REMEMBERED = 10_000;

export interface OrphanDeps {
  workflow: WorkflowEngine;
  records: RunRecords;
  /** The pacer of the DescribeExecution calls. */
  describe: Pacer;
  log: Log;
  note: NoteJob;
  /** A job with no waiting token is only an orphan after this long (ms). */
  graceMs: number;
  /** Archives the job's pod logs before it is deleted (lib/logs/archive.ts); never throws. */
  archiveLogs?: ArchiveJobLogs;
}

export function makeOrphanRemoval(deps: OrphanDeps) {
  const { describe, graceMs, log, note } = deps;
  /** Per job (cluster/namespace/name): its failed deletions and when the next may be tried (ms). */
  const failedDeletes = new Map<string, { failures: number; nextAt: number }>();

  return async function removeIfOrphan(
    cluster: string,
    gateway: ClusterGateway,
    api: JobApi,
    job: K8sObject,
    runId: string,
    now: Date,
    report: TickReport,
    opts?: CallOptions,
    /** An evaluation job (LABEL.evaluationOf): deleted like the run's, the run's record left alone. */
    as: { evaluation?: boolean } = {},
  ) {
    const created = Date.parse(job.metadata.creationTimestamp ?? '');
    if (Number.isFinite(created) && now.getTime() - created < graceMs) return;
    const key = `${cluster}/${job.metadata.namespace ?? 'default'}/${job.metadata.name}`;
    const failed = failedDeletes.get(key);
    if (failed && now.getTime() < failed.nextAt) return;
    await describe.take();
    const status = await deps.workflow.status(runId, opts);
    if (status === 'RUNNING') return;
    const recordIgnoringMissing = (phase: 'Cancelling' | 'Cancelled') =>
      deps.records.update(runId, { phase, reason: 'Cancelled' }, opts).catch((err) => {
        if (!(err instanceof NotFoundError)) throw err;
      });
    if (status === 'ABORTED' && !as.evaluation) {
      // The record first: if writing it fails, the job stays and the next tick tries both again
      // (deleting first left a run Running for good when the write failed). Cancelling, not
      // Cancelled: the job exists until the delete below goes through. A job without a record is
      // still deleted.
      await recordIgnoringMissing('Cancelling');
    }
    // Once: a job already being deleted (background propagation) is listed again until it is gone.
    if (!job.metadata.deletionTimestamp) {
      await note(cluster, gateway, job, orphanNote(runId, status), opts);
      // A succeeded run's job ends here: its pods' logs are kept first (never throws, bounded in time).
      if (!as.evaluation)
        await deps.archiveLogs?.(
          {
            cluster,
            namespace: job.metadata.namespace ?? 'default',
            kind: api.kind,
            name: job.metadata.name,
            runId,
            attempt: Number(job.metadata.labels?.[LABEL.attempt] ?? 1) || 1,
          },
          opts,
        );
    }
    try {
      await gateway.deleteJob(api, job.metadata.namespace ?? 'default', job.metadata.name, opts);
    } catch (err) {
      const failures = (failed?.failures ?? 0) + 1;
      failedDeletes.delete(key);
      failedDeletes.set(key, {
        failures,
        nextAt: now.getTime() + retryDelaySeconds(failures, DELETE_BACKOFF) * 1000,
      });
      if (failedDeletes.size > MAX_REMEMBERED)
        failedDeletes.delete(failedDeletes.keys().next().value as string);
      throw err;
    }
    failedDeletes.delete(key);
    if (status === 'ABORTED' && !as.evaluation) {
      await recordIgnoringMissing('Cancelled');
      report.cancelled++;
    }
    report.orphansDeleted++;
    log({ level: 'INFO', msg: 'deleted a job whose execution ended', runId, execution: status ?? 'none' });
  };
}
