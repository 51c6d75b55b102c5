import { describe, expect, it } from 'vitest';
import { ConcurrentUpdateError, NotFoundError } from '../../../lib/errors.ts';
import { jitter, updateWithRetry } from '../../../lib/state/update.ts';

describe('updateWithRetry', () => {
  it('runs the attempt again after each lost race, waiting by `backoff`, and returns the winner', async () => {
    const waited: number[] = [];
    const attempts: number[] = [];
    const out = await updateWithRetry(
      async (n) => {
        attempts.push(n);
        if (n < 3) throw new ConcurrentUpdateError(`lost ${n}`);
        return `won at ${n}`;
      },
      { maxAttempts: 5, backoff: async (n) => void waited.push(n) },
    );
    expect(out).toBe('won at 3');
    expect(attempts).toEqual([1, 2, 3]);
    expect(waited).toEqual([1, 2]);
  });

  it('throws the last lost race after maxAttempts, without waiting after it', async () => {
    const waited: number[] = [];
    let calls = 0;
    const run = updateWithRetry(
      async (n) => {
        calls++;
        throw new ConcurrentUpdateError(`lost ${n}`);
      },
      { maxAttempts: 3, backoff: async (n) => void waited.push(n) },
    );
    await expect(run).rejects.toThrow(new ConcurrentUpdateError('lost 3'));
    expect(calls).toBe(3);
    expect(waited).toEqual([1, 2]);
  });

  it('ends at once on any other error', async () => {
    let calls = 0;
    const run = updateWithRetry(
      async () => {
        calls++;
        throw new NotFoundError('gone');
      },
      { maxAttempts: 5 },
    );
    await expect(run).rejects.toBeInstanceOf(NotFoundError);
    expect(calls).toBe(1);
  });
});

describe('jitter', () => {
  it('waits a random time below min(cap, 10 ms × 2^attempt)', async () => {
    const t0 = performance.now();
    await jitter(5)(10);
    await jitter(500)(1);
    expect(performance.now() - t0).toBeLessThan(5 + 20 + 30);
  });
});
