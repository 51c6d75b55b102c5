/**
 * Run `fn` over `items` with at most `limit` calls in flight; results keep the input order.
 * After the first failure no new call starts; the calls in flight finish, then the first error
 * is thrown (so nothing is left running behind the caller's back).
 */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  if (!Number.isInteger(limit) || limit < 1)
    throw new Error(`concurrency must be a positive integer, got ${limit}`);
  const results = new Array<R>(items.length);
  let next = 0;
  let failed: { error: unknown } | undefined;
  async function worker() {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        results[i] = await fn(items[i] as T, i);
      } catch (error) {
        failed ??= { error };
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failed) throw failed.error;
  return results;
}

/**
 * `mapLimit` that collects every outcome instead of stopping at the first failure: each item's
 * call runs (at most `limit` in flight) and its result or error stands at its index, as
 * `Promise.allSettled` reports them. For batches where one item's failure must not keep the
 * others from running (a queue batch reporting its failed messages).
 */
export function mapLimitSettled<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<PromiseSettledResult<R>[]> {
  return mapLimit(items, limit, (item, i) =>
    fn(item, i).then(
      (value): PromiseSettledResult<R> => ({ status: 'fulfilled', value }),
      (reason: unknown): PromiseSettledResult<R> => ({ status: 'rejected', reason }),
    ),
  );
}
