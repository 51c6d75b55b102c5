import type { FailureReason } from '../../run/phases.ts';
import type { RunSpec } from '../../run/spec.ts';

/**
 * The failure path's state (`$.failure` or `$.error`) turned into the reason and message the run
 * record shows: the error names the state machine catches mapped to failure reasons. Pure.
 */

/** The state the failure path receives: `$.failure` from a timeout Pass, or `$.error` from a Catch. */
export interface FailedState {
  run: RunSpec;
  failure?: { reason: string; message: string };
  error?: { Error: string; Cause?: string };
}

const REASON_BY_ERROR: Record<string, FailureReason> = {
  TrainingFailedError: 'TrainingFailed',
  NotManagedByKueueError: 'NotManagedByKueue',
  PodStartFailedError: 'TrainingFailed',
  UnschedulableError: 'Unschedulable',
  InfrastructureFailureError: 'NodeLost',
  // Only NextAttempt sees it: AwaitAdmission's own timeout (AwaitCompletion's goes to RunDeadlineExceeded).
  'States.Timeout': 'AdmissionTimeout',
  JobVanishedError: 'JobVanished',
  AdmissionDeactivatedError: 'AdmissionDeactivated',
  AdmissionStalledError: 'AdmissionStalled',
  AdmissionTimeoutError: 'AdmissionTimeout',
  RunDeadlineExceededError: 'DeadlineExceeded',
  RuntimeNotFoundError: 'InvalidRuntime',
  UnsupportedApiError: 'InvalidRuntime',
  ValidationError: 'InvalidRequest',
  ClusterRejectedError: 'ClusterRejected',
  ClusterAccessDeniedError: 'ClusterRejected',
  JobNameConflictError: 'JobNameConflict',
  NoArtifactsError: 'NoArtifacts',
  ArtifactIntegrityError: 'ArtifactIntegrity',
  ArtifactConflictError: 'ArtifactConflict',
  ModelOwnedError: 'ModelOwned',
  ForbiddenError: 'Forbidden',
  ClusterUnavailableError: 'ClusterUnavailable',
};

/** Errors sent by SendTaskFailure whose cause names the precise reason (e.g. `ImagePullFailed`, `Stalled`). */
const REASON_FROM_CAUSE = new Set([
  'TrainingFailedError',
  'PodStartFailedError',
  'UnschedulableError',
  'InfrastructureFailureError',
]);

/** Turn the failure path's state into the reason and message the run record shows. */
export function failureOf(state: FailedState): { reason: string; message: string } {
  if (state.failure) return state.failure;
  const error = state.error?.Error ?? 'InternalError';
  const cause = state.error?.Cause ?? '';
  let message = error === 'States.Timeout' ? 'the job was not admitted before the admission deadline' : cause;
  let reason: string = REASON_BY_ERROR[error] ?? 'InternalError';
  // Errors sent by SendTaskFailure carry {reason, message} as JSON; thrown errors carry
  // {errorMessage} (Lambda's error shape) or plain text.
  try {
    let parsed = JSON.parse(cause) as { reason?: string; message?: string; errorMessage?: string };
    if (parsed.errorMessage) message = parsed.errorMessage;
    // The heartbeat fallback (checkJob) throws with the {reason, message} JSON as its message.
    if (parsed.errorMessage?.startsWith('{') && REASON_FROM_CAUSE.has(error)) {
      try {
        parsed = { ...parsed, ...(JSON.parse(parsed.errorMessage) as { reason?: string; message?: string }) };
      } catch {
        // not JSON after all: keep the text
      }
    }
    if (parsed.message) message = parsed.message;
    if (parsed.reason && REASON_FROM_CAUSE.has(error)) reason = parsed.reason;
  } catch {
    // plain-text cause: keep it as the message
  }
  return { reason, message: message || error };
}
