import { ValidationError } from '../errors.ts';

/**
 * Reconciler shards: with `GANTRY_RECONCILER_SHARDS` = N, N scheduled invocations a minute each
 * reconcile their own clusters, so a slow or unreachable cluster holds up only its own shard. With N
 * equal to the number of clusters, each cluster has an invocation of its own. Pure.
 *
 * Clusters are sorted by name and the i-th goes to shard i mod N: adding a cluster moves at most
 * the clusters after it, and for one minute a moved cluster may be reconciled by two shards, which
 * is harmless (every reconciler write is conditional and every answer idempotent). Sweeps are
 * advanced by shard 0 only: they are not per cluster.
 */
export interface ShardScope<C> {
  /** The shard this invocation is (0 when the event names none and there is one shard). */
  shard: number;
  clusters: C[];
  /** Whether this invocation advances the sweeps (shard 0). */
  sweeps: boolean;
}

/**
 * What one scheduled invocation reconciles. The schedule's input names the shard (`{"shard": k}`,
 * deploy/serverless/reconciler.cjs); an event without one (an older schedule, a manual invoke)
 * reconciles everything. A shard outside 0…N-1 is a ValidationError naming the field.
 */
export function shardScope<C extends { name: string }>(
  event: unknown,
  shards: number,
  clusters: readonly C[],
): ShardScope<C> {
  const raw = typeof event === 'object' && event !== null ? (event as { shard?: unknown }).shard : undefined;
  if (raw === undefined) return { shard: 0, clusters: [...clusters], sweeps: true };
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0 || raw >= shards)
    throw new ValidationError([
      {
        field: 'shard',
        rule: `must be an integer from 0 to ${shards - 1} (GANTRY_RECONCILER_SHARDS is ${shards})`,
      },
    ]);
  const sorted = [...clusters].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { shard: raw, clusters: sorted.filter((_, i) => i % shards === raw), sweeps: raw === 0 };
}
