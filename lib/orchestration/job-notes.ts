import { ClusterAccessDeniedError } from '../errors.ts';
import { type JobNote, jobEvent } from '../observability/events.ts';
import type { CallOptions, Clock, ClusterGateway } from '../ports.ts';
import { LABEL } from '../trainjob/labels.ts';
import type { K8sObject } from '../trainjob/types.ts';

/**
 * The reconciler's Kubernetes Events on jobs (what Gantry decided: an answer, a preemption, a
 * stall, an orphan removed; lib/observability/events.ts says what each holds), and the reconciler's
 * log line type.
 */

/** One structured log line of the reconciler. */
export type Log = (line: Record<string, unknown>) => void;

/** Creates a Kubernetes Event on the job for `what`; nothing when `what` is undefined. */
export type NoteJob = (
  cluster: string,
  gateway: ClusterGateway,
  job: K8sObject,
  what: JobNote | undefined,
  opts?: CallOptions,
) => Promise<void>;

/**
 * The event writer of one reconciler. Best effort: a failure is logged and never fails the tick or
 * the decision it is about; a cluster whose RBAC refused an Event gets no more tries while the
 * reconciler lives.
 */
export function makeJobNotes(deps: { clock: Clock; log: Log }): NoteJob {
  /** Clusters whose RBAC refused an Event: no more tries there while this reconciler lives. */
  const eventsRefused = new Set<string>();
  let eventSeq = 0;

  return async function note(cluster, gateway, job, what, opts) {
    if (!what || !gateway.createEvent || eventsRefused.has(cluster)) return;
    const now = deps.clock.now();
    const suffix = `${now.getTime().toString(16)}${(eventSeq++ & 0xffff).toString(16).padStart(4, '0')}`;
    try {
      await gateway.createEvent(jobEvent(job, what, now, suffix), opts);
    } catch (err) {
      if (err instanceof ClusterAccessDeniedError) eventsRefused.add(cluster);
      deps.log({
        level: 'WARN',
        msg: 'job event not created',
        cluster,
        runId: job.metadata.labels?.[LABEL.runId],
        reason: what.reason,
        error: String(err),
      });
    }
  };
}
