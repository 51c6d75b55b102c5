import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeModelOwners } from '../../lib/artifacts/ownership.ts';
import { parseConfig } from '../../lib/config.ts';
import { runEvents } from '../../lib/events/event.ts';
import { TeamLimitError } from '../../lib/intake/errors.ts';
import { makeInFlight } from '../../lib/intake/in-flight.ts';
import { makeSubmitRun } from '../../lib/intake/submit-run.ts';
import { attemptGpuHours, attemptsOf, jobGpus } from '../../lib/run/attempts.ts';
import { runIdFromKey } from '../../lib/run/ids.ts';
import { teamCountersKey } from '../../lib/run/in-flight.ts';
import { newRecord, type RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords, type RunRecords } from '../../lib/run/records.ts';
import type { StateTable } from '../../lib/state/table.ts';
import { closedUsage, dayCounters, MICRO, usageKey } from '../../lib/usage/ledger.ts';
import { makeUsedInMonth } from '../../lib/usage/usage.ts';
import { type LocalStateTable, startLocalStateTable, tableOfStack } from '../../local/state-table.ts';
import { aRunSpec } from '../helpers/builders.ts';
import { BUCKET, memoryStore, recordingQueue } from '../helpers/intake-fakes.ts';

/**
 * The GPU-hour ledger and the monthly budgets on the real local state table (dynalite behind the
 * TransactWriteItems shim, through the DynamoDB adapter): exact under concurrent attempts ending,
 * retried writes, and submits racing the attempt that uses the budget up.
 */

const MONTH_NOW = new Date('2026-12-15T12:00:00Z');
const fixed = { now: () => MONTH_NOW };
const config = parseConfig({
  clusters: [{ name: 'local', kubeconfig: '/dev/null' }],
  defaultCluster: 'local',
  teams: [
    {
      name: 'lab',
      principals: ['lab-ci'],
      namespaces: ['lab'],
      imagePrefixes: ['ghcr.io/acme/'],
      maxRunsInFlight: 1000,
      maxGpusInFlight: 10_000,
      gpuHourBudget: { soft: 5, hard: 10 },
    },
  ],
});

