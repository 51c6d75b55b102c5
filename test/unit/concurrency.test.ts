import { describe, expect, it } from 'vitest';
import { mapLimit, mapLimitSettled } from '../../lib/concurrency.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('mapLimit', () => {
  it('keeps at most `limit` calls in flight and the results in input order', async () => {
    let inFlight = 0;
    let peak = 0;
    const out = await mapLimit([5, 1, 4, 2, 3, 0], 2, async (n) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await sleep(n);
      inFlight--;
      return n * 10;
    });
    expect(out).toEqual([50, 10, 40, 20, 30, 0]);
    expect(peak).toBe(2);
  });

  it('starts nothing new after a failure, lets the calls in flight finish, then throws the first error', async () => {
    const started: number[] = [];
    const finished: number[] = [];
    const run = mapLimit([1, 2, 3, 4, 5, 6], 2, async (n) => {
      started.push(n);
      await sleep(n === 2 ? 1 : 5);
      if (n === 2) throw new Error('boom 2');
      finished.push(n);
      return n;
    });
    await expect(run).rejects.toThrow('boom 2');
    expect(started).toEqual([1, 2]);
    expect(finished).toEqual([1]);
  });

  it('handles an empty list and refuses a bad limit', async () => {
    expect(await mapLimit([], 4, async () => 1)).toEqual([]);
    await expect(mapLimit([1], 0, async () => 1)).rejects.toThrow(/positive/);
  });
});

describe('mapLimitSettled', () => {
  it('runs every item despite failures, at most `limit` at once, each outcome at its index', async () => {
    let inFlight = 0;
    let peak = 0;
    const started: number[] = [];
    const out = await mapLimitSettled([1, 2, 3, 4, 5], 2, async (n) => {
      started.push(n);
      inFlight++;
      peak = Math.max(peak, inFlight);
      await sleep(n === 1 ? 1 : 3);
      inFlight--;
      if (n % 2 === 1) throw new Error(`boom ${n}`);
      return n * 10;
    });
    expect(started.sort()).toEqual([1, 2, 3, 4, 5]);
    expect(peak).toBe(2);
    expect(out.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'rejected', 'fulfilled', 'rejected']);
    expect(out[1]).toEqual({ status: 'fulfilled', value: 20 });
    expect((out[4] as PromiseRejectedResult).reason).toEqual(new Error('boom 5'));
  });

  it('handles an empty list and refuses a bad limit', async () => {
    expect(await mapLimitSettled([], 3, async () => 1)).toEqual([]);
    await expect(mapLimitSettled([1], 1.5, async () => 1)).rejects.toThrow(/positive/);
  });
});
