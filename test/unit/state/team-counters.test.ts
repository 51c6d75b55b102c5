import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { inFlightDelta, teamCountersKey } from '../../../lib/run/in-flight.ts';
import { PHASES, type RunPhase } from '../../../lib/run/phases.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { recount, repairCounters } from '../../../lib/state/repair-counters.ts';
import { CounterLimitError } from '../../../lib/state/table.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { memoryTable } from '../../helpers/intake-fakes.ts';

// The state table is the in-memory fake of its port; test/integration/team-counters.test.ts runs
// the same paths on the local DynamoDB-compatible server.
const ROOT = join(import.meta.dirname, '../../..');
const clock = { now: () => new Date('2026-12-01T10:00:00Z') };
const id = (n: number) =>
  `run-${String.fromCharCode(97 + (n % 26)).repeat(19)}${String.fromCharCode(97 + Math.floor(n / 26))}`;
const spec = (n: number, gpu: number, team = 'vision') =>
  aRunSpec({ runId: id(n), request: { team, numNodes: 2, ...(gpu ? { resourcesPerNode: { gpu } } : {}) } });

function setup() {
  const table = memoryTable();
  const records = makeRunRecords({ table, clock });
  const counters = async (team = 'vision') => (await table.get(teamCountersKey(team)))?.counters ?? {};
  return { table, records, counters };
}

describe('inFlightDelta: which writes count', () => {
  const rec = (phase: RunPhase): RunRecord => ({ ...newRecord(spec(1, 2), 'fp', clock.now()), phase });
  const inFlight = PHASES.filter((p) => !['Succeeded', 'Failed', 'Cancelled'].includes(p));
  const ended = ['Succeeded', 'Failed', 'Cancelled'] as const;
  it('a new record in flight adds the run and its GPUs (2 nodes × 2)', () => {
    expect(inFlightDelta(undefined, rec('Accepted'))).toEqual({ runs: 1, gpus: 4 });
  });
  it.each(inFlight.flatMap((from) => ended.map((to) => [from, to] as const)))(
    '%s → %s releases',
    (from, to) => {
      expect(inFlightDelta(rec(from), rec(to))).toEqual({ runs: -1, gpus: -4 });
    },
  );
  it.each(inFlight.flatMap((from) => inFlight.map((to) => [from, to] as const)))(
    '%s → %s counts nothing',
    (from, to) => {
      expect(inFlightDelta(rec(from), rec(to))).toBeUndefined();
    },
  );
});

describe('run records keep their team counters exact', () => {
  it('through every way a run starts and ends, repeated and late updates included', async () => {
    const { table, records, counters } = setup();
    for (let n = 0; n < 6; n++) await records.create(newRecord(spec(n, n), 'fp', clock.now()));
    await records.create(newRecord(spec(0, 0), 'fp', clock.now())); // a replay counts nothing
    await records.create(newRecord(spec(9, 8, 'nlp'), 'fp', clock.now()));
    expect(await counters()).toEqual({ runs: 6, gpus: 2 * (0 + 1 + 2 + 3 + 4 + 5) });
    // Moves inside flight: nothing changes (a preemption back to Pending included).
    for (const phase of ['Submitting', 'Pending', 'Running', 'Publishing'] as const)
      await records.update(id(1), { phase });
    await records.update(id(2), { phase: 'Running' });
    await records.update(id(2), { phase: 'Pending', reason: 'Preempted' });
    expect(await counters()).toEqual({ runs: 6, gpus: 30 });
    // Ends: success, failure, cancel while Accepted; each once, whatever repeats.
    await records.update(id(1), { phase: 'Succeeded' });
    await records.update(id(1), { phase: 'Succeeded' });
    await records.update(id(2), { phase: 'Failed', reason: 'TrainingFailed' });
    await records.update(id(2), { phase: 'Cancelled' }); // late: a terminal phase is final
    const read = (await records.getMany([id(3)])).get(id(3));
    if (!read) throw new Error('no record');
    await records.updateFrom(read, { phase: 'Cancelled', reason: 'Cancelled' });
    expect(await counters()).toEqual({ runs: 3, gpus: 2 * (0 + 4 + 5) });
    expect(await counters('nlp')).toEqual({ runs: 1, gpus: 16 });
    expect(await recount(table, 'vision')).toEqual(await counters());
  });

  it('refuses a new run past a ceiling and writes nothing; a replay is answered at the cap', async () => {
    const { table, records, counters } = setup();
    const caps = { runs: 10, gpus: 4 };
    await records.create(newRecord(spec(0, 1), 'fp', clock.now()), undefined, caps);
    await expect(
      records.create(newRecord(spec(1, 2), 'fp', clock.now()), undefined, caps),
    ).rejects.toBeInstanceOf(CounterLimitError);
    expect(await records.get(id(1))).toBeUndefined();
    expect(await counters()).toEqual({ runs: 1, gpus: 2 });
    expect(
      await records.create(newRecord(spec(0, 1), 'fp', clock.now()), undefined, { runs: 1, gpus: 0 }),
    ).toMatchObject({
      created: false,
    });
    // A run without GPUs is not held to the GPU ceiling, and a release is never refused.
    await records.create(newRecord(spec(2, 0), 'fp', clock.now()), undefined, { runs: 10, gpus: 0 });
    await records.update(id(0), { phase: 'Failed' });
    expect(await counters()).toEqual({ runs: 1, gpus: 0 });
    expect(table.items.size).toBe(3);
  });
});

