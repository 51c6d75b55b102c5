import { ConcurrentUpdateError, NotFoundError } from '../errors.ts';
import type { CallOptions, Clock } from '../ports.ts';
import {
  byCreation,
  type CounterAdd,
  type IndexEntries,
  type StateTable,
  type StoredItem,
} from '../state/table.ts';
import { jitter, updateWithRetry } from '../state/update.ts';
import { monthOf, toMicro, usageAdds, usageKey } from '../usage/ledger.ts';
import { type InFlight, inFlightDelta, isInFlight, teamCountersKey } from './in-flight.ts';
import { applyChange, type RecordChange, type RunRecord } from './record.ts';

export const runItemKey = (runId: string) => `run#${runId}`;

/** Where a run is listed: its team by time, by phase, by model, and its sweep's trials. */
export function runIndexes(record: RunRecord): IndexEntries {
  const team = record.spec.request.team;
  const sk = byCreation(record.createdAt, record.runId);
  const model = record.spec.request.modelName;
  const sweepId = record.spec.trial?.sweepId;
  return {
    byTeam: { pk: `${team}#run`, sk },
    byPhase: { pk: `${team}#run#${record.phase}`, sk },
    ...(model ? { byModel: { pk: `${team}#model#${model}`, sk } } : {}),
    ...(sweepId ? { bySweep: { pk: `${team}#sweep#${sweepId}`, sk } } : {}),
  };
}

/** Lost write races an update survives (the last one is thrown: ConcurrentUpdateError). */
export const MAX_ATTEMPTS = 8;

/** A new run's ceilings: the team's caps in flight, and its hard monthly GPU-hour budget. */
export type RecordCaps = Partial<InFlight> & {
  /** The team's month may have used less than this many GPU-hours (lib/usage/ledger.ts). */
  monthlyGpuHours?: number;
};

/**
 * Write a run record over `before` (undefined: create only if absent). A write that enters or
 * leaves flight (lib/run/in-flight.ts) also adds to the team's counters in the same transaction,
 * so the counters move exactly when the records do; a write that ends an attempt adds its
 * GPU-hours to the team's usage ledger (lib/usage/ledger.ts) in the same way. `caps` are a new
 * run's ceilings (past them it is refused with CounterLimitError, nothing written). This is the
 * one writer of `run#` items (test/unit/run/record-writers.test.ts).
 */
export function writeRunRecord(
  table: StateTable,
  next: RunRecord,
  before: StoredItem<RunRecord> | undefined,
  opts?: CallOptions,
  caps?: RecordCaps,
): Promise<{ version: string }> {
  const key = runItemKey(next.runId);
  const cond = before ? { ifVersion: before.version } : { ifAbsent: true };
  const delta = inFlightDelta(before?.value, next);
  const adds: CounterAdd[] = usageAdds(before?.value, next);
  if (caps?.monthlyGpuHours !== undefined && !before) {
    // Held to the month's budget in the same transaction as the attempts that spend it.
    const budgetKey = usageKey(next.spec.request.team, monthOf(next.createdAt));
    const ceiling = { used: toMicro(caps.monthlyGpuHours) - 1 };
    const same = adds.find((a) => a.key === budgetKey);
    if (same) same.atMost = ceiling;
    else adds.push({ key: budgetKey, deltas: { used: 0 }, atMost: ceiling });
  }
  if (delta) {
    const atMost: Record<string, number> = {};
    // Only what this write adds is held to a ceiling: a release is never refused, nor a run without GPUs by the GPU cap.
    if (caps?.runs !== undefined && delta.runs > 0) atMost.runs = caps.runs;
    if (caps?.gpus !== undefined && delta.gpus > 0) atMost.gpus = caps.gpus;
    adds.unshift({
      key: teamCountersKey(next.spec.request.team),
      deltas: { runs: delta.runs, gpus: delta.gpus },
      ...(Object.keys(atMost).length ? { atMost } : {}),
    });
  }
  if (adds.length === 0) return table.put(key, next, runIndexes(next), cond, opts);
  return table.putCounted(
    key,
    next,
    runIndexes(next),
    cond,
    adds.length === 1 ? (adds[0] as CounterAdd) : adds,
    opts,
  );
}

