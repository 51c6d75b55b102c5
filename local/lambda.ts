import type { Context } from 'aws-lambda';

/** A Lambda handler as the runtime calls it (middy handlers have this shape). */
export type LambdaHandler = (event: never, context: Context) => Promise<unknown>;

let requests = 0;

/** A Lambda context for in-process invocations, with the function's timeout. */
export function localContext(functionName: string, timeoutMs: number): Context {
  const deadline = Date.now() + timeoutMs;
  requests++;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:${functionName}`,
    memoryLimitInMB: '512',
    awsRequestId: `local-${process.pid}-${requests}`,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/**
 * Invoke a handler in-process as Lambda would for Step Functions: a thrown error keeps its
 * `name` (the ASL's `ErrorEquals` matches it) and its cause is Lambda's JSON error document.
 */
export async function invokeLocal(
  functionName: string,
  handler: LambdaHandler,
  event: unknown,
  timeoutMs = 60_000,
): Promise<unknown> {
  try {
    return await handler(event as never, localContext(functionName, timeoutMs));
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    const wrapped = new Error(JSON.stringify({ errorType: e.name, errorMessage: e.message }));
    wrapped.name = e.name;
    throw wrapped;
  }
}
