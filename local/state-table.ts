import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type AttributeValue,
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DynamoDBClient,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import dynalite from 'dynalite';
import { makeDynamoStateTable } from '../lib/adapters/aws/dynamodb-table.ts';
import { INDEXES, type StateTable } from '../lib/state/table.ts';
import { serveTransactions } from './dynamo-transactions.ts';
import { JOURNALED, type RecoveryReport, recoverStateTable, type StateJournal } from './state-journal.ts';

/**
 * The state table's shape: the same key schema and indexes as `serverless.yml`'s StateTable
 * (test/deploy/template.test.ts compares them), on-demand billing.
 */
export function stateTableDefinition(TableName: string): CreateTableCommandInput {
  const attrs = new Set<string>(['pk']);
  for (const { pk, sk } of Object.values(INDEXES)) {
    attrs.add(pk);
    attrs.add(sk);
  }
  return {
    TableName,
    BillingMode: 'PAY_PER_REQUEST',
    AttributeDefinitions: [...attrs].map((AttributeName) => ({ AttributeName, AttributeType: 'S' })),
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    GlobalSecondaryIndexes: Object.entries(INDEXES).map(([IndexName, { pk, sk }]) => ({
      IndexName,
      KeySchema: [
        { AttributeName: pk, KeyType: 'HASH' },
        { AttributeName: sk, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'ALL' },
    })),
  };
}

export interface LocalStateTable {
  endpoint: string;
  tableName: string;
  /** A document client for the table (the stack's own; handlers build theirs from the endpoint). */
  client: DynamoDBDocumentClient;
  /**
   * Calls `listener` with the key (`pk`) of each item a write request changed, once the server has
   * answered it successfully (PutItem, UpdateItem, DeleteItem, BatchWriteItem; any client, this
   * process or another): the local server's change notification. Returns the unsubscribe.
   */
  onWrite(listener: (pk: string) => void): () => void;
  /** What recovery found at start, when the table is kept in a folder (local/state-journal.ts). */
  recovery?: RecoveryReport;
  close(): Promise<void>;
}

/** The item keys (`pk`) a DynamoDB write request names, from its operation and JSON body. */
export function writtenKeys(operation: string, body: string, tableName: string): string[] {
  const pkOf = (item: unknown) => {
    const pk = (item as { pk?: { S?: unknown } } | undefined)?.pk?.S;
    return typeof pk === 'string' ? [pk] : [];
  };
  let input: {
    TableName?: string;
    Item?: unknown;
    Key?: unknown;
    RequestItems?: Record<
      string,
      Array<{ PutRequest?: { Item?: unknown }; DeleteRequest?: { Key?: unknown } }>
    >;
    TransactItems?: Array<Record<string, { TableName?: string; Item?: unknown; Key?: unknown } | undefined>>;
  };
  try {
    input = JSON.parse(body);
  } catch {
    return [];
  }
  switch (operation) {
    case 'PutItem':
      return input.TableName === tableName ? pkOf(input.Item) : [];
    case 'UpdateItem':
    case 'DeleteItem':
      return input.TableName === tableName ? pkOf(input.Key) : [];
    case 'BatchWriteItem':
      return (input.RequestItems?.[tableName] ?? []).flatMap((r) =>
        pkOf(r.PutRequest?.Item ?? r.DeleteRequest?.Key),
      );
    case 'TransactWriteItems':
      return (input.TransactItems ?? []).flatMap((t) => {
        const action = t.Put ?? t.Update ?? t.Delete;
        return action?.TableName === tableName ? pkOf(action.Item ?? action.Key) : [];
      });
    default:
      return [];
  }
}

const WRITES = new Set(['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'TransactWriteItems']);

/**
 * A DynamoDB-compatible server for the embedded default: dynalite (MIT), bound to 127.0.0.1, with
 * the state table created at start. dynalite implements the item, query and index calls Gantry
 * uses but not TransactWriteItems (the run record and its team's counters, lib/state/table.ts
 * `putCounted`): local/dynamo-transactions.ts serves it in front of dynalite, with the
 * limitations it names. dynalite keeps the table in memory; with `dataDir` the table survives
 * restarts and `kill -9` at any instant through a snapshot and a journal of answered writes
 * (local/state-journal.ts), not through dynalite's LevelDB, whose item and index writes a crash
 * can separate.
 */
export async function startLocalStateTable(
  opts: { dataDir?: string; tableName?: string } = {},
): Promise<LocalStateTable> {
  const tableName = opts.tableName ?? 'gantry-state';
  const { server, endpoint, raw, close: closeServer } = await startDynalite(tableName);
  const listeners = new Set<(pk: string) => void>();
  let journal: StateJournal | undefined;
  // Beside dynalite's own handler: a write's body is kept; once dynalite answered it successfully
  // (a failed condition answers 400 and changed nothing) it is journaled before the answer leaves,
  // and its keys are told.
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const operation = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
    if (!WRITES.has(operation) || (listeners.size === 0 && !journal)) return;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    if (journal && JOURNALED.has(operation)) {
      const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
      res.end = ((...args: unknown[]) => {
        if (res.statusCode === 200) journal?.append(operation, Buffer.concat(chunks).toString('utf8'));
        return end(...args);
      }) as typeof res.end;
    }
    res.on('finish', () => {
      if (res.statusCode !== 200 || listeners.size === 0) return;
      for (const pk of writtenKeys(operation, Buffer.concat(chunks).toString('utf8'), tableName))
        for (const listener of listeners) listener(pk);
    });
  });
  let recovery: RecoveryReport | undefined;
  const close = async () => {
    await closeServer();
    journal?.close();
  };
  if (opts.dataDir) {
    try {
      const recovered = await recoverStateTable(opts.dataDir, raw, tableName, legacyItems(tableName));
      journal = recovered.journal;
      recovery = recovered.report;
    } catch (err) {
      await close();
      throw err;
    }
  }
  const onWrite = (listener: (pk: string) => void) => {
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
    };
  };
  return {
    endpoint,
    tableName,
    client: DynamoDBDocumentClient.from(raw),
    onWrite,
    ...(recovery ? { recovery } : {}),
    close,
  };
}

