/** The phases of a run, as the API reports them, in the order a run moves through them. */
export const PHASES = [
  'Accepted',
  'Submitting',
  'Pending',
  'Running',
  'Publishing',
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

/** Failures of the infrastructure, not of the training: the same run may succeed when started again. */
export const INFRASTRUCTURE_REASONS = [
  'Preempted',
  'NodeLost',
  'Evicted',
  'Unschedulable',
  'Stalled',
] as const;

export function isInfrastructureFailure(reason: string | undefined): boolean {
  return reason !== undefined && (INFRASTRUCTURE_REASONS as readonly string[]).includes(reason);
}

export function isTerminal(phase: RunPhase): boolean {
  return TERMINAL_PHASES.includes(phase);
}

/**
 * Whether a record may move from `from` to `to`. Phases only move forward; a terminal phase is
 * final. Late or repeated updates (a reconciler tick that runs twice) therefore cannot undo progress.
 * The one way back: Kueue evicts (preempts) a running job and re-queues it, so `Running → Pending`
 * is allowed with reason `Preempted` (and from there forward to `Running` again when readmitted).
 */
export function canTransition(from: RunPhase, to: RunPhase, reason?: string): boolean {
  if (isTerminal(from)) return false;
  if (isTerminal(to)) return true;
  if (from === 'Running' && to === 'Pending') return reason === PREEMPTED;
  return PHASES.indexOf(to) >= PHASES.indexOf(from);
}

/** The reason of a `Running → Pending` move: the job was evicted and re-queued. */
export const PREEMPTED = 'Preempted';
