import {
  AdmissionDeactivatedError,
  AdmissionStalledError,
  AdmissionTimeoutError,
  ClusterAccessDeniedError,
  InfrastructureFailureError,
  JobVanishedError,
  NotManagedByKueueError,
  PodStartFailedError,
  RunDeadlineExceededError,
  TrainingFailedError,
  UnschedulableError,
} from '../../errors.ts';
import type { CallOptions } from '../../ports.ts';
import { attemptOf } from '../../trainjob/disruption.ts';
import { ANNOTATION, LABEL } from '../../trainjob/labels.ts';
import {
  DEFAULT_POD_HEALTH,
  type PodHealthOptions,
  podHealth,
  startErrorSighting,
  withPodHealth,
} from '../../trainjob/pod-health.ts';
import { toRunPhase } from '../../trainjob/status.ts';
import { decide, failureCause, type Stage } from '../decide.ts';
import { isPast, type JobRef, refreshRef } from '../job-ref.ts';
import { withDisruptionEvidence } from '../pod-events.ts';
import type { AwaitJobDeps, CheckJobDeps, RunInput, StepDeps } from '../step-deps.ts';

/**
 * The state machine's two waits on a job: AwaitJob (the `.waitForTaskToken` task that stores the
 * token for the reconciler and answers at once when the job is already past the stage) and
 * CheckJob (the heartbeat fallback that looks once), both reading the job as the reconciler does.
 */

function decideOptionsOf(deps: Pick<StepDeps, 'admittedSuspendedGraceSeconds'>) {
  return (now: Date) => ({
    now,
    ...(deps.admittedSuspendedGraceSeconds !== undefined
      ? { admittedSuspendedGraceSeconds: deps.admittedSuspendedGraceSeconds }
      : {}),
  });
}

function jobObserver(deps: Pick<StepDeps, 'gateway' | 'clock' | 'podHealth'>) {
  const { clock } = deps;
  const healthOptions: PodHealthOptions = { ...DEFAULT_POD_HEALTH, ...deps.podHealth };
  /** The job, its gate and the run's pods, read as the reconciler reads them (one LIST of the run's pods). */
  async function observe(ref: JobRef, runId: string, opts?: CallOptions) {
    const gateway = await deps.gateway(ref.cluster);
    const job = await gateway.getJob(ref.api, ref.namespace, ref.name, opts);
    const gates = job ? await gateway.findAdmissionGates(job, opts) : [];
    const view = toRunPhase(job, gates);
    if (!job || view.phase === 'Succeeded') return view;
    let pods: unknown[] | undefined;
    try {
      const attempt = attemptOf(job);
      pods = (await gateway.listPods(`${LABEL.runId}=${runId}`, opts)).filter(
        (p) => attemptOf(p) === attempt,
      );
    } catch (err) {
      // RBAC from before pod health: judge by the job alone (as the reconciler does).
      if (!(err instanceof ClusterAccessDeniedError)) throw err;
    }
    // A failed job: its pods tell an infrastructure failure from a code failure.
    if (view.finished) return withDisruptionEvidence(gateway, view, pods, job, opts);
    // The start-error sighting is the reconciler's to keep; this check only reads it.
    const health =
      pods === undefined ? undefined : podHealth(pods, clock.now(), healthOptions, startErrorSighting(job));
    return withDisruptionEvidence(gateway, withPodHealth(view, health, job, healthOptions), pods, job, opts);
  }

  return observe;
}

export function makeAwaitJob(deps: AwaitJobDeps) {
  const { workflow, clock } = deps;
  const observe = jobObserver(deps);
  const decideOptions = decideOptionsOf(deps);
  /**
   * The `.waitForTaskToken` task: store the token on the job where the reconciler finds it, then
   * look once — if the job is already past this stage, answer the token at once.
   */
  async function awaitJob(
    input: RunInput & { token: string; stage: Stage; job: JobRef },
    opts?: CallOptions,
  ): Promise<void> {
    const { token, stage, job: ref, run } = input;
    const gateway = await deps.gateway(ref.cluster);
    const key = stage === 'admission' ? ANNOTATION.admissionToken : ANNOTATION.completionToken;
    try {
      await gateway.annotateJob(ref.api, ref.namespace, ref.name, { [key]: token }, opts);
    } catch (err) {
      if (err instanceof Error && err.name === 'NotFoundError') {
        await workflow.sendTaskFailure(token, 'JobVanishedError', failureCause(vanished()), opts);
        return;
      }
      throw err;
    }
    const view = await observe(ref, run.runId, opts);
    const decision = decide(stage, view, decideOptions(clock.now()));
    if (decision.kind === 'succeed') {
      const output = refreshRef(ref, view, run.request.runDeadlineSeconds, clock.now());
      await workflow.sendTaskSuccess(token, output, opts);
      await gateway
        .annotateJob(ref.api, ref.namespace, ref.name, { [key]: null }, opts)
        .catch(() => undefined);
    } else if (decision.kind === 'fail') {
      await workflow.sendTaskFailure(token, decision.error, failureCause(decision), opts);
    }
  }

  return awaitJob;
}

export function makeCheckJob(deps: CheckJobDeps) {
  const { clock } = deps;
  const observe = jobObserver(deps);
  const decideOptions = decideOptionsOf(deps);
  /** Heartbeat fallback: the reconciler was silent, so look once and tell the ASL what to do. */
  async function checkJob(
    input: RunInput & { stage: Stage; job: JobRef },
    opts?: CallOptions,
  ): Promise<JobRef> {
    const { stage, job: ref, run } = input;
    const view = await observe(ref, run.runId, opts);
    const now = clock.now();
    const decision = decide(stage, view, decideOptions(now));
    if (decision.kind === 'fail') {
      const cause = failureCause(decision);
      throw new FAIL_ERRORS[decision.error](cause);
    }
    const next = refreshRef(ref, view, run.request.runDeadlineSeconds, now);
    if (decision.kind === 'wait') {
      if (stage === 'admission' && isPast(ref.admissionDeadlineAt, now)) {
        throw new AdmissionTimeoutError(`job ${ref.name} was not admitted before ${ref.admissionDeadlineAt}`);
      }
      if (stage === 'completion' && next.runDeadlineAt && isPast(next.runDeadlineAt, now)) {
        throw new RunDeadlineExceededError(`job ${ref.name} ran past ${next.runDeadlineAt}`);
      }
      // The ASL's Choice sends `pending` back to AwaitAdmission and anything but `succeeded` back to AwaitCompletion.
      return stage === 'admission' ? { ...next, status: 'pending' } : next;
    }
    return next;
  }

  return checkJob;
}

function vanished() {
  return {
    kind: 'fail' as const,
    error: 'JobVanishedError' as const,
    reason: 'JobVanished',
    message: 'the job was deleted while the run waited for it',
  };
}

const FAIL_ERRORS = {
  TrainingFailedError,
  JobVanishedError,
  AdmissionDeactivatedError,
  AdmissionStalledError,
  NotManagedByKueueError,
  PodStartFailedError,
  UnschedulableError,
  InfrastructureFailureError,
} as const;
