import { byCreation, type IndexEntries } from '../state/table.ts';
import { isSweepFinal, type SweepRecord, type Trial } from './record.ts';

/** How a sweep lies in the state table: its item, its trial items, their keys and indexes. */

export const sweepItemKey = (sweepId: string) => `sweep#${sweepId}`;

/** Trial indices in keys: zero-padded, so the index's sort order is the trials' order. */
const indexKey = (index: number) => String(index).padStart(6, '0');
export const trialItemKey = (sweepId: string, index: number) => `trial#${sweepId}#${indexKey(index)}`;

/** A trial item is listed by the `bySweep` index, partition `trial#<sweepId>`, in index order. */
export function trialIndexes(sweepId: string, trial: Pick<Trial, 'index'>): IndexEntries {
  return { bySweep: { pk: `trial#${sweepId}`, sk: indexKey(trial.index) } };
}

/**
 * The sweep item's document: the record without its trials (each is an item of its own) and
 * without the counts (counters of the item). `trials` inline is the layout before trial items:
 * read once and moved to trial items (see `adopt` in lib/sweep/store.ts).
 */
export type SweepItem = Omit<SweepRecord, 'trials' | 'counts'> & { trials?: Trial[] };

export function sweepItemOf(record: SweepRecord): SweepItem {
  const { trials: _trials, counts: _counts, ...item } = record;
  return item;
}

/** Trials per phase, the sweep item's counters' exact values. */
export function trialCounts(trials: readonly Trial[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const t of trials) counts[t.phase] = (counts[t.phase] ?? 0) + 1;
  return counts;
}

/**
 * Where a sweep is listed: its team by time and by phase, and — while not final — the sparse
 * `active` index the reconciler reads (it never lists every sweep).
 */
export function sweepIndexes(record: SweepRecord): IndexEntries {
  const sk = byCreation(record.createdAt, record.sweepId);
  return {
    byTeam: { pk: `${record.team}#sweep`, sk },
    byPhase: { pk: `${record.team}#sweep#${record.phase}`, sk },
    ...(isSweepFinal(record.phase) ? {} : { active: { pk: 'active#sweep', sk: record.sweepId } }),
  };
}