/** dynalite in memory on 127.0.0.1 with the (empty) state table. */
async function startDynalite(tableName: string, path?: string) {
  const server = dynalite({
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(path ? { path } : {}),
  });
  serveTransactions(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const raw = new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
  const close = async () => {
    raw.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  try {
    const exists = await raw.send(new DescribeTableCommand({ TableName: tableName })).then(
      () => true,
      (err: { name?: string }) => {
        if (err.name === 'ResourceNotFoundException') return false;
        throw err;
      },
    );
    if (!exists) {
      await raw.send(new CreateTableCommand(stateTableDefinition(tableName)));
      await activeTable(raw, tableName);
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { server, endpoint, raw, close };
}

/**
 * Wait until a new table is ACTIVE: dynalite answers item calls on a CREATING table with
 * ResourceNotFoundException, and even with `createTableMs: 0` the switch is a timer away.
 */
export async function activeTable(raw: DynamoDBClient, tableName: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const t = await raw.send(new DescribeTableCommand({ TableName: tableName }));
    if (t.Table?.TableStatus === 'ACTIVE') return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`local state table ${tableName} is not ACTIVE after 2 s`);
}

/** The items of a state folder of an earlier version (dynalite's LevelDB), read once to migrate it. */
function legacyItems(tableName: string) {
  return async (dir: string) => {
    const old = await startDynalite(tableName, dir);
    try {
      const items: Array<Record<string, AttributeValue>> = [];
      let ExclusiveStartKey: Record<string, AttributeValue> | undefined;
      do {
        const page = await old.raw.send(new ScanCommand({ TableName: tableName, ExclusiveStartKey }));
        items.push(...(page.Items ?? []));
        ExclusiveStartKey = page.LastEvaluatedKey;
      } while (ExclusiveStartKey);
      return items;
    } finally {
      await old.close();
    }
  };
}

/** The state table of a local stack, through the production adapter. */
export function tableOfStack(stack: {
  stateTable: { name: string; client: DynamoDBDocumentClient };
}): StateTable {
  return makeDynamoStateTable({ client: stack.stateTable.client, tableName: stack.stateTable.name });
}
