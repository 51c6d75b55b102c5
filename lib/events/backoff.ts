/**
 * How long a failed delivery waits before its next attempt: exponential, `baseSeconds × 2^(n-1)`
 * after the n-th failed attempt, capped at `maxSeconds` (and at SQS's 12-hour visibility limit).
 * Deterministic on purpose: one delivery per run and target is in flight at a time (FIFO groups),
 * so retries do not arrive in herds that jitter would need to spread.
 */
export interface Backoff {
  baseSeconds: number;
  maxSeconds: number;
}

export const DEFAULT_BACKOFF: Backoff = { baseSeconds: 5, maxSeconds: 900 };

const SQS_MAX_VISIBILITY_SECONDS = 43_200;

export function retryDelaySeconds(failedAttempts: number, backoff: Backoff = DEFAULT_BACKOFF): number {
  const n = Math.max(1, Math.floor(failedAttempts));
  const raw = backoff.baseSeconds * 2 ** (n - 1);
  return Math.min(Math.ceil(raw), backoff.maxSeconds, SQS_MAX_VISIBILITY_SECONDS);
}
