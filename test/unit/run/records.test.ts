import { describe, expect, it } from 'vitest';
import { AwsUnavailableError, ConcurrentUpdateError } from '../../../lib/errors.ts';
import { newRecord } from '../../../lib/run/record.ts';
import { MAX_ATTEMPTS, makeRunRecords, runItemKey } from '../../../lib/run/records.ts';
import type { StateTable } from '../../../lib/state/table.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { memoryTable } from '../../helpers/intake-fakes.ts';

/**
 * Run record updates are conditional writes at the version read, retried on a lost race
 * (ConcurrentUpdateError) up to MAX_ATTEMPTS times; any other error is not retried. The table is
 * the in-memory fake of its port; `racing` lets another writer win the next `lose` writes.
 */
const clock = { now: () => new Date('2026-12-03T10:00:00Z') };

function racing(lose: number, failWith?: () => Error) {
  const inner = memoryTable();
  let puts = 0;
  let reads = 0;
  const table: StateTable = {
    ...inner,
    get: (key, opts) => {
      reads++;
      return inner.get(key, opts);
    },
    put: async (key, value, indexes, cond, opts) => {
      puts++;
      if (cond.ifVersion !== undefined && lose > 0) {
        lose--;
        if (failWith) throw failWith();
        // Another writer gets there first: the item moves on, with a change of its own.
        const current = await inner.get<Record<string, unknown>>(key);
        if (current) {
          const theirs = { ...current.value, message: 'from the other writer' };
          await inner.put(key, theirs, indexes, { ifVersion: current.version });
        }
      }
      return inner.put(key, value, indexes, cond, opts);
    },
  };
  return { table, counts: () => ({ puts, reads }) };
}

async function setup(lose: number, failWith?: () => Error) {
  const { table, counts } = racing(lose, failWith);
  const records = makeRunRecords({ table, clock });
  const run = aRunSpec();
  await records.create(newRecord(run, 'fp', clock.now()));
  return { records, run, table, counts };
}

describe('run records: a lost write race is retried', () => {
  it('reads again and writes on top of the winner, keeping its change', async () => {
    const { records, run, table, counts } = await setup(2);

    const result = await records.apply(run.runId, { phase: 'Submitting' });

    expect(result.changed).toBe(true);
    expect(result.record.phase).toBe('Submitting');
    expect(counts()).toEqual({ reads: 3, puts: 3 }); // 3 attempts (create is a counted write, putCounted)
    // The other writer's change survived: the update was re-applied to the record it wrote.
    const stored = await table.get<Record<string, unknown>>(runItemKey(run.runId));
    expect(stored?.value).toMatchObject({ phase: 'Submitting', message: 'from the other writer' });
  });

  it(`gives up after ${MAX_ATTEMPTS} lost races with the last ConcurrentUpdateError`, async () => {
    const { records, run, counts } = await setup(MAX_ATTEMPTS);
    const before = counts().puts;

    await expect(records.update(run.runId, { phase: 'Submitting' })).rejects.toBeInstanceOf(
      ConcurrentUpdateError,
    );
    expect(counts().puts - before).toBe(MAX_ATTEMPTS);
    expect(MAX_ATTEMPTS).toBe(8);
  });

  it('survives MAX_ATTEMPTS - 1 lost races', async () => {
    const { records, run } = await setup(MAX_ATTEMPTS - 1);
    await expect(records.update(run.runId, { phase: 'Submitting' })).resolves.toMatchObject({
      phase: 'Submitting',
    });
  });

  it('does not retry any other error', async () => {
    const { records, run, counts } = await setup(1, () => new AwsUnavailableError('DynamoDB throttled'));
    const before = counts().puts;

    await expect(records.update(run.runId, { phase: 'Submitting' })).rejects.toBeInstanceOf(
      AwsUnavailableError,
    );
    expect(counts().puts - before).toBe(1);
  });
});
