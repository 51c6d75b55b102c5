import { describe, expect, it } from 'vitest';
import { shardShare, tokenBucket } from '../../../lib/orchestration/pacing.ts';

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

describe('shardShare (shards on one account)', () => {
  it.each([
    [1, 750, 150],
    [3, 250, 50],
    [4, 187, 37.5],
    [1000, 1, 0.15], // the burst stays at least one call
  ])('%i shards of 750 burst, 150/s: %i and %f/s each', (shards, capacity, perSecond) => {
    expect(shardShare({ capacity: 750, perSecond: 150 }, shards)).toEqual({ capacity, perSecond });
  });

  it('4 shards sending at once stay within the whole: no more than 750 + 150/s between them', async () => {
    // Prepare: one shared fake clock; each shard its own bucket of its share
    let now = 0;
    const sleep = async (ms: number) => {
      now = Math.max(now, sent.at + ms);
    };
    const sent = { at: 0 };
    const buckets = Array.from({ length: 4 }, () =>
      tokenBucket({ ...shardShare({ capacity: 750, perSecond: 150 }, 4), now: () => now, sleep }),
    );

    // Act: each shard wants 2,500 calls; count those out within the first 10 s
    let within = 0;
    await Promise.all(
      buckets.map(async (b) => {
        for (let i = 0; i < 2500; i++) {
          await b.take();
          sent.at = now;
          if (now <= 10_000) within++;
        }
      }),
    );

    // Assess: the account's 500/s (and the configured 150/s) is never exceeded together
    expect(within).toBeLessThanOrEqual(750 + 150 * 10);
    expect(within).toBeGreaterThan(700 + 150 * 9);
  });
});
