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
 * none): a loop that scans the state table's `run#` items and hands each changed record to the
 * outbox with how far its events were already sent. The watermarks are saved (to `cursorFile`,
 * when the stack keeps state on disk) only after the outbox has queued the events, so a stop
 * between the two sends them again on the next start, with the same ids: at least once, as on AWS.
 */
export function startEventsFeed(opts: {
  client: DynamoDBDocumentClient;
  tableName: string;
  emit: (after: RunRecord, seen: EventWatermark) => Promise<unknown>;
  cursorFile?: string;
  /** Pass interval (default 250 ms); 0 = no loop, the caller ticks. */
  everyMs?: number;
  onError?: (err: unknown) => void;
}) {
  type Seen = EventWatermark & { ver: number };
  let seen: Map<string, Seen> | undefined;
  let stopped = false;
  let wake: (() => void) | undefined;

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

  /** One pass: every run record changed since the last pass gets its new events queued. */
  async function pass(): Promise<number> {
    seen ??= await load();
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
        const before = seen.get(pk);
        if (before && before.ver >= Number(item.ver)) continue;
        // The body is read only for changed items: most passes change nothing.
        const got = await opts.client.send(
          new GetCommand({ TableName: opts.tableName, Key: { pk }, ConsistentRead: true }),
        );
        if (!got.Item) continue;
        const record = JSON.parse(String(got.Item.body)) as RunRecord;
        const current = Number(got.Item.ver);
        await opts.emit(record, before ?? { phases: 0 });
        seen.set(pk, { ...watermarkOf(record), ver: current });
        changed++;
      }
      start = out.LastEvaluatedKey;
    } while (start);
    if (changed > 0) await save(seen);
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
      wake?.();
      await loop;
    },
  };
}