describe('repairCounters', () => {
  it('finds and fixes a tampered counter, reporting the difference; a second run finds nothing', async () => {
    const { table, records, counters } = setup();
    for (let n = 0; n < 4; n++) await records.create(newRecord(spec(n, 1), 'fp', clock.now()));
    await records.update(id(0), { phase: 'Succeeded' });
    await table.increment(teamCountersKey('vision'), { runs: 5, gpus: -3 }); // tampered
    const dry = await repairCounters({ table, teams: ['vision', 'nlp'], dryRun: true });
    expect(dry).toEqual([
      { team: 'vision', counted: { runs: 8, gpus: 3 }, actual: { runs: 3, gpus: 6 }, fixed: false },
      { team: 'nlp', counted: { runs: 0, gpus: 0 }, actual: { runs: 0, gpus: 0 }, fixed: false },
    ]);
    expect(await counters()).toEqual({ runs: 8, gpus: 3 });
    const fixed = await repairCounters({ table, teams: ['vision'] });
    expect(fixed).toEqual([
      { team: 'vision', counted: { runs: 8, gpus: 3 }, actual: { runs: 3, gpus: 6 }, fixed: true },
    ]);
    expect(await counters()).toEqual({ runs: 3, gpus: 6 });
    expect((await repairCounters({ table, teams: ['vision'] }))[0]?.fixed).toBe(false);
  });

  it('creates the counters of a team whose item is missing (records written before counters)', async () => {
    const { table, records, counters } = setup();
    await records.create(newRecord(spec(0, 2), 'fp', clock.now()));
    await table.delete(teamCountersKey('vision'));
    expect((await repairCounters({ table, teams: ['vision'] }))[0]).toMatchObject({
      fixed: true,
      actual: { runs: 1, gpus: 4 },
    });
    expect(await counters()).toEqual({ runs: 1, gpus: 4 });
  });
});

/**
 * Every write of a run record goes through lib/run/records.ts's `writeRunRecord`, the one place
 * that counts: a file that names run items (`runItemKey`, a `run#` key) must be records.ts or one
 * that only reads them (bench/ seeds its own tables and is not scanned). A new direct writer fails
 * here; route it through makeRunRecords instead.
 */
describe('the one writer of run records', () => {
  const READ_ONLY: Record<string, string> = {
    'lib/run/record.ts': 'documents the key in a comment',
    'lib/state/migrate.ts': 'names the item in its log; writes through makeRunRecords',
    'lib/state/repair-counters.ts': 'reads records to recount',
    'lib/adapters/aws/state-stream.ts': 'reads the table stream',
    'functions/events/outbox.ts': 'documents the stream filter',
    'local/events-feed.ts': 'reads changed records for the outbox',
  };
  const files = (dir: string): string[] =>
    readdirSync(join(ROOT, dir)).flatMap((name) => {
      const path = join(dir, name);
      if (name === 'node_modules') return [];
      return statSync(join(ROOT, path)).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
    });
  it('no other module writes run# items', () => {
    const naming = ['lib', 'functions', 'local', 'scripts']
      .flatMap(files)
      .filter((f) => /runItemKey|['"`]run#/.test(readFileSync(join(ROOT, f), 'utf8')))
      .map((f) => relative(ROOT, join(ROOT, f)));
    expect(naming.filter((f) => f !== 'lib/run/records.ts' && !(f in READ_ONLY))).toEqual([]);
    for (const f of naming.filter((f) => f in READ_ONLY)) {
      expect(readFileSync(join(ROOT, f), 'utf8'), f).not.toMatch(
        /\.(put|putCounted|increment|delete)\(\s*runItemKey/,
      );
    }
  });
  it('records.ts writes run items only in writeRunRecord, which counts', () => {
    const src = readFileSync(join(ROOT, 'lib/run/records.ts'), 'utf8');
    expect(src.match(/table\.(put|putCounted|increment|delete)\(/g)).toEqual([
      'table.put(',
      'table.putCounted(',
    ]);
    const writer = src.slice(
      src.indexOf('export function writeRunRecord'),
      src.indexOf('export function makeRunRecords'),
    );
    expect(writer).toContain('table.put(');
    expect(writer).toContain('table.putCounted(');
    expect(writer).toContain('inFlightDelta(');
  });
});