/**
 * Run records in the state table, one item per run. Creation is "only if absent" (the run id
 * comes from the idempotency key, so the item is also the key's record); every update is a
 * read-modify-write conditioned on the version read, retried on a lost race, so concurrent
 * writers (the state machine's steps, the reconciler, a cancel) never lose each other's changes.
 */
export function makeRunRecords(deps: { table: StateTable; clock: Clock }) {
  const { table, clock } = deps;

  async function get(runId: string, opts?: CallOptions): Promise<RunRecord | undefined> {
    return (await table.get<RunRecord>(runItemKey(runId), opts))?.value;
  }

  /**
   * Create the record, counted in its team's runs in flight; if one exists, return it instead
   * (`created: false`). `caps`: the team's ceilings, for a new run that must fit them
   * (CounterLimitError otherwise); a replay of an existing record is never refused.
   */
  async function create(
    record: RunRecord,
    opts?: CallOptions,
    caps?: RecordCaps,
  ): Promise<{ record: RunRecord; created: boolean }> {
    // A lost transaction conflict on the team's counters (concurrent submits) is tried again.
    return updateWithRetry(
      async () => {
        try {
          await writeRunRecord(table, record, undefined, opts, caps);
          return { record, created: true };
        } catch (err) {
          if (!(err instanceof ConcurrentUpdateError)) throw err;
          const existing = await get(record.runId, opts);
          if (!existing) throw err;
          return { record: existing, created: false };
        }
      },
      { maxAttempts: MAX_ATTEMPTS, backoff: jitter(200) },
    );
  }

  /** Apply a change with optimistic concurrency. Throws NotFoundError when there is no record. */
  async function update(runId: string, change: RecordChange, opts?: CallOptions): Promise<RunRecord> {
    return (await apply(runId, change, opts)).record;
  }

  /**
   * `update`, also saying whether this call wrote the change (`changed`: false when the record
   * already had it, e.g. a retried step). What must happen once per transition (a metric) keys on it.
   */
  async function apply(
    runId: string,
    change: RecordChange,
    opts?: CallOptions,
  ): Promise<{ record: RunRecord; changed: boolean }> {
    // A lost race (ConcurrentUpdateError) reads again, at once, up to MAX_ATTEMPTS times.
    return updateWithRetry(
      async () => {
        const current = await table.get<RunRecord>(runItemKey(runId), opts);
        if (!current) throw new NotFoundError(`run ${runId} has no record`);
        const next = applyChange(current.value, change, clock.now());
        if (!next) return { record: current.value, changed: false };
        await writeRunRecord(table, next, current, opts);
        return { record: next, changed: true };
      },
      // At once for a lost race on the record; a write that also counts can lose to another team
      // member's on the shared counters item, so those spread out (jitter).
      { maxAttempts: MAX_ATTEMPTS, backoff: (n) => (ending(change) ? jitter(200)(n) : Promise.resolve()) },
    );
  }

  /** The records of many runs, in batched reads (100 per request); runs without a record are absent. */
  async function getMany(runIds: readonly string[], opts?: CallOptions) {
    const items = await table.getMany<RunRecord>(runIds.map(runItemKey), opts);
    const out = new Map<string, StoredItem<RunRecord>>();
    for (const id of runIds) {
      const item = items.get(runItemKey(id));
      if (item) out.set(id, item);
    }
    return out;
  }

  /**
   * `update` starting from a record already read (getMany): no read when the change changes
   * nothing, one conditional write when it does; a lost race falls back to `update`.
   */
  async function updateFrom(
    read: StoredItem<RunRecord>,
    change: RecordChange,
    opts?: CallOptions,
  ): Promise<{ record: RunRecord; changed: boolean }> {
    const runId = read.value.runId;
    const next = applyChange(read.value, change, clock.now());
    if (!next) return { record: read.value, changed: false };
    try {
      await writeRunRecord(table, next, read, opts);
      return { record: next, changed: true };
    } catch (err) {
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      return apply(runId, change, opts);
    }
  }

  return { get, getMany, create, update, apply, updateFrom };
}

/** A change that may end the run or an attempt (and so write its team's counters or ledger too). */
const ending = (change: RecordChange) =>
  (change.phase !== undefined && !isInFlight(change.phase)) || change.attempt?.endedAt !== undefined;

export type RunRecords = ReturnType<typeof makeRunRecords>;
