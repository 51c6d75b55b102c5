/**
 * Gantry's error classes: one per outcome. The `name` of each is part of the contract with the
 * state machine (`statemachines/training-run.asl.json` matches it in `ErrorEquals`), so it is a
 * literal and never derived from the class at run time (minifiers rename classes).
 *
 * RetryableError: the same call may succeed later (the ASL retries it with backoff and jitter).
 * TerminalError: retrying cannot help (the ASL catches it and ends the run).
 */

/** A failure that may go away on its own: the caller retries with backoff. */
export abstract class RetryableError extends Error {
  readonly retryable = true as const;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** A failure that retrying cannot fix: the run ends, with this error's name as the reason. */
export abstract class TerminalError extends Error {
  readonly retryable = false as const;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
  }
}

/** One problem found in a request: the field (dotted path) and the rule it broke. */
export interface Issue {
  field: string;
  rule: string;
}

/** The request breaks the schema or a limit; never retried. The API answers 400 with the issues. */
export class ValidationError extends TerminalError {
  override readonly name = 'ValidationError' as const;
  readonly issues: readonly Issue[];
  constructor(issues: readonly Issue[], options?: ErrorOptions) {
    super(issues.map((i) => `${i.field || '(request)'}: ${i.rule}`).join('; '), options);
    this.issues = issues;
  }
}

/** The caller's team may not do this (namespace, queue, runtime, image, size); the API answers 403. */
export class ForbiddenError extends TerminalError {
  override readonly name = 'ForbiddenError' as const;
  readonly rule: string;
  constructor(rule: string, options?: ErrorOptions) {
    super(rule, options);
    this.rule = rule;
  }
}

/** The same idempotency key was used with a different request; the API answers 409. */
export class IdempotencyConflictError extends TerminalError {
  override readonly name = 'IdempotencyConflictError' as const;
}

/** A job with the run's name exists but belongs to someone else; never retried (the run fails). */
export class JobNameConflictError extends TerminalError {
  override readonly name = 'JobNameConflictError' as const;
}

/** The cluster refused the object as invalid (HTTP 400/422); never retried. */
export class ClusterRejectedError extends TerminalError {
  override readonly name = 'ClusterRejectedError' as const;
  readonly causes: readonly Issue[];
  constructor(message: string, causes: readonly Issue[] = [], options?: ErrorOptions) {
    super(message, options);
    this.causes = causes;
  }
}

/** Gantry's identity may not do this in the cluster (HTTP 401/403); never retried. */
export class ClusterAccessDeniedError extends TerminalError {
  override readonly name = 'ClusterAccessDeniedError' as const;
}

/** The object does not exist in the cluster (HTTP 404). Terminal where existence is required. */
export class NotFoundError extends TerminalError {
  override readonly name = 'NotFoundError' as const;
}

/** The cluster does not serve the API the run needs (CRD missing, unsupported version); run fails `InvalidRuntime`. */
export class UnsupportedApiError extends TerminalError {
  override readonly name = 'UnsupportedApiError' as const;
}

/** The training runtime named in the request does not exist on the cluster; run fails `InvalidRuntime`. */
export class RuntimeNotFoundError extends TerminalError {
  override readonly name = 'RuntimeNotFoundError' as const;
}

/**
 * A queued job got no Kueue Workload within the cluster's grace: Kueue does not manage its kind
 * there (or its namespace), so it would never be admitted; the run ends `Failed`/`NotManagedByKueue`.
 */
export class NotManagedByKueueError extends TerminalError {
  override readonly name = 'NotManagedByKueueError' as const;
}

/** The job reported failure; the run ends `Failed` with reason `TrainingFailed`. */
export class TrainingFailedError extends TerminalError {
  override readonly name = 'TrainingFailedError' as const;
}

/**
 * A pod of the job cannot start its containers for a reason of the run's own making: the image
 * cannot be pulled (`ImagePullFailed`), a Secret/ConfigMap or container setting is wrong
 * (`ContainerConfigError`), or the container keeps crashing (`CrashLoopBackOff`). Terminal: the
 * run fails with that reason and its job is deleted, freeing the quota.
 */
export class PodStartFailedError extends TerminalError {
  override readonly name = 'PodStartFailedError' as const;
}

/**
 * The job was admitted but its pods could not be scheduled for longer than the grace period
 * (`Unschedulable`: the nodes do not have what the quota promised). An infrastructure failure:
 * the run fails and its job is deleted, freeing the quota for jobs that fit.
 */
export class UnschedulableError extends TerminalError {
  override readonly name = 'UnschedulableError' as const;
}

/**
 * The job failed because of the infrastructure, not its code: a node was lost, a pod evicted (drain,
 * spot interruption) or preempted without requeue (lib/trainjob/disruption.ts). The state machine
 * starts a new attempt (NextAttempt) within the run's `retry.infrastructure` budget; past it the run
 * fails with `reason` (`NodeLost`, `Evicted`, `Preempted`, …). The reconciler also fails a stalled
 * run's completion wait with it (reason `Stalled`, with `restartOnStall`).
 */
