import { openStall, type RunRecord } from '../run/record.ts';
import { kueueFramework } from '../trainjob/kueue-kinds.ts';
import { LABEL } from '../trainjob/labels.ts';
import { POD_FAILURE_ERROR } from '../trainjob/pod-health.ts';
import type { JobView } from '../trainjob/status.ts';
import type { K8sObject } from '../trainjob/types.ts';

export type Stage = 'admission' | 'completion';

/** What to do with a waiting task token, given what the job looks like now. */
export type FailError =
  | 'TrainingFailedError'
  | 'JobVanishedError'
  | 'AdmissionDeactivatedError'
  | 'AdmissionStalledError'
  | 'NotManagedByKueueError'
  | 'PodStartFailedError'
  | 'UnschedulableError'
  | 'InfrastructureFailureError';

export type Decision =
  | { kind: 'succeed' }
  | { kind: 'fail'; error: FailError; reason: string; message: string }
  | { kind: 'wait' };

/** How long a job may stay suspended after Kueue admitted it before the run fails (AdmissionStalled). */
export const ADMITTED_SUSPENDED_GRACE_SECONDS = 120;

export interface DecideOptions {
  now: Date;
  /** Default ADMITTED_SUSPENDED_GRACE_SECONDS. */
  admittedSuspendedGraceSeconds?: number;
}

const ERROR_BY_REASON: Record<string, FailError> = {
  JobVanished: 'JobVanishedError',
  AdmissionDeactivated: 'AdmissionDeactivatedError',
  // Failures of the infrastructure the job's pods show (lib/trainjob/disruption.ts): a new attempt.
  NodeLost: 'InfrastructureFailureError',
  Evicted: 'InfrastructureFailureError',
  Preempted: 'InfrastructureFailureError',
  Stalled: 'InfrastructureFailureError',
};

/**
 * The one rule for answering a wait, shared by the wait step (answers at once when it can), the
 * heartbeat fallback (one direct check) and the reconciler (answers on each tick).
 * Admission ends when the job runs (or already finished); completion ends when it finished.
 * A failed job whose pods show a disruption (lib/trainjob/disruption.ts: node lost, eviction,
 * preemption without requeue) fails with `InfrastructureFailureError`: the state machine starts a
 * new attempt. A view with pod health applied (lib/trainjob/pod-health.ts) fails with the pod problem's error:
 * `PodStartFailedError` (image, config, crash loop) or `UnschedulableError` (past the grace).
 * A job that is not admitted yet keeps waiting until the admission deadline (Kueue's reason
 * goes into the run record) — an inadmissible workload can become admissible when an operator
 * raises the quota. A preempted job (Pending/Preempted during completion) keeps waiting too: Kueue
 * re-queues it. Two Kueue outcomes fail at once: a deactivated Workload (AdmissionDeactivatedError)
 * and, given `opts.now`, a job still suspended past a grace after Kueue admitted it
 * (AdmissionStalledError).
 */
export function decide(stage: Stage, view: JobView, opts?: DecideOptions): Decision {
  if (view.phase === 'Failed') {
    const vanished = view.reason === 'JobVanished';
    const podError = POD_FAILURE_ERROR[view.reason as keyof typeof POD_FAILURE_ERROR] as
      | (typeof POD_FAILURE_ERROR)[keyof typeof POD_FAILURE_ERROR]
      | undefined;
    return {
      kind: 'fail',
      error: ERROR_BY_REASON[view.reason ?? ''] ?? podError ?? 'TrainingFailedError',
      reason: view.reason ?? 'TrainingFailed',
      message:
        view.message ?? (vanished ? 'the job was deleted while the run waited for it' : 'the job failed'),
    };
  }
  if (view.phase === 'Succeeded') return { kind: 'succeed' };
  if (stage === 'admission' && view.phase === 'Running') return { kind: 'succeed' };
  const stalled = opts && stalledFor(view, opts);
  if (stalled !== undefined) {
    return {
      kind: 'fail',
      error: 'AdmissionStalledError',
      reason: 'AdmissionStalled',
      message: `Kueue admitted the Workload at ${view.admittedSuspendedSince} but the job is still suspended after ${stalled} s: Kueue and the Trainer do not match (Kueue >= 0.17 needs Trainer >= 2.2, whose runtimePatches it uses to start a TrainJob; with Trainer 2.1 it admits and never unsuspends, kueue#11931)`,
    };
  }
  return { kind: 'wait' };
}

/** Whole seconds the job has stayed suspended since admission, when past the grace; else undefined. */
function stalledFor(view: JobView, opts: DecideOptions): number | undefined {
  if (view.phase !== 'Pending' || view.admittedSuspendedSince === undefined) return undefined;
  const since = Date.parse(view.admittedSuspendedSince);
  if (!Number.isFinite(since)) return undefined;
  const grace = opts.admittedSuspendedGraceSeconds ?? ADMITTED_SUSPENDED_GRACE_SECONDS;
  const seconds = Math.floor((opts.now.getTime() - since) / 1000);
  return seconds > grace ? seconds : undefined;
}

