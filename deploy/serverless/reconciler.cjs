'use strict';
/**
 * The reconciler's schedules: one rule a minute per shard (param `reconcilerShards`, default 1),
 * each with its shard in the input. functions/reconciler.ts reconciles that shard's clusters
 * (lib/orchestration/shards.ts); set the param to the number of clusters for one invocation each.
 */
async function shardCount(resolveVariable) {
  const raw = await resolveVariable('param:reconcilerShards');
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 50)
    throw new Error(`param reconcilerShards: must be an integer from 1 to 50, got ${JSON.stringify(raw)}`);
  return n;
}

module.exports = {
  shardCount,
  /** One invocation per shard at a time (each runs under a minute, so no shard overlaps itself). */
  concurrency: async ({ resolveVariable }) => shardCount(resolveVariable),
  schedules: async ({ resolveVariable }) => {
    const n = await shardCount(resolveVariable);
    return Array.from({ length: n }, (_, shard) => ({
      schedule: { rate: ['rate(1 minute)'], input: { shard } },
    }));
  },
};
