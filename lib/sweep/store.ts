import { mapLimit } from '../concurrency.ts';
import { ConcurrentUpdateError, NotFoundError } from '../errors.ts';
import type { CallOptions } from '../ports.ts';
import type { StateTable, StoredItem } from '../state/table.ts';
import { jitter, updateWithRetry } from '../state/update.ts';
import {
  type SweepItem,
  sweepIndexes,
  sweepItemKey,
  sweepItemOf,
  trialCounts,
  trialIndexes,
  trialItemKey,
} from './items.ts';
import { isSweepFinal, type SweepRecord, type Trial } from './record.ts';

/**
 * A Queued trial (or chained run) with no run record this long after release is enqueued again:
 * the advance that released it was cut off between its write and its send (a RecordOutcome past
 * its budget, a Lambda timeout). A duplicate message is harmless — the consumer starts one
 * execution per run id — so this is short: a lost send must not leave a slot idle for long.
 */
export const REQUEUE_AFTER_MS = 60 * 1000;
/** Lost write races on the sweep item before giving up with ConcurrentUpdateError. */
export const MAX_ATTEMPTS = 24;
/** Reads and writes of trial items and run records in flight at once. */
export const READ_CONCURRENCY = 16;
/** Trial items per query page (a page stays far below DynamoDB's 1 MB per query). */
const TRIAL_PAGE = 500;

export interface SweepStoreOptions {
  table: StateTable;
  log: (line: Record<string, unknown>) => void;
}

/**
 * The sweep's items in the state table: read the sweep item with its trial items, create it,
 * write it at a version, and read-modify-write it (`settle`). Decisions are the caller's.
 */
