import { ConcurrentUpdateError } from '../errors.ts';
import type { ObjectStore } from '../ports.ts';
import type { RunRecord } from '../run/record.ts';
import { makeRunRecords, runItemKey } from '../run/records.ts';
import { isSweepFinal, type SweepRecord } from '../sweep/record.ts';
import {
  sweepIndexes,
  sweepItemKey,
  sweepItemOf,
  trialCounts,
  trialIndexes,
  trialItemKey,
} from '../sweep/sweeps.ts';
import type { StateTable } from './table.ts';

const RUN_RECORD = /^runs\/(run-[a-z2-7]{20})\/record\.json$/;
const SWEEP_RECORD = /^sweeps\/(swp-[a-z2-7]{20})\/record\.json$/;

export interface MigrationReport {
  runs: { copied: number; present: number };
  sweeps: { copied: number; present: number };
  triggerDocuments: { copied: number; present: number };
  /** Keys read but not copied (not a record Gantry wrote, or unreadable), with why. */
  skipped: Array<{ key: string; why: string }>;
}

/**
 * One-off copy of the records Gantry kept in S3 before the state table: `runs/<id>/record.json`,
 * `sweeps/<id>/record.json` and everything under `triggers/` (the data trigger's state and dedupe
 * marks, as `doc#<key>` documents). Each item is created only if absent, so the copy can be run
 * again (after an interruption, or while the old version still writes) without overwriting what
 * the table already holds; nothing in S3 is changed or deleted. `sweeps/active/` markers are not
 * copied: the table's sparse `active` index replaces them. A sweep record becomes a `sweep#<id>`
 * item without its trials plus one `trial#<id>#<index>` item per trial (lib/sweep/sweeps.ts).
 */
export async function migrateRecords(deps: {
  store: ObjectStore;
  table: StateTable;
  log?: (line: Record<string, unknown>) => void;
}): Promise<MigrationReport> {
  const { store, table } = deps;
  const report: MigrationReport = {
    runs: { copied: 0, present: 0 },
    sweeps: { copied: 0, present: 0 },
    triggerDocuments: { copied: 0, present: 0 },
    skipped: [],
  };
  async function copy(
    counter: { copied: number; present: number } | undefined,
    key: string,
    item: string,
    value: unknown,
    indexes: Parameters<StateTable['put']>[2],
  ): Promise<boolean> {
    let created = false;
    try {
      await table.put(item, value, indexes, { ifAbsent: true });
      created = true;
      if (counter) counter.copied++;
    } catch (err) {
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      if (counter) counter.present++;
    }
    if (counter) deps.log?.({ msg: 'migrated', key, item });
    return created;
  }

  const runs = makeRunRecords({ table, clock: { now: () => new Date() } });
  for (const { key } of await store.list('runs/')) {
    if (!key.endsWith('/record.json')) continue;
    const id = RUN_RECORD.exec(key)?.[1];
    const got = id ? await store.getJson<RunRecord>(key) : undefined;
    if (!id || !got || got.value.runId !== id || !got.value.spec?.request?.team) {
      report.skipped.push({
        key,
        why: 'not a run record (runs/<run id>/record.json with that run id and a team)',
      });
      continue;
    }
    // Through the records' one writer: a run copied while in flight is counted in its team's
    // counters (lib/run/in-flight.ts), in the same transaction.
    const { created } = await runs.create(got.value);
    if (created) report.runs.copied++;
    else report.runs.present++;
    deps.log?.({ msg: 'migrated', key, item: runItemKey(id) });
  }
  for (const { key } of await store.list('sweeps/')) {
    if (key.startsWith('sweeps/active/')) continue;
    const id = SWEEP_RECORD.exec(key)?.[1];
    const got = id ? await store.getJson<SweepRecord>(key) : undefined;
    if (!id || !got || got.value.sweepId !== id || !got.value.team) {
      report.skipped.push({
        key,
        why: 'not a sweep record (sweeps/<sweep id>/record.json with that id and a team)',
      });
      continue;
    }
    // The table's layout: one item per trial, then the sweep item without them and with its
    // trial counts as counters (counted once: only by the run that created the sweep item).
    const sweep = got.value;
    for (const t of sweep.trials ?? []) {
      await copy(undefined, key, trialItemKey(id, t.index), t, trialIndexes(id, t));
    }
    const counts = trialCounts(sweep.trials ?? []);
    const item = isSweepFinal(sweep.phase)
      ? { ...sweepItemOf(sweep), finalCounts: counts }
      : sweepItemOf(sweep);
    if (await copy(report.sweeps, key, sweepItemKey(id), item, sweepIndexes(sweep))) {
      if (Object.keys(counts).length > 0) await table.increment(sweepItemKey(id), counts);
    }
  }
  for (const { key } of await store.list('triggers/')) {
    const got = await store.getJson<unknown>(key).catch(() => undefined);
    if (!got) {
      report.skipped.push({ key, why: 'not a JSON document' });
      continue;
    }
    await copy(report.triggerDocuments, key, `doc#${key}`, got.value, {});
  }
  return report;
}
