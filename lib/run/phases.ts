/**
 * The phases of a run, as the API reports them, in the order a run moves through them.
 * `Cancelling`: the run was cancelled (its execution stopped) and its job still exists, holding
 * its quota, until its deletion goes through (the cancel call's, or the reconciler's retries);
 * then `Cancelled`.
 */
export const PHASES = [
  'Accepted',
  'Submitting',
  'Pending',
  'Running',
  'Publishing',
  'Cancelling',
  'Succeeded',
  'Failed',
  'Cancelled',
] as const;
export type RunPhase = (typeof PHASES)[number];

export const TERMINAL_PHASES: readonly RunPhase[] = ['Succeeded', 'Failed', 'Cancelled'];

/** Why a run failed. Stable strings: API clients and dashboards match on them. */
export const FAILURE_REASONS = [
  'TrainingFailed',
  'AdmissionTimeout',
  'DeadlineExceeded',
  'InvalidRuntime',
  'InvalidRequest',
  'ClusterRejected',
  'ClusterUnavailable',
  'JobNameConflict',
  'JobVanished',
  'NoArtifacts',
  'ArtifactIntegrity',
  'ArtifactConflict',
  'ModelOwned',
  'Forbidden',
  'Preempted',
  /**
   * Kueue evicted the job `podsReadyTimeoutLimit` times because its pods were not all ready within
   * waitForPodsReady's timeout (Kueue requeues it forever by default).
   */
  'PodsReadyTimeout',
  /** A node of the job was lost (NotReady/unreachable or deleted): its pods were deleted by the taint manager or pod GC. */
  'NodeLost',
  /** A pod of the job was evicted (Eviction API / drain, spot interruption handler, kubelet node pressure). */
  'Evicted',
  /** The job's progress and metrics stopped advancing (stall detection). */
  'Stalled',
  'AdmissionDeactivated',
  'AdmissionStalled',
  'NotManagedByKueue',
  'ImagePullFailed',
  'ContainerConfigError',
  'CrashLoopBackOff',
  'Unschedulable',
  'NodeLost',
  'Evicted',
  /** A running job reported no progress or metric for its `stallAfterSeconds` and the request asked to restart it. */
  'Stalled',
  'InternalError',
  /** The embedded default was stopped while the run was in flight (local/restart.ts). */
  'LocalRestart',
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

export function isTerminal(phase: RunPhase): boolean {
  return TERMINAL_PHASES.includes(phase);
}

/**
 * Whether a record may move from `from` to `to`. Phases only move forward; a terminal phase is
 * final. Late or repeated updates (a reconciler tick that runs twice) therefore cannot undo progress.
 * The one way back: Kueue evicts a running job and re-queues it, so `Running → Pending` is allowed
 * with Kueue's eviction reason (`Preempted`, `PodsReadyTimeout`, …; see KUEUE_EVICTION_REASONS) and
 * from there forward to `Running` again when readmitted.
 */
export function canTransition(from: RunPhase, to: RunPhase, reason?: string): boolean {
  if (isTerminal(from)) return false;
  if (isTerminal(to)) return true;
  if (from === 'Running' && to === 'Pending') return reason !== undefined && isRequeueReason(reason);
  // A cancelled run's job is being deleted: nothing but its end is recorded from there.
  if (from === 'Cancelling') return false;
  return PHASES.indexOf(to) >= PHASES.indexOf(from);
}

/** The reason of a `Running → Pending` move after a Kueue preemption: the job was evicted and re-queued. */
export const PREEMPTED = 'Preempted';

/**
 * The reasons of Kueue's `Evicted` condition (v0.19, apis/kueue/v1beta2 `WorkloadEvictedBy…`) that
 * requeue the job: a run shows them as they are while it waits again. `Deactivated…` evictions are
 * not here: they end the run (AdmissionDeactivated).
 */
export const KUEUE_EVICTION_REASONS = [
  'Preempted',
  /** waitForPodsReady: the pods were not all ready within the timeout (a slow initializer, a slow pull). */
  'PodsReadyTimeout',
  /** An admission check (e.g. ProvisioningRequest) went to Retry. */
  'AdmissionCheck',
  'ClusterQueueStopped',
  'LocalQueueStopped',
  /** Topology-aware scheduling found no replacement for failed nodes. */
  'NodeFailures',
  'FlavorMigration',
  /** MultiKueue: the worker cluster evicted it. */
  'EvictedOnManagerCluster',
] as const;
export type KueueEvictionReason = (typeof KUEUE_EVICTION_REASONS)[number];

export function isKueueEviction(reason: string | undefined): reason is KueueEvictionReason {
  return (KUEUE_EVICTION_REASONS as readonly string[]).includes(reason ?? '');
}

/**
 * Failures of the infrastructure, not of the training code: the run starts a new attempt of its job
 * (same run id and checkpoint URI) within its `retry.infrastructure` budget. `Preempted` here is a
 * preemption that failed the job (no requeue: a gang scheduler without Kueue); a Kueue eviction
 * re-queues the same job and is no attempt. `Unschedulable` is an admitted job whose pods could not
 * be placed past the grace; `Stalled` a job that stopped making progress.
 */
export const INFRASTRUCTURE_REASONS = [
  'NodeLost',
  'Evicted',
  'Preempted',
  'Unschedulable',
  'Stalled',
] as const satisfies readonly FailureReason[];
export type InfrastructureReason = (typeof INFRASTRUCTURE_REASONS)[number];

export function isInfrastructureFailure(reason: string | undefined): reason is InfrastructureReason {
  return (INFRASTRUCTURE_REASONS as readonly string[]).includes(reason ?? '');
}

/**
 * Reasons a running run goes back to Pending: a Kueue eviction (the same job re-queued: preemption,
 * PodsReadyTimeout, a stopped queue, …) or the end of an attempt whose next attempt waits for
 * admission (an infrastructure failure, or a code failure the request asked to retry, or a restart
 * of the embedded default, which resumes every run it finds in flight as a new attempt:
 * local/restart.ts).
 */
export function isRequeueReason(reason: string | undefined): boolean {
  return (
    isKueueEviction(reason) ||
    reason === 'TrainingFailed' ||
    reason === 'LocalRestart' ||
    isInfrastructureFailure(reason)
  );
}
