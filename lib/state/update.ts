import { ConcurrentUpdateError } from '../errors.ts';

export interface UpdateRetryOptions {
  /** Lost write races before the last ConcurrentUpdateError is thrown to the caller. */
  maxAttempts: number;
  /** Wait before the next attempt (`attempt` is the one that just lost); none: retry at once. */
  backoff?: (attempt: number) => Promise<void>;
}

/**
 * A conditional read-modify-write: run `attempt` (read, decide, write at the version read) until
 * it does not lose a write race. A lost race is a ConcurrentUpdateError from the attempt; any
 * other error ends the loop at once. After `maxAttempts` lost races the last one is thrown.
 */
export async function updateWithRetry<T>(
  attempt: (attempt: number) => Promise<T>,
  { maxAttempts, backoff }: UpdateRetryOptions,
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (!(err instanceof ConcurrentUpdateError) || n >= maxAttempts) throw err;
      await backoff?.(n);
    }
  }
}

/**
 * Full jitter: a random wait up to 10 ms × 2^attempt, at most `capMs`. Writers that lost the
 * same race spread out instead of colliding again.
 */
export function jitter(capMs: number): (attempt: number) => Promise<void> {
  return (attempt) => new Promise((r) => setTimeout(r, Math.random() * Math.min(capMs, 10 * 2 ** attempt)));
}
