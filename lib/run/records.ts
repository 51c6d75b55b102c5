import { ConcurrentUpdateError, NotFoundError } from '../errors.ts';
import type { CallOptions, Clock, ObjectStore } from '../ports.ts';
import { applyChange, type RecordChange, type RunRecord } from './record.ts';

export const recordKey = (runId: string) => `runs/${runId}/record.json`;

const MAX_ATTEMPTS = 8;

/**
 * Run records in object storage. Creation is `If-None-Match: *`; every update is a
 * read-modify-write with `If-Match` on the ETag, retried on a lost race, so concurrent writers
 * (the state machine's steps, the reconciler, a cancel) never lose each other's changes.
 */
export function makeRunRecords(deps: { store: ObjectStore; clock: Clock }) {
  const { store, clock } = deps;

  async function get(runId: string, opts?: CallOptions): Promise<RunRecord | undefined> {
    return (await store.getJson<RunRecord>(recordKey(runId), opts))?.value;
  }

  /** Create the record; if one exists, return it instead (`created: false`). */
  async function create(
    record: RunRecord,
    opts?: CallOptions,
  ): Promise<{ record: RunRecord; created: boolean }> {
    try {
      await store.putJson(recordKey(record.runId), record, { ifNoneMatch: true }, opts);
      return { record, created: true };
    } catch (err) {
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      const existing = await get(record.runId, opts);
      if (!existing) throw err;
      return { record: existing, created: false };
    }
  }

  /** Apply a change with optimistic concurrency. Throws NotFoundError when there is no record. */
  async function update(runId: string, change: RecordChange, opts?: CallOptions): Promise<RunRecord> {
    for (let attempt = 1; ; attempt++) {
      const current = await store.getJson<RunRecord>(recordKey(runId), opts);
      if (!current) throw new NotFoundError(`run ${runId} has no record`);
      const next = applyChange(current.value, change, clock.now());
      if (!next) return current.value;
      try {
        await store.putJson(recordKey(runId), next, { ifMatch: current.etag }, opts);
        return next;
      } catch (err) {
        if (!(err instanceof ConcurrentUpdateError) || attempt >= MAX_ATTEMPTS) throw err;
      }
    }
  }

  return { get, create, update };
}

export type RunRecords = ReturnType<typeof makeRunRecords>;
