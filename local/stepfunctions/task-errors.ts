/** Errors the engine hands to aws-local-stepfunctions, and the shape of a failed local Lambda's error. */
import { StateMachine } from 'aws-local-stepfunctions';

// ---------------------------------------------------------------------------------------------
// Errors handed to the library

/** Ends an attempt without Retry or Catch (StopExecution, execution timeout, bad path values). */
export class UncatchableError extends Error {
  readonly isRetryable = false;
  readonly isCatchable = false;
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

export type TimeoutErrorClass = new () => Error;
let timeoutErrorClass: Promise<TimeoutErrorClass> | undefined;

/**
 * The library's `States.TaskFailed` wildcard excludes only instances of its internal
 * StatesTimeoutError class (`!(error instanceof StatesTimeoutError)` in its Retry and Catch
 * matching, aws-local-stepfunctions 3.0.0). The class is not exported (the package exports
 * StateMachine, ExecutionError, ExecutionAbortedError and ExecutionTimeoutError, and no subpath),
 * and the check is on the class, not the error's name, so neither an import nor a name can stand
 * in: one 1 ms probe run yields the class, so the engine's own timeouts are excluded from
 * `States.TaskFailed` exactly like the library's, as on AWS.
 */
export function statesTimeoutErrorClass(): Promise<TimeoutErrorClass> {
  timeoutErrorClass ??= (async () => {
    const probe = new StateMachine(
      {
        StartAt: 'Probe',
        States: {
          Probe: {
            Type: 'Task',
            Resource: 'arn:aws:lambda:us-east-1:000000000000:function:probe',
            TimeoutSeconds: 0.001,
            End: true,
          },
        },
      },
      { validationOptions: { noValidate: true } },
    );
    const run = probe.run(
      {},
      { overrides: { taskResourceLocalHandlers: { Probe: () => new Promise(() => {}) } } },
    );
    try {
      await run.result;
    } catch (err) {
      const cause = (err as Error).cause;
      if (cause instanceof Error && cause.name === 'States.Timeout')
        return cause.constructor as TimeoutErrorClass;
    }
    throw new Error('aws-local-stepfunctions: could not obtain its States.Timeout error class');
  })();
  return timeoutErrorClass;
}

export function positiveInteger(value: unknown, field: string, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min) {
    throw new UncatchableError(
      'States.Runtime',
      `${field} must be an integer >= ${min}, got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function isErrorDocument(message: string, errorType: string): boolean {
  if (!message.startsWith('{')) return false;
  try {
    const doc = JSON.parse(message) as { errorType?: unknown; errorMessage?: unknown };
    return doc.errorType === errorType && typeof doc.errorMessage === 'string';
  } catch {
    return false;
  }
}

/** Error/Cause of a failed local Lambda, shaped as AWS reports a Lambda function error. */
export function lambdaError(err: unknown): { error: string; cause: string } {
  const e = err instanceof Error ? err : new Error(String(err));
  const errorType = typeof e.name === 'string' && e.name ? e.name : 'Error';
  // A handler run through invokeLocal (local/lambda.ts) already threw Lambda's error document as
  // its message: that is the Cause, not the errorMessage of a second document around it.
  if (isErrorDocument(e.message, errorType)) return { error: errorType, cause: e.message };
  const cause = JSON.stringify({
    errorType,
    errorMessage: e.message,
    trace: (e.stack ?? '').split('\n').filter(Boolean),
  });
  return { error: errorType, cause };
}