export function makeSweepStore({ table, log }: SweepStoreOptions) {
  /**
   * Every trial item of a sweep, in index order. Read newest first (pages of the `bySweep` index,
   * descending): a successor is created only after its predecessor's end is written (sweeps.ts),
   * so a successor read before its predecessor means the predecessor reads ended too, and a read
   * spread over pages while trials move never shows more than parallelTrials in flight.
   */
  async function loadTrials(sweepId: string, opts?: CallOptions) {
    const trials: Trial[] = [];
    const versions = new Map<number, string>();
    let cursor: string | undefined;
    do {
      const page = await table.query<Trial>(
        'bySweep',
        `trial#${sweepId}`,
        { limit: TRIAL_PAGE, descending: true, ...(cursor ? { cursor } : {}) },
        opts,
      );
      page.items.forEach((t, i) => {
        trials.push(t);
        versions.set(t.index, page.meta[i]?.version as string);
      });
      cursor = page.cursor;
    } while (cursor);
    trials.sort((a, b) => a.index - b.index);
    return { trials, versions };
  }

  /**
   * A sweep item of the layout before trial items (trials inline): create its trial items (only
   * if absent), then write the item without them and count its trials. Run by whoever reads it
   * first; a concurrent reader that loses the write finds the converted item.
   */
  async function adopt(sweepId: string, current: StoredItem<SweepItem>, opts?: CallOptions) {
    const trials = current.value.trials ?? [];
    await mapLimit(trials, READ_CONCURRENCY, async (t) => {
      await table
        .put(trialItemKey(sweepId, t.index), t, trialIndexes(sweepId, t), { ifAbsent: true }, opts)
        .catch((err: unknown) => {
          if (!(err instanceof ConcurrentUpdateError)) throw err;
        });
    });
    const { trials: _inline, ...item } = current.value;
    const record = {
      ...item,
      trials,
      ...(isSweepFinal(item.phase) && !item.finalCounts ? { finalCounts: trialCounts(trials) } : {}),
    } as SweepRecord;
    if (await write(record, current.version, opts)) {
      await table.increment(sweepItemKey(sweepId), trialCounts(trials), opts);
      log({ level: 'INFO', msg: 'sweep moved to trial items', sweepId, trials: trials.length });
    }
  }

  /**
   * The sweep item and its trial items: the record, the versions to write them back, the
   * counters. An item of the previous layout is moved to trial items first (`adopt`), unless the
   * caller only reads (`readOnly`: its inline trials are returned as they are).
   */
  async function load(sweepId: string, opts?: CallOptions, readOnly = false) {
    for (;;) {
      // The sweep item and its trial items at once (one round trip, not two: a trial's own
      // advance reads them on the way from its end to its successor's release). Trials read
      // for an item of the previous layout are dropped.
      const trialsRead = loadTrials(sweepId, opts);
      trialsRead.catch(() => undefined);
      const current = await table.get<SweepItem>(sweepItemKey(sweepId), opts);
      if (!current) return undefined;
      if (current.value.trials && current.value.trials.length > 0) {
        if (readOnly) {
          return {
            record: current.value as SweepRecord,
            version: current.version,
            trialVersions: new Map<number, string>(),
            counters: current.counters ?? {},
          };
        }
        await adopt(sweepId, current, opts);
        continue;
      }
      const { trials, versions } = await trialsRead;
      const { trials: _none, ...item } = current.value;
      return {
        record: { ...item, trials } as SweepRecord,
        version: current.version,
        trialVersions: versions,
        counters: current.counters ?? {},
      };
    }
  }

  /** The sweep item alone (its trials as read before, by the caller), at its version. */
  async function loadItem(sweepId: string, opts?: CallOptions) {
    const current = await table.get<SweepItem>(sweepItemKey(sweepId), opts);
    if (!current) return undefined;
    const { trials: _inline, ...item } = current.value;
    return { item: item as SweepRecord, version: current.version };
  }

  async function get(sweepId: string, opts?: CallOptions): Promise<SweepRecord | undefined> {
    return (await load(sweepId, opts, true))?.record;
  }

  /** Create the record (create-only); an existing record is returned instead. */
  async function create(
    record: SweepRecord,
    opts?: CallOptions,
  ): Promise<{ record: SweepRecord; created: boolean }> {
    try {
      await table.put(
        sweepItemKey(record.sweepId),
        sweepItemOf(record),
        sweepIndexes(record),
        { ifAbsent: true },
        opts,
      );
    } catch (err) {
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      const existing = await get(record.sweepId, opts);
      if (!existing) throw err;
      return { record: existing, created: false };
    }
    return { record, created: true };
  }

  /** Write the sweep item (only that version of it); false when a concurrent writer won. */
  async function write(record: SweepRecord, version: string, opts?: CallOptions): Promise<boolean> {
    try {
      await table.put(
        sweepItemKey(record.sweepId),
        sweepItemOf(record),
        sweepIndexes(record),
        { ifVersion: version },
        opts,
      );
      return true;
    } catch (err) {
      if (err instanceof ConcurrentUpdateError) return false;
      throw err;
    }
  }

  /** A read-modify-write of the record (undefined from `change`: nothing to write). */
  async function settle(
    sweepId: string,
    change: (r: SweepRecord) => SweepRecord | undefined,
    opts?: CallOptions,
  ): Promise<SweepRecord | undefined> {
    return updateWithRetry(
      async () => {
        const current = await load(sweepId, opts);
        if (!current) throw new NotFoundError(`sweep ${sweepId} has no record`);
        const next = change(current.record);
        if (!next) return current.record;
        if (await write(next, current.version, opts)) return next;
        throw new ConcurrentUpdateError(`sweep ${sweepId}: too many concurrent updates`);
      },
      { maxAttempts: MAX_ATTEMPTS, backoff: sweepBackoff },
    );
  }

  /** Every sweep not yet final: pages of the sparse `active` index. */
  async function activeSweepIds(opts?: CallOptions): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await table.query<SweepRecord>(
        'active',
        'active#sweep',
        {
          limit: 100,
          descending: false,
          ...(cursor ? { cursor } : {}),
        },
        opts,
      );
      ids.push(...page.items.map((r) => r.sweepId));
      cursor = page.cursor;
    } while (cursor);
    return ids;
  }

  return { load, loadItem, get, create, write, settle, activeSweepIds };
}

export type SweepStore = ReturnType<typeof makeSweepStore>;

/** The wait after a lost race on the sweep item. */
export const sweepBackoff = jitter(500);