describe('usage ledger and budgets on the local state table', () => {
  let local: LocalStateTable;
  let table: StateTable;
  beforeAll(async () => {
    local = await startLocalStateTable();
    table = tableOfStack({ stateTable: { name: local.tableName, client: local.client } });
  });
  afterAll(async () => {
    await local?.close();
  });

  const job = (name: string) => ({
    cluster: 'local',
    apiVersion: 'v',
    kind: 'TrainJob',
    namespace: 'n',
    name,
  });

  /** What NextAttempt writes when attempt `n` ended: its GPU-hours from the record as read. */
  async function endAttempt(records: RunRecords, runId: string, n: number, cause: string, now: Date) {
    const r = (await records.get(runId)) as RunRecord;
    const own = r.attempts?.find((a) => a.attempt === n);
    const startedAt = own?.startedAt ?? r.createdAt;
    const endedAt = own?.endedAt ?? now.toISOString();
    const gpuHours = attemptGpuHours(r.transitions, jobGpus(r.spec.request), startedAt, endedAt);
    const attempt = {
      attempt: n,
      jobName: own?.jobName ?? `${r.spec.jobName}-a${n}`,
      startedAt,
      endedAt,
      cause,
      gpuHours,
      gpuHoursLost: cause === 'NodeLost' ? gpuHours : 0,
    };
    // A retried step writes the same end again, at the same time: it must count once.
    await Promise.all([
      records.update(runId, { phase: 'Pending', reason: cause, attempt }),
      records.update(runId, { attempt }),
    ]);
  }

  it('30 runs of 2 attempts ending at once over midnight: the ledger equals the records, per day, month and model', async () => {
    // Each run's own clock (its writes are in order); the runs interleave freely.
    const runs = Array.from({ length: 30 }, (_, i) => i);
    const finals = await Promise.all(
      runs.map(async (i) => {
        let t = Date.parse('2026-12-31T21:00:00Z') + i * 61_000;
        const clock = { now: () => new Date(t) };
        const step = (minutes: number) => {
          t += minutes * 60_000 + 1_013 * i;
        };
        const records = makeRunRecords({ table, clock });
        const spec = aRunSpec({
          runId: runIdFromKey('ledger', `run-${i}`),
          request: {
            team: 'ledger',
            modelName: i % 3 === 0 ? 'resnet' : 'bert',
            numNodes: 1 + (i % 4),
            resourcesPerNode: { gpu: 1 + (i % 8) },
          },
        });
        await records.create(newRecord(spec, 'fp', clock.now()));
        await records.update(spec.runId, { phase: 'Submitting' });
        await records.update(spec.runId, {
          phase: 'Pending',
          job: job(spec.jobName),
          attempt: { attempt: 1, jobName: spec.jobName, startedAt: clock.now().toISOString() },
        });
        step(3);
        await records.update(spec.runId, { phase: 'Running' });
        step(50 + i * 7);
        await endAttempt(records, spec.runId, 1, i % 2 ? 'NodeLost' : 'TrainingFailed', clock.now());
        await records.update(spec.runId, {
          attempt: { attempt: 2, jobName: `${spec.jobName}-a2`, startedAt: clock.now().toISOString() },
        });
        step(4);
        await records.update(spec.runId, { phase: 'Running' });
        step(90 + i * 5);
        await Promise.all([
          records.update(spec.runId, { phase: i % 5 === 0 ? 'Failed' : 'Succeeded' }),
          records.update(spec.runId, { phase: i % 5 === 0 ? 'Failed' : 'Succeeded' }),
        ]);
        return (await records.get(spec.runId)) as RunRecord;
      }),
    );

    // Assess: per (model or team, day), the sum of the records' ended attempts.
    const want = new Map<string, { used: number; lost: number }>();
    for (const r of finals) {
      for (const [day, u] of closedUsage(r)) {
        for (const key of [
          usageKey('ledger', day.slice(0, 7)),
          usageKey('ledger', day.slice(0, 7), r.spec.request.modelName),
        ]) {
          for (const k of [`${key}|${day}`, `${key}|month`]) {
            const w = want.get(k) ?? { used: 0, lost: 0 };
            want.set(k, { used: w.used + u.used, lost: w.lost + u.lost });
          }
        }
      }
    }
    // Every run's GPU-hours, as the run view shows them, are in the ledger exactly once.
    const viewed = finals.reduce(
      (n, r) => n + Math.round(attemptsOf(r, new Date()).gpuHours.used * MICRO),
      0,
    );
    let monthsUsed = 0;
    const days = new Set<string>();
    for (const [k, w] of want) {
      const [key, day] = k.split('|') as [string, string];
      const counters = (await table.get(key))?.counters ?? {};
      if (day === 'month') {
        expect({ key, used: counters.used, lost: counters.lost }).toEqual({ key, ...w });
        if (!key.includes('#model#')) monthsUsed += counters.used ?? 0;
      } else {
        days.add(day);
        const names = dayCounters(day);
        expect({ k, used: counters[names.used], lost: counters[names.lost] }).toEqual({ k, ...w });
      }
    }
    expect(monthsUsed).toBe(viewed);
    expect(viewed).toBeGreaterThan(100 * MICRO);
    // The runs ran over midnight into a new month: both months have usage.
    expect([...days].some((d) => d.startsWith('2026-12'))).toBe(true);
    expect([...days].some((d) => d.startsWith('2027-01'))).toBe(true);
  }, 120_000);

  const submitter = (records = makeRunRecords({ table, clock: fixed })) =>
    makeSubmitRun({
      records,
      owners: makeModelOwners({ store: memoryStore(), clock: fixed }),
      queue: recordingQueue(),
      clock: fixed,
      config,
      bucket: BUCKET,
      inFlight: makeInFlight(table),
      usedInMonth: makeUsedInMonth(table),
    });
  const body = {
    modelName: 'm',
    team: 'lab',
    runtime: { name: 'torch-distributed' },
    image: 'ghcr.io/acme/t:1',
  };
  const caller = { sub: 'lab-ci', groups: [] };
  const burst = (prefix: string, n: number) => {
    const submit = submitter();
    return Promise.allSettled(
      Array.from({ length: n }, (_, i) => submit({ caller, body, idempotencyKey: `${prefix}-${i}` })),
    );
  };
  const month = usageKey('lab', '2026-12');
  const used = async () => (await table.get(month))?.counters?.used ?? 0;

  /** A run of team lab whose one attempt ends having used exactly `gpuHours`. */
  async function spend(id: string, gpuHours: number) {
    const records = makeRunRecords({ table, clock: fixed });
    const spec = aRunSpec({
      runId: id,
      request: { team: 'lab', modelName: 'm', resourcesPerNode: { gpu: 1 } },
    });
    await records.create(newRecord(spec, 'fp', fixed.now()));
    await records.update(id, {
      phase: 'Pending',
      job: job(spec.jobName),
      attempt: { attempt: 1, jobName: spec.jobName, startedAt: fixed.now().toISOString() },
    });
    return () =>
      records.update(id, {
        phase: 'Pending',
        reason: 'NodeLost',
        attempt: {
          attempt: 1,
          jobName: spec.jobName,
          startedAt: fixed.now().toISOString(),
          endedAt: fixed.now().toISOString(),
          cause: 'NodeLost',
          gpuHours,
          gpuHoursLost: gpuHours,
        },
      });
  }

  it('soft: a submit past it carries the warning and a budget-warning event; below it, none', async () => {
    const before = await used();
    await (await spend(runIdFromKey('lab', 'softspend0000000000'), 5 - 0.000001 - before / MICRO))();
    expect(await used()).toBe(5 * MICRO - 1);
    const [below] = await burst('below-soft', 1);
    expect(below?.status === 'fulfilled' ? below.value.budgetWarning : 'refused').toBeUndefined();
    await (await spend(runIdFromKey('lab', 'softspend0000000001'), 0.000001))();
    const past = await burst('past-soft', 10);
    for (const r of past) {
      expect(r.status).toBe('fulfilled');
      if (r.status !== 'fulfilled') continue;
      expect(r.value.budgetWarning).toMatch(
        /team lab has used 5 of its monthly GPU-hour budget \(soft 5, hard 10\)/,
      );
      expect(runEvents(r.value.record).map((e) => e.type)).toEqual([
        'gantry.run.accepted',
        'gantry.run.budget-warning',
      ]);
    }
  });

  it('hard: submits racing the attempt that uses it up are accepted only before it, atomically; none after', async () => {
    // Prepare: the month at 10⁻⁶ GPU-hours below hard — submits still fit.
    await (await spend(runIdFromKey('lab', 'hardspend0000000000'), 10 - 0.000001 - (await used()) / MICRO))();
    expect(await used()).toBe(10 * MICRO - 1);
    const finisher = await spend(runIdFromKey('lab', 'hardspend0000000001'), 0.5);
    const inFlightBefore = (await table.get(teamCountersKey('lab')))?.counters?.runs ?? 0;

    // Act: 20 submits and the attempt that passes hard, at once.
    const [racing] = await Promise.all([burst('race', 20), finisher()]);

    // Assess: each submit was either recorded and counted, or refused naming the budget with nothing written.
    const accepted = racing.filter((r) => r.status === 'fulfilled').length;
    for (const [i, r] of racing.entries()) {
      const id = runIdFromKey('lab', `race-${i}`);
      const record = await makeRunRecords({ table, clock: fixed }).get(id);
      if (r.status === 'fulfilled') {
        expect(record?.runId).toBe(id);
        continue;
      }
      expect(record).toBeUndefined();
      expect(r.reason).toBeInstanceOf(TeamLimitError);
      expect((r.reason as TeamLimitError).limit).toBe('gpuHourBudget.hard');
    }
    expect((await table.get(teamCountersKey('lab')))?.counters?.runs).toBe(inFlightBefore + accepted);
    expect(await used()).toBe(10.5 * MICRO - 1);

    // After it: every submit refused, with the budget, what was used and the reset named; nothing counted.
    const after = await burst('after', 20);
    for (const r of after) {
      expect(r.status).toBe('rejected');
      const err = (r as PromiseRejectedResult).reason as TeamLimitError;
      expect(err).toBeInstanceOf(TeamLimitError);
      expect(err.message).toBe(
        'team lab has used 10.499999 of its monthly GPU-hour budget gpuHourBudget.hard 10; new runs are refused until it resets at 2027-01-01T00:00:00.000Z (runs in flight go on)',
      );
      expect(err.retryAfterSeconds).toBe((Date.parse('2027-01-01T00:00:00Z') - MONTH_NOW.getTime()) / 1000);
    }
    expect((await table.get(teamCountersKey('lab')))?.counters?.runs).toBe(inFlightBefore + accepted);
    // A replay of a run accepted before is still answered.
    const replay = await submitter()({ caller, body, idempotencyKey: 'past-soft-0' });
    expect(replay.created).toBe(false);
  });
});
