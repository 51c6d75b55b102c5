import { describe, expect, it } from 'vitest';
import { mapLimit } from '../../lib/concurrency.ts';

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
