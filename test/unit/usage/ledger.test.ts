import { describe, expect, it } from 'vitest';
import { attemptsOf } from '../../../lib/run/attempts.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { closedUsage, MICRO, usageAdds, usageKey } from '../../../lib/usage/ledger.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { memoryTable } from '../../helpers/intake-fakes.ts';

/**
 * The GPU-hour ledger (lib/usage/ledger.ts): what a record write adds, from the attempts it ends,
 * split by the UTC day they ran; and, through the one record writer, the counters it keeps.
 */

const spec = (gpu: number, nodes = 1) =>
  aRunSpec({ request: { team: 'vision', modelName: 'resnet', numNodes: nodes, resourcesPerNode: { gpu } } });

function at(iso: string) {
  let now = new Date(iso);
  return { now: () => now, set: (s: string) => (now = new Date(s)) };
}

describe('closedUsage', () => {
  it('counts nothing for a running attempt, and all of it once the run ends', () => {
    const r: RunRecord = {
      ...newRecord(spec(2), 'fp', new Date('2026-12-01T10:00:00Z')),
      phase: 'Running',
      job: { cluster: 'local', apiVersion: 'v', kind: 'TrainJob', namespace: 'n', name: 'j' },
      transitions: [
        { phase: 'Accepted', at: '2026-12-01T10:00:00Z' },
        { phase: 'Pending', at: '2026-12-01T10:00:00Z' },
        { phase: 'Running', at: '2026-12-01T11:00:00Z' },
      ],
    };
    expect(closedUsage(r).size).toBe(0);
    const done: RunRecord = {
      ...r,
      phase: 'Succeeded',
      transitions: [...r.transitions, { phase: 'Succeeded', at: '2026-12-01T14:00:00Z' }],
    };
    expect(Object.fromEntries(closedUsage(done))).toEqual({ '2026-12-01': { used: 6 * MICRO, lost: 0 } });
  });

  it('splits an attempt over the UTC days it ran, summing exactly to its GPU-hours', () => {
    const r: RunRecord = {
      ...newRecord(spec(3), 'fp', new Date('2026-11-30T20:00:00Z')),
      phase: 'Failed',
      reason: 'NodeLost',
      job: { cluster: 'local', apiVersion: 'v', kind: 'TrainJob', namespace: 'n', name: 'j' },
      transitions: [
        { phase: 'Accepted', at: '2026-11-30T20:00:00Z' },
        { phase: 'Pending', at: '2026-11-30T20:00:00Z' },
        { phase: 'Running', at: '2026-11-30T22:00:00.001Z' },
        { phase: 'Failed', at: '2026-12-01T01:20:00Z', reason: 'NodeLost' },
      ],
    };
    const days = closedUsage(r);
    const total = attemptsOf(r, new Date()).gpuHours;
    expect([...days.keys()]).toEqual(['2026-11-30', '2026-12-01']);
    const used = [...days.values()].reduce((n, d) => n + d.used, 0);
    const lost = [...days.values()].reduce((n, d) => n + d.lost, 0);
    expect(used).toBe(Math.round(total.used * MICRO));
    expect(lost).toBe(used); // an infrastructure failure loses the whole attempt
    expect(days.get('2026-12-01')?.used).toBe(4 * MICRO); // 01:20 × 3 GPUs
  });
});

describe('the ledger through the record writer', () => {
  it('adds an attempt when it ends, never twice, and the last one when the run ends', async () => {
    const table = memoryTable();
    const clock = at('2026-12-05T08:00:00Z');
    const records = makeRunRecords({ table, clock });
    const s = spec(4, 2); // 8 GPUs
    await records.create(newRecord(s, 'fp', clock.now()));
    await records.update(s.runId, { phase: 'Submitting' });
    await records.update(s.runId, {
      phase: 'Pending',
      job: { cluster: 'local', apiVersion: 'v', kind: 'TrainJob', namespace: 'n', name: s.jobName },
      attempt: { attempt: 1, jobName: s.jobName, startedAt: clock.now().toISOString() },
    });
    clock.set('2026-12-05T09:00:00Z');
    await records.update(s.runId, { phase: 'Running' });
    clock.set('2026-12-05T09:30:00Z');
    const month = usageKey('vision', '2026-12');
    const model = usageKey('vision', '2026-12', 'resnet');
    expect((await table.get(month))?.counters).toBeUndefined(); // nothing ended yet

    // Attempt 1 ends (node lost): 8 GPUs × 0.5 h, all lost. A retried step writes it again: no change.
    const ended = {
      attempt: 1,
      jobName: s.jobName,
      startedAt: '2026-12-05T08:00:00.000Z',
      endedAt: clock.now().toISOString(),
      cause: 'NodeLost',
      gpuHours: 4,
      gpuHoursLost: 4,
    };
    await records.update(s.runId, { phase: 'Pending', reason: 'NodeLost', attempt: ended });
    await records.update(s.runId, { attempt: ended });
    expect((await table.get(month))?.counters).toEqual({
      used: 4 * MICRO,
      lost: 4 * MICRO,
      u05: 4 * MICRO,
      l05: 4 * MICRO,
    });

    await records.update(s.runId, {
      attempt: { attempt: 2, jobName: `${s.jobName}-a2`, startedAt: clock.now().toISOString() },
    });
    clock.set('2026-12-05T10:00:00Z');
    await records.update(s.runId, { phase: 'Running' });
    clock.set('2026-12-05T12:15:00Z');
    await records.update(s.runId, { phase: 'Publishing' });
    await records.update(s.runId, { phase: 'Succeeded' });
    await records.update(s.runId, { phase: 'Succeeded' });

    const record = await records.get(s.runId);
    const expected = attemptsOf(record as RunRecord, new Date()).gpuHours;
    expect(expected).toEqual({ used: 22, lost: 4 }); // 4 + 8 × 2.25
    const want = { used: 22 * MICRO, lost: 4 * MICRO, u05: 22 * MICRO, l05: 4 * MICRO };
    expect((await table.get(month))?.counters).toEqual(want);
    expect((await table.get(model))?.counters).toEqual(want);
  });

  it('adds nothing for a write that ends no attempt', () => {
    const r = newRecord(spec(1), 'fp', new Date('2026-12-05T08:00:00Z'));
    expect(usageAdds(undefined, r)).toEqual([]);
    expect(
      usageAdds(r, {
        ...r,
        phase: 'Cancelled',
        transitions: [...r.transitions, { phase: 'Cancelled', at: '2026-12-05T09:00:00Z' }],
      }),
    ).toEqual([]);
  });
});
