import { NotFoundError } from '../errors.ts';
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
 * no longer RUNNING; an ABORTED execution's run is recorded Cancelled first.
 */

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

  return async function removeIfOrphan(
    cluster: string,
    gateway: ClusterGateway,
    api: JobApi,
    job: K8sObject,
    runId: string,
    now: Date,
    report: TickReport,
    opts?: CallOptions,
  ) {
    const created = Date.parse(job.metadata.creationTimestamp ?? '');
    if (Number.isFinite(created) && now.getTime() - created < graceMs) return;
    await describe.take();
    const status = await deps.workflow.status(runId, opts);
    if (status === 'RUNNING') return;
    if (status === 'ABORTED') {
      // The record first: if writing it fails, the job stays and the next tick tries both again
      // (deleting first left a run Running for good when the write failed, and let a reader see
      // the job gone before the run was Cancelled). A job without a record is still deleted.
      await deps.records.update(runId, { phase: 'Cancelled', reason: 'Cancelled' }, opts).catch((err) => {
        if (!(err instanceof NotFoundError)) throw err;
      });
      report.cancelled++;
    }
    // Once: a job already being deleted (background propagation) is listed again until it is gone.
    if (!job.metadata.deletionTimestamp) {
      await note(cluster, gateway, job, orphanNote(runId, status), opts);
      // A succeeded run's job ends here: its pods' logs are kept first (never throws, bounded in time).
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
    await gateway.deleteJob(api, job.metadata.namespace ?? 'default', job.metadata.name, opts);
    report.orphansDeleted++;
    log({ level: 'INFO', msg: 'deleted a job whose execution ended', runId, execution: status ?? 'none' });
  };
}
