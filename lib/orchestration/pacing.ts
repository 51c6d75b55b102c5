/**
 * A token bucket for the reconciler's Step Functions calls (SendTask*, DescribeExecution): at most
 * `capacity` calls at once, then `perSecond`. Step Functions' own quotas are token buckets per API
 * and account: SendTaskHeartbeat/Success/Failure 3,000 burst and 500/s in us-east-1, us-west-2 and
 * eu-west-1, 1,500 and 300/s elsewhere; DescribeExecution 300 and 15/s (250 and 10/s)
 * (Step Functions developer guide, "Quotas related to API action throttling"). The reconciler
 * shares them with the state machine's own tasks and with the API, so its defaults take about
 * half (functions/reconciler.ts). Time is injected (`now`, `sleep`) so tests need no real waits.
 */
export interface Pacer {
  /** Resolves when a call may go out. */
  take(): Promise<void>;
}

export const UNPACED: Pacer = { take: async () => undefined };

export function tokenBucket(opts: {
  capacity: number;
  perSecond: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}): Pacer {
  const now = opts.now ?? (() => performance.now());
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let tokens = opts.capacity;
  let at = now();
  // Callers queue in order: each waits for the one before it, so the bucket is never overdrawn.
  let queue: Promise<void> = Promise.resolve();
  const refill = () => {
    const t = now();
    tokens = Math.min(opts.capacity, tokens + ((t - at) / 1000) * opts.perSecond);
    at = t;
  };
  return {
    take() {
      const turn = queue.then(async () => {
        refill();
        while (tokens < 1) {
          await sleep(Math.ceil(((1 - tokens) / opts.perSecond) * 1000));
          refill();
        }
        tokens -= 1;
      });
      queue = turn;
      return turn;
    },
  };
}

/**
 * One shard's share of a quota (`GANTRY_RECONCILER_SHARDS` = `shards`): the rate and the burst
 * divided between the shards, which run at once and draw on the same account-wide buckets, so
 * together they never take more than the configured whole (4 shards at 150/s each would exceed
 * the 500/s of the largest regions). The burst stays at least 1 call.
 */
export function shardShare(
  limits: { capacity: number; perSecond: number },
  shards: number,
): { capacity: number; perSecond: number } {
  const n = Math.max(1, Math.floor(shards));
  return { capacity: Math.max(1, Math.floor(limits.capacity / n)), perSecond: limits.perSecond / n };
}
