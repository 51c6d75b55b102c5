import { readFile, rename, writeFile } from 'node:fs/promises';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  ScanCommand,
  type ScanCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import { type EventWatermark, watermarkOf } from '../lib/events/event.ts';
import type { RunRecord } from '../lib/run/record.ts';

/**
 * The embedded default's stand-in for DynamoDB Streams (the local DynamoDB-compatible server has
 * none): a loop that hands each changed `run#` record of the state table to the outbox with how
 * far its events were already sent. The watermarks are saved (to `cursorFile`, when the stack keeps
 * state on disk) only after the outbox has queued the events, so a stop between the two sends them
 * again on the next start, with the same ids: at least once, as on AWS.
 *
 * Which records changed: with `changes` (the local server's committed writes, `LocalStateTable.onWrite`)
 * the first pass scans the table once (what changed while the feed was stopped) and later passes
 * read only the records written since — as a stream delivers item changes, and at a cost that does
 * not grow with the table. Without it every pass scans the table's `run#` items.
 */
export function startEventsFeed(opts: {
  client: DynamoDBDocumentClient;
  tableName: string;
  emit: (after: RunRecord, seen: EventWatermark) => Promise<unknown>;
  cursorFile?: string;
  /** Pass interval (default 250 ms); 0 = no loop, the caller ticks. */
  everyMs?: number;
  /** Subscribes to the keys (`pk`) of committed writes; returns the unsubscribe. */
  changes?: (listener: (pk: string) => void) => () => void;
  onError?: (err: unknown) => void;
}) {
  type Seen = EventWatermark & { ver: number };
  let seen: Map<string, Seen> | undefined;
  let stopped = false;
  let wake: (() => void) | undefined;
  /** Run records written since the last pass took them (only with `changes`, after the first scan). */
  let written = new Set<string>();
  let scanned = false;
  const unsubscribe = opts.changes?.((pk) => {
    if (pk.startsWith('run#')) written.add(pk);
  });

  async function load(): Promise<Map<string, Seen>> {
    if (!opts.cursorFile) return new Map();
    try {
      return new Map(
        Object.entries(JSON.parse(await readFile(opts.cursorFile, 'utf8')) as Record<string, Seen>),
      );
    } catch {
      return new Map();
    }
  }

  async function save(map: Map<string, Seen>) {
    if (!opts.cursorFile) return;
    const tmp = `${opts.cursorFile}.tmp`;
    await writeFile(tmp, JSON.stringify(Object.fromEntries(map)));
    await rename(tmp, opts.cursorFile);
  }

  // One pass at a time: the loop and a caller's tick() never scan side by side.
  let last: Promise<number> = Promise.resolve(0);
  function tick(): Promise<number> {
    last = last.then(pass, pass);
    return last;
  }

  /** A run record's new events, if it changed since it was last seen: true when it had changed. */
  async function handOver(pk: string, map: Map<string, Seen>): Promise<boolean> {
    const before = map.get(pk);
    // The body is read only for changed items: most passes change nothing.
    const got = await opts.client.send(
      new GetCommand({ TableName: opts.tableName, Key: { pk }, ConsistentRead: true }),
    );
    if (!got.Item) return false;
    const current = Number(got.Item.ver);
    if (before && before.ver >= current) return false;
    const record = JSON.parse(String(got.Item.body)) as RunRecord;
    await opts.emit(record, before ?? { phases: 0 });
    map.set(pk, { ...watermarkOf(record), ver: current });
    return true;
  }

  /** One pass: every run record changed since the last pass gets its new events queued. */
  async function pass(): Promise<number> {
    seen ??= await load();
    if (opts.changes && scanned) return passOverWritten(seen);
    // Writes from here on are read by the next pass; the scan below sees those before it.
    written = new Set();
    const changed = await passOverTable(seen);
    scanned = true;
    return changed;
  }

  /** The records written since the last pass; a failed pass leaves them for the next one. */
  async function passOverWritten(map: Map<string, Seen>): Promise<number> {
    const keys = [...written];
    written = new Set();
    let changed = 0;
    try {
      for (const pk of keys) if (await handOver(pk, map)) changed++;
    } catch (err) {
      for (const pk of keys) written.add(pk);
      throw err;
    }
    if (changed > 0) await save(map);
    return changed;
  }

  /** Every `run#` item of the table: a Scan of keys and versions, the bodies of changed ones. */
  async function passOverTable(map: Map<string, Seen>): Promise<number> {
    let changed = 0;
    let start: Record<string, unknown> | undefined;
    do {
      const out: ScanCommandOutput = await opts.client.send(
        new ScanCommand({
          TableName: opts.tableName,
          FilterExpression: 'begins_with(pk, :run)',
          ExpressionAttributeValues: { ':run': 'run#' },
          ProjectionExpression: 'pk, ver',
          ConsistentRead: true,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      for (const item of out.Items ?? []) {
        const pk = String(item.pk);
        const before = map.get(pk);
        if (before && before.ver >= Number(item.ver)) continue;
        if (await handOver(pk, map)) changed++;
      }
      start = out.LastEvaluatedKey;
    } while (start);
    if (changed > 0) await save(map);
    return changed;
  }

  // everyMs 0: no loop, the caller ticks (tests).
  const loop = (async () => {
    while (!stopped && opts.everyMs !== 0) {
      await tick().catch((err) => opts.onError?.(err));
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, opts.everyMs ?? 250);
      });
    }
  })();

  return {
    tick,
    async stop() {
      stopped = true;
      unsubscribe?.();
      wake?.();
      await loop;
    },
  };
}
