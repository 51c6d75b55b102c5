import {
  AdmissionTimeoutError,
  InfrastructureFailureError,
  NotFoundError,
  RunEndedError,
  TrainingFailedError,
} from '../../errors.ts';
import { archiveTarget } from '../../logs/archive.ts';
import type { CallOptions } from '../../ports.ts';
import {
  type AttemptRecord,
  admissionPlan,
  attemptGpuHours,
  attemptJobName,
  nextAttempt as decideNextAttempt,
  jobGpus,
  nextShape,
  retryBudget,
} from '../../run/attempts.ts';
import { isInfrastructureFailure, isTerminal } from '../../run/phases.ts';
import { isPast, type JobRef } from '../job-ref.ts';
import type { NextAttemptDeps } from '../step-deps.ts';
import { type FailedState, failureOf } from './failure.ts';

/**
 * The state machine's NextAttempt task: a failed attempt recorded on the run, its job deleted, and
 * the run's next attempt (or the elastic fallback's next shape) — or the run's failure once the
 * retry budget (lib/run/attempts.ts) is spent.
 */

export function makeNextAttempt(deps: NextAttemptDeps) {
  const { records, clock } = deps;
  /**
   * An attempt failed (the ASL caught InfrastructureFailureError, UnschedulableError or
   * TrainingFailedError from a wait): record how it ended on the run record, delete its job, and
   * return the run for the next attempt — or, when the request's budget for that kind of failure is
   * spent (lib/run/attempts.ts), fail with the attempt's reason. Idempotent: a retry finds the
   * attempt recorded (its first end stands) and the job gone.
   */
  async function nextAttempt(input: { state: FailedState & { job?: JobRef } }, opts?: CallOptions) {
    const { state } = input;
    const { run } = state;
    const { reason, message } = failureOf(state);
    const ended = run.attempt ?? 1;
    const now = clock.now();
    const record = await records.get(run.runId, opts);
    if (!record) throw new NotFoundError(`run ${run.runId} has no record`);
    if (isTerminal(record.phase)) {
      throw new RunEndedError(`run ${run.runId} is already ${record.phase}; no new attempt`);
    }
    const own = record.attempts?.find((a) => a.attempt === ended);
    const startedAt = own?.startedAt ?? record.createdAt;
    const endedAt = own?.endedAt ?? now.toISOString();
    const gpuHours = attemptGpuHours(record.transitions, jobGpus(run.request), startedAt, endedAt);
    const endedAttempt: AttemptRecord = {
      attempt: ended,
      jobName: own?.jobName ?? attemptJobName(run.jobName, ended),
      startedAt,
      endedAt,
      cause: reason,
      message,
      gpuHours,
      gpuHoursLost: isInfrastructureFailure(reason) ? gpuHours : 0,
    };
    const previous = (record.attempts ?? []).filter((a) => a.attempt < ended);
    const step = run.fallback?.step ?? 0;
    const searchDeadlineAt = state.job?.admissionSearchDeadlineAt;
    // Not admitted in time: the elastic fallback's next shape, while the run's admission deadline allows.
    const decision =
      reason === 'AdmissionTimeout'
        ? nextShape(
            ended,
            step,
            admissionPlan(run.request),
            message,
            searchDeadlineAt === undefined || isPast(searchDeadlineAt, now),
          )
        : decideNextAttempt(ended, reason, message, previous, retryBudget(run.request));
    if (decision.kind === 'fail') {
      // The run ends: Cleanup deletes the job (and the reconciler, should Cleanup not manage to).
      await records.update(run.runId, { attempt: endedAttempt }, opts);
      const cause = JSON.stringify({ reason: decision.reason, message: decision.message });
      if (decision.reason === 'AdmissionTimeout') throw new AdmissionTimeoutError(decision.message);
      throw isInfrastructureFailure(decision.reason)
        ? new InfrastructureFailureError(cause, { reason: decision.reason })
        : new TrainingFailedError(cause);
    }
    if (state.job) {
      // The failed job goes before the next one is created: its pods, Workload or queue slot must not
      // linger. Its pods' logs are kept first (never throws, bounded in time).
      await deps.archiveLogs?.(archiveTarget(run, state.job), opts);
      await (await deps.gateway(state.job.cluster))
        .deleteJob(state.job.api, state.job.namespace, state.job.name, opts)
        .catch((err: unknown) => {
          if (!(err instanceof NotFoundError)) throw err;
        });
    }
    await records.update(
      run.runId,
      {
        phase: 'Pending',
        reason,
        message: `attempt ${decision.attempt} starts after attempt ${ended} ended (${reason}): ${message}`,
        attempt: endedAttempt,
      },
      opts,
    );
    deps.log?.({ level: 'INFO', msg: 'next attempt', runId: run.runId, attempt: decision.attempt, reason });
    // An infrastructure failure keeps the shape that was admitted, with a fresh admission deadline.
    const fallback =
      decision.step !== undefined
        ? { step: decision.step, ...(searchDeadlineAt ? { searchDeadlineAt } : {}) }
        : run.fallback
          ? { step: run.fallback.step }
          : undefined;
    const { fallback: _old, ...rest } = run;
    return { run: { ...rest, attempt: decision.attempt, ...(fallback ? { fallback } : {}) } };
  }

  return nextAttempt;
}
