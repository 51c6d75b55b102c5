import { TerminalError } from '../errors.ts';
import type { RunPhase } from '../run/phases.ts';

/**
 * Outcomes of the HTTP intake that the state machine never sees (so they are not in
 * `errorClasses` of lib/errors.ts). Each maps to one HTTP status in functions/api/_http.ts.
 */

/** Cancel of a run that already ended (Succeeded or Failed); the API answers 409 with the phase. */
export class RunFinishedError extends TerminalError {
  override readonly name = 'RunFinishedError' as const;
  readonly phase: RunPhase;
  constructor(runId: string, phase: RunPhase, options?: ErrorOptions) {
    super(`run ${runId} already ended with phase ${phase}`, options);
    this.phase = phase;
  }
}

/** The body is not JSON (or is empty, or uses a forbidden key); the API answers 400 `InvalidJson`. */
export class InvalidJsonError extends TerminalError {
  override readonly name = 'InvalidJsonError' as const;
}

/** The body is not `application/json` (UTF-8); the API answers 415. */
export class UnsupportedMediaTypeError extends TerminalError {
  override readonly name = 'UnsupportedMediaTypeError' as const;
}

/** The body is larger than the API accepts; the API answers 413. */
export class PayloadTooLargeError extends TerminalError {
  override readonly name = 'PayloadTooLargeError' as const;
  readonly limitBytes: number;
  constructor(limitBytes: number, options?: ErrorOptions) {
    super(`the body must be at most ${limitBytes} bytes`, options);
    this.limitBytes = limitBytes;
  }
}

/** Cancel of a sweep that already ended (Succeeded or Failed); the API answers 409 with the phase. */
export class SweepFinishedError extends TerminalError {
  override readonly name = 'SweepFinishedError' as const;
  readonly phase: string;
  constructor(sweepId: string, phase: string, options?: ErrorOptions) {
    super(`sweep ${sweepId} already ended with phase ${phase}`, options);
    this.phase = phase;
  }
}

/**
 * The team's runs or GPUs in flight are at its cap (`maxRunsInFlight`, `maxGpusInFlight`); the
 * API answers 429 with `Retry-After`. Nothing was recorded: submit again later with the same key.
 */
export class TeamLimitError extends TerminalError {
  override readonly name = 'TeamLimitError' as const;
  readonly retryAfterSeconds: number;
  readonly limit: string;
  constructor(message: string, limit: string, retryAfterSeconds: number, options?: ErrorOptions) {
    super(message, options);
    this.limit = limit;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/**
 * The request's credentials are not accepted (e.g. a JWT from another issuer than the pinned one);
 * the API answers 401.
 */
export class UnauthenticatedError extends TerminalError {
  override readonly name = 'UnauthenticatedError' as const;
}

/**
 * A run's logs cannot be read yet or any more: no job or pod for the node, or its container has
 * not started (or the pods are gone after the run ended); the API answers 409 with the phase.
 */
export class RunLogsUnavailableError extends TerminalError {
  override readonly name = 'RunLogsUnavailableError' as const;
  readonly phase: RunPhase;
  constructor(message: string, phase: RunPhase, options?: ErrorOptions) {
    super(message, options);
    this.phase = phase;
  }
}