/**
 * A job Gantry queued (it carries Kueue's queue-name label) that is still waiting and has no
 * admission gate `graceSeconds` after its creation: Kueue creates the Workload within seconds, so
 * it never will — Kueue does not manage the kind there (its integration is off, as Kueue v0.19's
 * default configuration leaves the Training Operator v1 ones), or the namespace is outside Kueue's
 * managed namespaces, or Kueue is not installed. Waiting for the admission deadline would only hold
 * the run; this fails it now, naming the cluster and the kind. Undefined when the rule does not apply.
 */
export function decideMissingWorkload(
  job: K8sObject,
  view: JobView,
  at: { cluster: string; now: Date; graceSeconds: number },
): Extract<Decision, { kind: 'fail' }> | undefined {
  const queue = job.metadata.labels?.[LABEL.kueueQueue];
  if (!queue || view.phase !== 'Pending' || view.admission.source !== 'none') return undefined;
  const created = Date.parse(job.metadata.creationTimestamp ?? '');
  if (!Number.isFinite(created) || at.now.getTime() - created < at.graceSeconds * 1000) return undefined;
  const kind = job.kind;
  const framework = kueueFramework(kind);
  const why =
    framework === undefined
      ? `Kueue has no integration for the Training Operator v1 ${kind} (its kubeflow.org/mpijob is the MPI Operator v2beta1 MPIJob)`
      : `Kueue there does not manage ${kind} (integration ${framework} not enabled — Kueue v0.19's default configuration leaves the Training Operator v1 integrations off), or namespace ${job.metadata.namespace ?? 'default'} is outside Kueue's managed namespaces`;
  return {
    kind: 'fail',
    error: 'NotManagedByKueueError',
    reason: 'NotManagedByKueue',
    message: `no Kueue Workload appeared for ${kind} ${job.metadata.namespace ?? 'default'}/${job.metadata.name} (queue ${queue}) on cluster ${at.cluster} within ${at.graceSeconds} s, so it would never be admitted: ${why}; list only the kinds Kueue manages in the cluster's kueueManagedKinds`,
  };
}

/** The cause string sent with SendTaskFailure; `recordOutcome` reads it back. */
export function failureCause(d: Extract<Decision, { kind: 'fail' }>): string {
  return JSON.stringify({ reason: d.reason, message: d.message });
}

/**
 * Stall detection for one run record (`stallAfterSeconds`): a Running run is stalled when
 * now − max(last report, when it last went Running) ≥ stallAfterSeconds. `dueAt` (ms) is the first
 * time the run could be found stalled given what the record says, so the reconciler reads the record
 * again only then (a steady tick reads nothing): the last report plus the threshold, or — for a run
 * already stalled — now plus the threshold (a report clears the stall in the record, and the next
 * stall cannot come sooner than a threshold after it). `timeScale` divides the threshold (the
 * embedded default's time compression; 1 on AWS).
 */
export type StallDecision =
  /** No detection: not Running, or no stallAfterSeconds. */
  | { kind: 'off' }
  | { kind: 'progressing'; dueAt: number }
  | {
      kind: 'stalled';
      /** true: found now (open a stall); false: already open in the record. */
      fresh: boolean;
      since: string;
      lastProgressAt: string;
      seconds: number;
      restart: boolean;
      message: string;
      dueAt: number;
    };

type StallInput = Pick<RunRecord, 'phase' | 'transitions' | 'lastProgressAt' | 'stalls'> & {
  spec: { request: { stallAfterSeconds?: number | undefined; restartOnStall?: boolean | undefined } };
};

export function decideStall(record: StallInput, now: Date, timeScale = 1): StallDecision {
  // A record written before stall detection, or a partial one, has no detection.
  const request: Partial<StallInput['spec']['request']> = record.spec?.request ?? {};
  const after = request.stallAfterSeconds;
  if (record.phase !== 'Running' || after === undefined) return { kind: 'off' };
  const thresholdMs = (after * 1000) / timeScale;
  const restart = request.restartOnStall === true;
  const open = openStall(record);
  const nowMs = now.getTime();
  const message = (lastProgressAt: string, seconds: number) =>
    `no progress or metric reported for ${seconds} s (since ${lastProgressAt}; stallAfterSeconds ${after})${restart ? ': restarting the job (restartOnStall)' : ''}`;
  if (open) {
    const seconds = Math.floor((nowMs - Date.parse(open.lastProgressAt)) / 1000);
    return {
      kind: 'stalled',
      fresh: false,
      since: open.since,
      lastProgressAt: open.lastProgressAt,
      seconds,
      restart,
      message: message(open.lastProgressAt, seconds),
      dueAt: nowMs + thresholdMs,
    };
  }
  let running: string | undefined;
  for (const t of record.transitions) if (t.phase === 'Running') running = t.at;
  const base = Math.max(Date.parse(running ?? '') || 0, Date.parse(record.lastProgressAt ?? '') || 0);
  // Nothing to count from (a record without its Running change): no detection, rather than a read per tick.
  if (base === 0) return { kind: 'off' };
  if (nowMs - base < thresholdMs) return { kind: 'progressing', dueAt: base + thresholdMs };
  const lastProgressAt = new Date(base).toISOString();
  const seconds = Math.floor((nowMs - base) / 1000);
  return {
    kind: 'stalled',
    fresh: true,
    since: now.toISOString(),
    lastProgressAt,
    seconds,
    restart,
    message: message(lastProgressAt, seconds),
    dueAt: nowMs + thresholdMs,
  };
}
