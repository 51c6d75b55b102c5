import { describe, expect, it } from 'vitest';
import { tokenBucket } from '../../../lib/orchestration/pacing.ts';

/** The token bucket on a fake clock: sleeping advances it. */
function fakeBucket(capacity: number, perSecond: number) {
  let now = 0;
  const bucket = tokenBucket({
    capacity,
    perSecond,
    now: () => now,
    sleep: async (ms) => {
      now += ms;
    },
  });
  return {
    bucket,
    now: () => now,
    idle: (ms: number) => {
      now += ms;
    },
  };
}

describe('tokenBucket (Step Functions call pacing)', () => {
  it.each([
    // capacity, per second, calls → ms until the last call may go out
    [1500, 250, 1500, 0], // a burst up to the capacity goes at once
    [1500, 250, 1750, 1000], // 250 more need one second of refill
    [1500, 250, 10_000, 34_000], // a cold tick of 10,000 heartbeats: (10,000 − 1,500) / 250 s
    [10, 5, 20, 2000],
  ])('capacity %i, %i/s: %i calls take %i ms', async (capacity, perSecond, calls, wantMs) => {
    // Prepare
    const { bucket, now } = fakeBucket(capacity, perSecond);

    // Act
    await Promise.all(Array.from({ length: calls }, () => bucket.take()));

    // Assess
    expect(now()).toBe(wantMs);
  });

  it('refills while idle, never above its capacity', async () => {
    // Prepare: drained, then a minute idle (which would be 300 calls' worth)
    const { bucket, now, idle } = fakeBucket(10, 5);
    await Promise.all(Array.from({ length: 10 }, () => bucket.take()));
    idle(60_000);
    const start = now();

    // Act: 11 calls
    await Promise.all(Array.from({ length: 11 }, () => bucket.take()));

    // Assess: 10 at once (the capacity), the 11th after 1/5 s
    expect(now() - start).toBe(200);
  });
});
