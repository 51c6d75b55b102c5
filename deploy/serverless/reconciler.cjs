'use strict';
/**
 * The reconciler's schedules: one rule a minute per shard (param `reconcilerShards`, default 1),
 * each with its shard in the input. functions/reconciler.ts reconciles that shard's clusters
 * (lib/orchestration/shards.ts); set the param to the number of clusters for one invocation each.
 *
 * Reserved concurrency is opt-in (param `reconcilerReservedConcurrency`, default none): Lambda
 * refuses any ReservedConcurrentExecutions that would leave the account fewer than 100 unreserved
 * executions, so on an account whose concurrency limit is 10 (common for new accounts) the stack
 * would not deploy. Without it a shard does not overlap itself in normal operation: each
 * invocation ends within its 55 s timeout, before the next minute's, and a failed or late tick is
 * dropped rather than retried (serverless.yml: maximumRetryAttempts 0, maximumEventAge 60), the
 * next tick doing its work.
 */
async function shardCount(resolveVariable) {
  const raw = await resolveVariable('param:reconcilerShards');
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 50)
    throw new Error(`param reconcilerShards: must be an integer from 1 to 50, got ${JSON.stringify(raw)}`);
  return n;
}

/**
 * `reconcilerReservedConcurrency`: empty (the default) → no reservation; otherwise a whole number
 * at least the shard count (one invocation per shard at a time). The account must keep 100
 * unreserved executions after it, i.e. its concurrency limit must be at least this + 100.
 */
async function reservedConcurrency(resolveVariable) {
  const raw = await resolveVariable('param:reconcilerReservedConcurrency');
  if (raw === undefined || raw === null || String(raw).trim() === '') return null;
  const shards = await shardCount(resolveVariable);
  const n = Number(raw);
  if (!Number.isInteger(n) || n < shards || n > 1000) {
    throw new Error(
      `param reconcilerReservedConcurrency: must be empty (no reservation) or a whole number from the shard count (${shards}) to 1000, got ${JSON.stringify(raw)}; the account's concurrency limit must then be at least it + 100 (Lambda keeps 100 unreserved)`,
    );
  }
  return n;
}

module.exports = {
  shardCount,
  reservedConcurrency,
  /** ReservedConcurrentExecutions of the reconciler: null (none) unless the param asks for it. */
  concurrency: async ({ resolveVariable }) => reservedConcurrency(resolveVariable),
  schedules: async ({ resolveVariable }) => {
    const n = await shardCount(resolveVariable);
    return Array.from({ length: n }, (_, shard) => ({
      schedule: { rate: ['rate(1 minute)'], input: { shard } },
    }));
  },
};
