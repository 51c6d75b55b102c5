import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  type AttributeValue,
  BatchWriteItemCommand,
  type BatchWriteItemCommandInput,
  type BatchWriteItemCommandOutput,
  DeleteItemCommand,
  type DeleteItemCommandInput,
  type DynamoDBClient,
  PutItemCommand,
  type PutItemCommandInput,
  ScanCommand,
  TransactWriteItemsCommand,
  type TransactWriteItemsCommandInput,
  UpdateItemCommand,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { mapLimit } from '../lib/concurrency.ts';

/**
 * Crash-safe persistence of the local state table (the embedded default's DynamoDB stand-in).
 *
 * dynalite on LevelDB updates an item and its index entries as separate LevelDB writes, so a
 * `kill -9` between them left indexes that disagree with items (a run missing from every `?phase=`
 * listing, team caps summed wrong, for good). Here dynalite keeps the table in memory only, and
 * what survives a crash is a snapshot of the items plus a journal of the write requests dynalite
 * answered since: each write's request is appended (one line, written before its answer leaves the
 * server) and at start the snapshot is loaded and the journal replayed into the empty table, so
 * dynalite rebuilds every index from the items themselves, then both are compacted into a new
 * snapshot. A torn last line (a kill mid-append) is dropped: that write was never answered.
 * A process crash loses nothing that was answered (the appends are in the OS's page cache); a
 * power loss may lose the last writes (no fsync per write; the snapshot is fsynced).
 *
 * Files in the folder: `snapshot.jsonl` (first line `{"generation":G}`, then one item a line in
 * DynamoDB JSON) and `journal-G.jsonl` (`{"op":"PutItem","input":{…}}` a line). A compaction writes
 * snapshot G+1 (temp file, fsync, rename) before it starts journal G+1, so a crash between the two
 * never replays journal G on top of a snapshot that already holds it.
 */

/**
 * The write operations journaled: the ones Gantry's adapter sends. A transaction
 * (local/dynamo-transactions.ts) is one line, written once all its actions applied: a crash in the
 * middle of one leaves nothing of it after the restart, as on AWS.
 */
export const JOURNALED = new Set([
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'BatchWriteItem',
  'TransactWriteItems',
]);

export interface StateJournal {
  /** Append one answered write (call before its answer is sent). */
  append(operation: string, body: string): void;
  close(): void;
}

export interface RecoveryReport {
  snapshotItems: number;
  journalWrites: number;
  /** Journal lines not replayed: a torn last line, or a write the table refused on replay. */
  dropped: number;
  /** Items carried over from a LevelDB folder of an earlier version (moved aside after). */
  migratedItems: number;
  ms: number;
}

const SNAPSHOT = 'snapshot.jsonl';
const journalFile = (dir: string, generation: number) => join(dir, `journal-${generation}.jsonl`);

type Item = Record<string, AttributeValue>;

function readSnapshot(dir: string): { generation: number; items: Item[] } {
  const file = join(dir, SNAPSHOT);
  if (!existsSync(file)) return { generation: 0, items: [] };
  const [head, ...lines] = readFileSync(file, 'utf8').split('\n').filter(Boolean);
  const generation = Number((JSON.parse(head ?? '{}') as { generation?: number }).generation ?? 0);
  return { generation, items: lines.map((l) => JSON.parse(l) as Item) };
}

function readJournal(
  dir: string,
  generation: number,
): { writes: Array<{ op: string; input: unknown }>; torn: number } {
  const file = journalFile(dir, generation);
  if (!existsSync(file)) return { writes: [], torn: 0 };
  const writes: Array<{ op: string; input: unknown }> = [];
  let torn = 0;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    try {
      writes.push(JSON.parse(line) as { op: string; input: unknown });
    } catch {
      torn++; // a kill mid-append: that write was never answered
    }
  }
  return { writes, torn };
}

async function putAll(client: DynamoDBClient, tableName: string, items: Item[]): Promise<void> {
  const batches: Item[][] = [];
  for (let i = 0; i < items.length; i += 25) batches.push(items.slice(i, i + 25));
  await mapLimit(batches, 8, async (batch) => {
    let request: BatchWriteItemCommandInput['RequestItems'] = {
      [tableName]: batch.map((Item) => ({ PutRequest: { Item } })),
    };
    while (request && Object.keys(request).length > 0) {
      const out: BatchWriteItemCommandOutput = await client.send(
        new BatchWriteItemCommand({ RequestItems: request }),
      );
      request = out.UnprocessedItems;
    }
  });
}

