import { AwsUnavailableError, ConcurrentUpdateError } from '../../errors.ts';

interface AwsLikeError {
  name?: string;
  $fault?: 'client' | 'server';
  $metadata?: { httpStatusCode?: number };
  $retryable?: unknown;
  code?: string;
}

const TRANSIENT_NAMES = new Set([
  'ThrottlingException',
  'Throttling',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'TimeoutError',
  'RequestTimeout',
  'AbortError',
  'ProvisionedThroughputExceededException',
  'InternalServerError',
]);

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * Translate an AWS SDK error at the adapter's edge: a lost conditional write becomes
 * ConcurrentUpdateError, throttling / 5xx / network becomes AwsUnavailableError (both retried),
 * anything else is rethrown as it is (a bug or a configuration problem, surfaced loudly).
 */
export function translateAwsError(err: unknown, what: string): Error {
  const e = (err ?? {}) as AwsLikeError;
  const status = e.$metadata?.httpStatusCode;
  if (
    status === 412 ||
    e.name === 'PreconditionFailed' ||
    e.name === 'ConditionalRequestConflict' ||
    e.name === 'ConditionalCheckFailedException' ||
    e.name === 'TransactionConflictException' ||
    status === 409
  ) {
    return new ConcurrentUpdateError(`${what}: a concurrent writer changed it first`, { cause: err });
  }
  if (
    (e.name && TRANSIENT_NAMES.has(e.name)) ||
    e.$fault === 'server' ||
    (status !== undefined && (status === 429 || status >= 500)) ||
    (e.code && NETWORK_CODES.has(e.code))
  ) {
    return new AwsUnavailableError(`${what}: ${e.name ?? 'error'} (may pass)`, { cause: err });
  }
  return err instanceof Error ? err : new Error(`${what}: ${String(err)}`);
}
