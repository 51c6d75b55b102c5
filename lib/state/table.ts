import type { CallOptions } from '../ports.ts';

/**
 * Gantry's state table: runs, sweeps and the data trigger's state, one item each, in one
 * DynamoDB table (`serverless.yml` StateTable; locally a DynamoDB-compatible server). Training
 * output, published models, manifests and `latest` pointers stay in S3.
 *
 * An item is a JSON document under a key, with a version for optimistic concurrency (create is
 * "only if absent", update is "only if the version is still the one read") and, per secondary
 * index, a partition and a sort key the lists query. Every list is one query per page. Beside the
 * document an item may hold counters that writers add to atomically (`increment`).
 */

/** The table's secondary indexes: what each lists (partition key → items ordered by sort key). */
export const INDEXES = {
  /** `<team>#<kind>` → that team's runs or sweeps, by creation time. */
  byTeam: { pk: 'g1pk', sk: 'g1sk' },
  /** `<team>#<kind>#<phase>` → by creation time. */
  byPhase: { pk: 'g2pk', sk: 'g2sk' },
  /** `<team>#model#<model>` → the team's runs of one model, by creation time. */
  byModel: { pk: 'g3pk', sk: 'g3sk' },
  /**
   * `<team>#sweep#<sweepId>` → the sweep's trial runs, by creation time; `trial#<sweepId>` → the
   * sweep's trial items, by index.
   */
  bySweep: { pk: 'g4pk', sk: 'g4sk' },
  /** Sparse: `active#<kind>` → the items not yet final (sweeps the reconciler advances). */
  active: { pk: 'g5pk', sk: 'g5sk' },
} as const;
export type IndexName = keyof typeof INDEXES;

/** An item's place in each index it belongs to; an index left out does not list the item. */
export type IndexEntries = Partial<Record<IndexName, { pk: string; sk: string }>>;

export interface StoredItem<T> {
  value: T;
  /** Opaque version token: pass it back as `ifVersion` to update only what was read. */
  version: string;
  /** The item's counters (see `increment`), when it has any. */
  counters?: Record<string, number>;
}

/** What a query read of each item besides its document (same order as `items`). */
export interface ItemMeta {
  version: string;
  counters?: Record<string, number>;
}

export interface QueryPage {
  /** Items per page (the query's Limit: items read, before any filter). */
  limit: number;
  /** The cursor of the previous page, as this table returned it. */
  cursor?: string;
  /** Only items whose sort key is ≥ this (e.g. an ISO time: created since). */
  sortFrom?: string;
  /** Newest (highest sort key) first; default true. */
  descending?: boolean;
  /** Keep only items whose document matches (read items still count towards `limit`). */
  where?: (item: unknown) => boolean;
}

export interface QueryResult<T> {
  items: T[];
  /** Present when the index holds more: pass it as `cursor` for the next page. */
  cursor?: string;
  /** Items the query read (what a page costs), including those a filter dropped. */
  read: number;
  /** Each returned item's version and counters, in the order of `items`. */
  meta: ItemMeta[];
}

/** A counter's name: letters and digits (it becomes an attribute of the item). */
export const COUNTER_NAME = /^[A-Za-z][A-Za-z0-9]{0,63}$/;

/** Counters to add to in the same transaction as a write (`putCounted`). */
export interface CounterAdd {
  /** The counters' item: created when absent, with an empty document (`{}`) at version 0. */
  key: string;
  /** Whole deltas by counter name (COUNTER_NAME); a missing counter starts at 0. */
  deltas: Record<string, number>;
  /** Ceilings: the write fails when a counter would be above its ceiling after the add. */
  atMost?: Record<string, number>;
}

/**
 * A counted write was refused: a counter would pass its ceiling (`CounterAdd.atMost`). Nothing was
 * written. Never leaves the use case that set the ceiling (intake maps it to TeamLimitError, 429).
 */
export class CounterLimitError extends Error {
  override readonly name = 'CounterLimitError' as const;
  /** The counters' item whose ceiling refused the write, when the adapter can tell. */
  readonly key: string | undefined;
  constructor(message: string, options?: ErrorOptions & { key?: string }) {
    super(message, options);
    this.key = options?.key;
  }
}

/** One counted add or several (distinct items), as `putCounted` takes them. */
export const counterAdds = (count: CounterAdd | readonly CounterAdd[]): readonly CounterAdd[] =>
  Array.isArray(count) ? count : [count as CounterAdd];

/** Check a counted write's names and deltas (both adapters and the fake): a bug, not a client error. */
export function checkCounterAdd(count: CounterAdd | readonly CounterAdd[]): void {
  const adds = counterAdds(count);
  if (adds.length === 0 || new Set(adds.map((a) => a.key)).size !== adds.length) {
    throw new TypeError('counted write: at least one counters item, each named once');
  }
  for (const add of adds) {
    for (const [name, delta] of Object.entries({ ...add.deltas, ...add.atMost })) {
      if (!COUNTER_NAME.test(name) || !Number.isInteger(delta)) {
        throw new TypeError(`counter ${name}: a name of letters and digits and a whole number`);
      }
    }
  }
}

/** The state table port. Errors: a lost condition is ConcurrentUpdateError; throttling/5xx AwsUnavailableError. */
export interface StateTable {
  get<T>(key: string, opts?: CallOptions): Promise<StoredItem<T> | undefined>;
  /**
   * Strongly consistent reads of many items, in requests of up to 100 keys (DynamoDB
   * BatchGetItem); keys without an item are absent from the result.
   */
  getMany<T>(keys: readonly string[], opts?: CallOptions): Promise<Map<string, StoredItem<T>>>;
  /**
   * Write the document and its index entries. `ifAbsent`: create only; `ifVersion`: update only
   * that version. Throws ConcurrentUpdateError when the condition does not hold.
   */
  put(
    key: string,
    value: unknown,
    indexes: IndexEntries,
    cond: { ifAbsent?: boolean; ifVersion?: string },
    opts?: CallOptions,
  ): Promise<{ version: string }>;
  /**
   * Add to numeric counters kept beside an existing item's document (a missing counter starts at
   * 0; a delta may be negative). Atomic, unconditional on the version and not changing it: many
   * writers can count at once without racing each other or the document's conditional writes,
   * and `put` keeps the counters. Returns the counters' new values. NotFoundError when the item
   * does not exist.
   */
  increment(key: string, deltas: Record<string, number>, opts?: CallOptions): Promise<Record<string, number>>;
  /**
   * `put`, and in the same transaction (DynamoDB TransactWriteItems: all or nothing) add to the
   * counters of another item (or of several: the team's in-flight counters and its usage ledger,
   * lib/usage/ledger.ts), created without a document when absent. ConcurrentUpdateError when
   * `cond` does not hold (or the transaction lost a conflict: read again and retry);
   * CounterLimitError (with the item's `key`) when a counter would pass its ceiling
   * (`atMost`) — nothing is written.
   */
  putCounted(
    key: string,
    value: unknown,
    indexes: IndexEntries,
    cond: { ifAbsent?: boolean; ifVersion?: string },
    count: CounterAdd | readonly CounterAdd[],
    opts?: CallOptions,
  ): Promise<{ version: string }>;
  /** One page of an index partition. */
  query<T>(index: IndexName, partition: string, page: QueryPage, opts?: CallOptions): Promise<QueryResult<T>>;
  delete(key: string, opts?: CallOptions): Promise<void>;
}

/** The sort key of listed items: creation time, then id (two items created in one millisecond stay ordered). */
export const byCreation = (createdAt: string, id: string) => `${createdAt}#${id}`;
