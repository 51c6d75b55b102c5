import { mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import dynalite from 'dynalite';
import { makeDynamoStateTable } from '../lib/adapters/aws/dynamodb-table.ts';
import { INDEXES, type StateTable } from '../lib/state/table.ts';

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
  close(): Promise<void>;
}

/**
 * A DynamoDB-compatible server for the embedded default: dynalite (MIT; LevelDB on disk when
 * `dataDir` is given, memory otherwise), bound to 127.0.0.1, with the state table created when
 * it is not there yet. dynalite implements the item, query and index calls Gantry uses; it has
 * no transactions, so Gantry's store changes one item per write (see lib/state/table.ts).
 */
export async function startLocalStateTable(
  opts: { dataDir?: string; tableName?: string } = {},
): Promise<LocalStateTable> {
  const tableName = opts.tableName ?? 'gantry-state';
  if (opts.dataDir) mkdirSync(opts.dataDir, { recursive: true });
  const server = dynalite({
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
    ...(opts.dataDir ? { path: opts.dataDir } : {}),
  });
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
    if (!exists) await raw.send(new CreateTableCommand(stateTableDefinition(tableName)));
  } catch (err) {
    await close();
    throw err;
  }
  return { endpoint, tableName, client: DynamoDBDocumentClient.from(raw), close };
}

/** The state table of a local stack, through the production adapter. */
export function tableOfStack(stack: {
  stateTable: { name: string; client: DynamoDBDocumentClient };
}): StateTable {
  return makeDynamoStateTable({ client: stack.stateTable.client, tableName: stack.stateTable.name });
}
