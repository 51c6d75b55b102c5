import { POD_FAILURE_ERROR } from '../trainjob/pod-health.ts';
import type { JobView } from '../trainjob/status.ts';

export type Stage = 'admission' | 'completion';

/** What to do with a waiting task token, given what the job looks like now. */
export type Decision =
  | { kind: 'succeed' }
  | {
      kind: 'fail';
      error: 'TrainingFailedError' | 'JobVanishedError' | 'PodStartFailedError' | 'UnschedulableError';
      reason: string;
      message: string;
    }
  | { kind: 'wait' };

/**
 * The one rule for answering a wait, shared by the wait step (answers at once when it can), the
 * heartbeat fallback (one direct check) and the reconciler (answers on each tick).
 * Admission ends when the job runs (or already finished); completion ends when it finished.
 * A view with pod health applied (lib/trainjob/pod-health.ts) fails with the pod problem's error:
 * `PodStartFailedError` (image, config, crash loop) or `UnschedulableError` (past the grace).
 * A job that is not admitted yet keeps waiting until the admission deadline (Kueue's reason
 * goes into the run record) — an inadmissible workload can become admissible when an operator
 * raises the quota.
 */
export function decide(stage: Stage, view: JobView): Decision {
  if (view.phase === 'Failed') {
    const vanished = view.reason === 'JobVanished';
    const podError = POD_FAILURE_ERROR[view.reason as keyof typeof POD_FAILURE_ERROR] as
      | (typeof POD_FAILURE_ERROR)[keyof typeof POD_FAILURE_ERROR]
      | undefined;
    return {
      kind: 'fail',
      error: vanished ? 'JobVanishedError' : (podError ?? 'TrainingFailedError'),
      reason: view.reason ?? 'TrainingFailed',
      message:
        view.message ?? (vanished ? 'the job was deleted while the run waited for it' : 'the job failed'),
    };
  }
  if (view.phase === 'Succeeded') return { kind: 'succeed' };
  if (stage === 'admission' && view.phase === 'Running') return { kind: 'succeed' };
  return { kind: 'wait' };
}

/** The cause string sent with SendTaskFailure; `recordOutcome` reads it back. */
export function failureCause(d: Extract<Decision, { kind: 'fail' }>): string {
  return JSON.stringify({ reason: d.reason, message: d.message });
}