async function replay(client: DynamoDBClient, op: string, input: unknown): Promise<void> {
  switch (op) {
    case 'PutItem':
      await client.send(new PutItemCommand(input as PutItemCommandInput));
      return;
    case 'UpdateItem':
      await client.send(new UpdateItemCommand(input as UpdateItemCommandInput));
      return;
    case 'DeleteItem':
      await client.send(new DeleteItemCommand(input as DeleteItemCommandInput));
      return;
    case 'BatchWriteItem':
      await client.send(new BatchWriteItemCommand(input as BatchWriteItemCommandInput));
      return;
    case 'TransactWriteItems':
      await client.send(new TransactWriteItemsCommand(input as TransactWriteItemsCommandInput));
      return;
    default:
      throw new Error(`state journal: cannot replay ${op}`);
  }
}

async function scanAll(client: DynamoDBClient, tableName: string): Promise<Item[]> {
  const items: Item[] = [];
  let ExclusiveStartKey: Item | undefined;
  do {
    const page = await client.send(new ScanCommand({ TableName: tableName, ExclusiveStartKey }));
    items.push(...(page.Items ?? []));
    ExclusiveStartKey = page.LastEvaluatedKey;
  } while (ExclusiveStartKey);
  return items;
}

function writeSnapshot(dir: string, generation: number, items: Item[]): void {
  const tmp = join(dir, `${SNAPSHOT}.tmp`);
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, `${JSON.stringify({ generation })}\n`);
    for (const item of items) writeSync(fd, `${JSON.stringify(item)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, join(dir, SNAPSHOT));
}

/** A LevelDB folder of dynalite (the layout before the journal): its `CURRENT` file. */
const isLevelDb = (dir: string) => existsSync(join(dir, 'CURRENT'));

/**
 * Recover the table from `dir` into the empty in-memory table behind `client`, compact, and open
 * the journal for the writes to come. `legacyItems` reads the items of a LevelDB folder of an
 * earlier version (migrated once; the folder is then moved to `legacy-leveldb/`).
 */
export async function recoverStateTable(
  dir: string,
  client: DynamoDBClient,
  tableName: string,
  legacyItems: (dir: string) => Promise<Item[]>,
): Promise<{ journal: StateJournal; report: RecoveryReport }> {
  const t0 = performance.now();
  mkdirSync(dir, { recursive: true });
  let migratedItems = 0;
  if (isLevelDb(dir) && !existsSync(join(dir, SNAPSHOT))) {
    const items = await legacyItems(dir);
    const aside = join(dir, 'legacy-leveldb');
    mkdirSync(aside, { recursive: true });
    for (const name of readdirSync(dir)) {
      if (name !== 'legacy-leveldb') renameSync(join(dir, name), join(aside, name));
    }
    writeSnapshot(dir, 0, items);
    migratedItems = items.length;
  }
  const { generation, items } = readSnapshot(dir);
  await putAll(client, tableName, items);
  const { writes, torn } = readJournal(dir, generation);
  let dropped = torn;
  for (const w of writes) {
    // A write was journaled only once the table had answered it, so on the same items it applies
    // again; one that does not (e.g. a condition) is counted, not fatal.
    await replay(client, w.op, w.input).catch(() => {
      dropped++;
    });
  }
  // Compact: the table as it now is becomes snapshot G+1; journal G+1 starts empty.
  const next = generation + 1;
  writeSnapshot(dir, next, await scanAll(client, tableName));
  for (const name of readdirSync(dir)) {
    if (/^journal-\d+\.jsonl$/.test(name) && name !== `journal-${next}.jsonl`) rmSync(join(dir, name));
  }
  const fd = openSync(journalFile(dir, next), 'a');
  let open = true;
  const journal: StateJournal = {
    append(operation, body) {
      if (!open) return;
      // One write() of the whole line: a kill can tear only the last line.
      writeSync(fd, `${JSON.stringify({ op: operation, input: JSON.parse(body) })}\n`);
    },
    close() {
      if (!open) return;
      open = false;
      closeSync(fd);
    },
  };
  return {
    journal,
    report: {
      snapshotItems: items.length,
      journalWrites: writes.length,
      dropped,
      migratedItems,
      ms: Math.round(performance.now() - t0),
    },
  };
}
