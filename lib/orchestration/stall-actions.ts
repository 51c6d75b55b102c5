import { stallNote } from '../observability/events.ts';
import type { CallOptions, ClusterGateway, JobApi, WorkflowEngine } from '../ports.ts';
import { openStall } from '../run/record.ts';
import { ANNOTATION } from '../trainjob/labels.ts';
import type { K8sObject } from '../trainjob/types.ts';
import { decideStall } from './decide.ts';
import type { Log, NoteJob } from './job-notes.ts';
import type { Pacer } from './pacing.ts';
import type { TickReport } from './tick-report.ts';

/**
 * What the reconciler does about a stalled run once its record was read (decideStall decides):
 * when to look again, RunsStalled and a Kubernetes Event for a stall just opened, and with
 * restartOnStall failing the run's completion wait so the state machine starts the next attempt.
 */

/** How soon a stalled run that asks for a restart is looked at again when its job has no completion token yet. */
const RESTART_RECHECK_MS = 10_000;

/** A running job whose run's record the tick reads: what acting on a stall needs. */
export interface StallContext {
  cluster: string;
  gateway: ClusterGateway;
  api: JobApi;
  job: K8sObject;
  /** The waiting completion token, if any: failed (InfrastructureFailureError) on restartOnStall. */
  token?: string;
}

export interface StallActionDeps {
  workflow: WorkflowEngine;
  /** The pacer of the SendTask* calls. */
  answers: Pacer;
  log: Log;
  note: NoteJob;
  /** Divides every run's `stallAfterSeconds`. */
  stallScale: number;
  /** Per running job, when its record must next be read (ms); Infinity: no detection. */
  stallDue: Map<string, number>;
  /** The heartbeat times of waiting tokens: a failed token is forgotten. */
  beaten: Map<string, number>;
}

export function makeStallActions(deps: StallActionDeps) {
  const { answers, beaten, log, note, stallDue, stallScale } = deps;

  /**
   * After a running job's record was read (and written): when its stall is next due, and — for a
   * stall this write opened — a Kubernetes Event and RunsStalled; with restartOnStall, the run's
   * completion wait fails with InfrastructureFailureError (reason Stalled), as any stalled tick
   * finding the token still there does.
   */
  async function actOnStall(
    runId: string,
    record: Parameters<typeof decideStall>[0],
    opened: boolean,
    stall: StallContext,
    now: Date,
    report: TickReport,
    opts?: CallOptions,
  ) {
    const d = decideStall(record, now, stallScale);
    stallDue.set(runId, d.kind === 'off' ? Number.POSITIVE_INFINITY : d.dueAt);
    if (d.kind !== 'stalled') return;
    const fresh = opened && openStall(record)?.since === d.since;
    if (fresh) {
      report.stalled++;
      log({ level: 'WARN', msg: 'run stalled', runId, lastProgressAt: d.lastProgressAt, seconds: d.seconds });
    }
    const restart = d.restart && stall.token !== undefined;
    // Asked to restart, but the completion wait has not stored its token yet (it is between the two
    // waits): look again soon rather than a whole threshold later.
    if (d.restart && !restart)
      stallDue.set(runId, Math.min(d.dueAt, now.getTime() + RESTART_RECHECK_MS / stallScale));
    if (fresh || restart)
      await note(stall.cluster, stall.gateway, stall.job, stallNote(runId, d, restart), opts);
    if (!restart) return;
    const token = stall.token as string;
    try {
      await answers.take();
      const delivered = await deps.workflow.sendTaskFailure(
        token,
        'InfrastructureFailureError',
        JSON.stringify({ reason: 'Stalled', message: d.message }),
        opts,
      );
      report.failed++;
      beaten.delete(token);
      await stall.gateway.annotateJob(
        stall.api,
        stall.job.metadata.namespace ?? 'default',
        stall.job.metadata.name,
        { [ANNOTATION.completionToken]: null },
        opts,
      );
      log({
        level: 'INFO',
        msg: delivered ? 'restarting a stalled run' : 'cleared a stale task token',
        runId,
      });
    } catch (err) {
      // Tried again next tick (the stall stays open and the token on the job).
      stallDue.set(runId, 0);
      throw err;
    }
  }

  return actOnStall;
}

export type ActOnStall = ReturnType<typeof makeStallActions>;