export class InfrastructureFailureError extends TerminalError {
  override readonly name = 'InfrastructureFailureError' as const;
  readonly reason: string;
  /** `message` may be the `{reason, message}` JSON a failed wait carries; `options.reason` wins. */
  constructor(message: string, options?: ErrorOptions & { reason?: string }) {
    super(message, options);
    this.reason = options?.reason ?? reasonIn(message) ?? 'NodeLost';
  }
}

function reasonIn(message: string): string | undefined {
  try {
    const parsed = JSON.parse(message) as { reason?: unknown };
    return typeof parsed.reason === 'string' ? parsed.reason : undefined;
  } catch {
    return undefined;
  }
}

/** The job disappeared from the cluster while the run waited for it; the run fails. */
export class JobVanishedError extends TerminalError {
  override readonly name = 'JobVanishedError' as const;
}

/** Kueue deactivated the job's Workload (spec.active=false, e.g. RequeuingLimitExceeded); run fails `AdmissionDeactivated`. */
export class AdmissionDeactivatedError extends TerminalError {
  override readonly name = 'AdmissionDeactivatedError' as const;
}

/** Kueue admitted the Workload but the job stayed suspended past a grace (Kueue/Trainer mismatch); run fails `AdmissionStalled`. */
export class AdmissionStalledError extends TerminalError {
  override readonly name = 'AdmissionStalledError' as const;
}

/** The job finished without writing any output and the request said it would; run fails `NoArtifacts`. */
export class NoArtifactsError extends TerminalError {
  override readonly name = 'NoArtifactsError' as const;
}

/** The job was not admitted before the admission deadline; run fails `AdmissionTimeout` and its job is deleted. */
export class AdmissionTimeoutError extends TerminalError {
  override readonly name = 'AdmissionTimeoutError' as const;
}

/** The job ran past the run deadline; run fails `DeadlineExceeded` and its job is deleted. */
export class RunDeadlineExceededError extends TerminalError {
  override readonly name = 'RunDeadlineExceededError' as const;
}

/** The run ended (e.g. was cancelled) before its job was created; the state machine creates nothing. */
export class RunEndedError extends TerminalError {
  override readonly name = 'RunEndedError' as const;
}

/** A published file does not match its source (size or checksum); the run fails rather than hand a corrupted model to serving. */
export class ArtifactIntegrityError extends TerminalError {
  override readonly name = 'ArtifactIntegrityError' as const;
}

/** Publishing would overwrite what is not this run's (another run's version, or the output overlaps the model registry). */
export class ArtifactConflictError extends TerminalError {
  override readonly name = 'ArtifactConflictError' as const;
}

/** The model name belongs to another team (its first publisher); the run fails `ModelOwned` and publishes nothing. */
export class ModelOwnedError extends TerminalError {
  override readonly name = 'ModelOwnedError' as const;
}

/** The cluster is overloaded or unreachable (HTTP 429, 5xx, network); retried with backoff. */
export class ClusterUnavailableError extends RetryableError {
  override readonly name = 'ClusterUnavailableError' as const;
}

/** An AWS call failed in a way that may pass (throttling, 5xx, network); retried with backoff. */
export class AwsUnavailableError extends RetryableError {
  override readonly name = 'AwsUnavailableError' as const;
}

/** A conditional write lost a race (S3 `If-Match`/`If-None-Match` 412); re-read and retry. */
export class ConcurrentUpdateError extends RetryableError {
  override readonly name = 'ConcurrentUpdateError' as const;
}

/**
 * A lifecycle event was not delivered (a webhook answered non-2xx or could not be reached, no
 * event bus here). Never seen by the state machine: the events queue retries it with backoff and
 * then dead-letters it (lib/events/deliver.ts).
 */
export class EventDeliveryError extends RetryableError {
  override readonly name = 'EventDeliveryError' as const;
}

/** Every error class the state machine may name, for the ASL contract test. */
export const errorClasses = {
  ValidationError,
  ForbiddenError,
  IdempotencyConflictError,
  JobNameConflictError,
  ClusterRejectedError,
  ClusterAccessDeniedError,
  NotFoundError,
  UnsupportedApiError,
  RuntimeNotFoundError,
  TrainingFailedError,
  NotManagedByKueueError,
  PodStartFailedError,
  UnschedulableError,
  InfrastructureFailureError,
  JobVanishedError,
  AdmissionDeactivatedError,
  AdmissionStalledError,
  NoArtifactsError,
  AdmissionTimeoutError,
  RunDeadlineExceededError,
  RunEndedError,
  ArtifactIntegrityError,
  ArtifactConflictError,
  ModelOwnedError,
  ClusterUnavailableError,
  AwsUnavailableError,
  ConcurrentUpdateError,
} as const;

export type ErrorName = keyof typeof errorClasses;

/** True when the error is one of ours and says retrying may help. */
export function isRetryable(err: unknown): boolean {
  return err instanceof RetryableError;
}
