import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
} from '@aws-sdk/lib-dynamodb';
import { AwsUnavailableError, ValidationError } from '../../errors.ts';
import type { CallOptions } from '../../ports.ts';
import { INDEXES, type IndexName, type StateTable } from '../../state/table.ts';
import { translateAwsError } from './errors.ts';

/**
 * The StateTable port on DynamoDB. An item is `{ pk, body, ver, g1pk, g1sk, … }`: the document as
 * JSON text in `body` (stored as written, whatever its shape — no marshalling of empty strings
 * or nested undefineds), a version number in `ver`, and the index keys it belongs to. Reads are
 * strongly consistent; a list reads a GSI (eventually consistent, as every GSI is).
 */
export function makeDynamoStateTable(deps: {
  client: DynamoDBDocumentClient;
  tableName: string;
}): StateTable {
  const { client, tableName: TableName } = deps;
  return {
    async get<T>(key: string, opts?: CallOptions) {
      try {
        const out = await client.send(
          new GetCommand({ TableName, Key: { pk: key }, ConsistentRead: true }),
          sendOpts(opts),
        );
        if (!out.Item) return undefined;
        return { value: JSON.parse(String(out.Item.body)) as T, version: String(out.Item.ver) };
      } catch (err) {
        throw translateAwsError(err, `get ${key} from ${TableName}`);
      }
    },

    async getMany<T>(keys: readonly string[], opts?: CallOptions) {
      const found = new Map<string, { value: T; version: string }>();
      const unique = [...new Set(keys)];
      for (let i = 0; i < unique.length; i += BATCH_GET_MAX) {
        let pending: Array<Record<string, unknown>> = unique
          .slice(i, i + BATCH_GET_MAX)
          .map((pk) => ({ pk }));
        // BatchGetItem may return part of a batch under load (UnprocessedKeys): ask again for the rest.
        for (let attempt = 1; pending.length > 0; attempt++) {
          let out: BatchGetCommandOutput;
          try {
            out = await client.send(
              new BatchGetCommand({
                RequestItems: { [TableName]: { Keys: pending, ConsistentRead: true } },
              }),
              sendOpts(opts),
            );
          } catch (err) {
            throw translateAwsError(err, `batch get ${pending.length} items from ${TableName}`);
          }
          for (const item of out.Responses?.[TableName] ?? []) {
            found.set(String(item.pk), {
              value: JSON.parse(String(item.body)) as T,
              version: String(item.ver),
            });
          }
          pending = out.UnprocessedKeys?.[TableName]?.Keys ?? [];
          if (pending.length === 0) break;
          if (attempt >= BATCH_GET_ATTEMPTS) {
            throw new AwsUnavailableError(
              `batch get from ${TableName}: ${pending.length} keys still unprocessed after ${attempt} attempts`,
            );
          }
          await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
        }
      }
      return found;
    },

    async put(key, value, indexes, cond, opts) {
      const ver = cond.ifVersion === undefined ? 1 : Number(cond.ifVersion) + 1;
      const item: Record<string, unknown> = { pk: key, body: JSON.stringify(value), ver };
      for (const [name, entry] of Object.entries(indexes)) {
        if (!entry) continue;
        const attrs = INDEXES[name as IndexName];
        item[attrs.pk] = entry.pk;
        item[attrs.sk] = entry.sk;
      }
      const condition = cond.ifAbsent
        ? { ConditionExpression: 'attribute_not_exists(pk)' }
        : cond.ifVersion !== undefined
          ? {
              ConditionExpression: 'ver = :ver',
              ExpressionAttributeValues: { ':ver': Number(cond.ifVersion) },
            }
          : {};
      try {
        await client.send(new PutCommand({ TableName, Item: item, ...condition }), sendOpts(opts));
        return { version: String(ver) };
      } catch (err) {
        throw translateAwsError(err, `put ${key} in ${TableName}`);
      }
    },

    async query<T>(
      index: IndexName,
      partition: string,
      page: Parameters<StateTable['query']>[2],
      opts?: CallOptions,
    ) {
      const attrs = INDEXES[index];
      const input: QueryCommandInput = {
        TableName,
        IndexName: index,
        KeyConditionExpression: page.sortFrom === undefined ? '#p = :p' : '#p = :p AND #s >= :from',
        ExpressionAttributeNames: {
          '#p': attrs.pk,
          ...(page.sortFrom === undefined ? {} : { '#s': attrs.sk }),
        },
        ExpressionAttributeValues: {
          ':p': partition,
          ...(page.sortFrom === undefined ? {} : { ':from': page.sortFrom }),
        },
        Limit: page.limit,
        ScanIndexForward: page.descending === false,
        ...(page.cursor ? { ExclusiveStartKey: decodeCursor(page.cursor) } : {}),
      };
      let out: QueryCommandOutput;
      try {
        out = await client.send(new QueryCommand(input), sendOpts(opts));
      } catch (err) {
        throw translateAwsError(err, `query ${index} of ${TableName}`);
      }
      let items = (out.Items ?? []).map((i: Record<string, unknown>) => JSON.parse(String(i.body)) as T);
      if (page.where) items = items.filter(page.where);
      return {
        items,
        read: out.ScannedCount ?? out.Count ?? 0,
        ...(out.LastEvaluatedKey ? { cursor: encodeCursor(out.LastEvaluatedKey) } : {}),
      };
    },

    async delete(key, opts) {
      try {
        await client.send(new DeleteCommand({ TableName, Key: { pk: key } }), sendOpts(opts));
      } catch (err) {
        throw translateAwsError(err, `delete ${key} from ${TableName}`);
      }
    },
  };
}

/** DynamoDB's BatchGetItem limit: 100 keys per request. */
const BATCH_GET_MAX = 100;
const BATCH_GET_ATTEMPTS = 5;

function encodeCursor(key: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

/** A cursor this adapter made: a flat object of string keys; anything else is a client error. */
function decodeCursor(cursor: string): Record<string, string> {
  try {
    const parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (
      parsed &&
      typeof parsed === 'object' &&
      !Array.isArray(parsed) &&
      Object.values(parsed).every((v) => typeof v === 'string')
    ) {
      return parsed as Record<string, string>;
    }
  } catch {
    // fall through
  }
  throw new ValidationError([{ field: 'nextToken', rule: 'is not a token this API returned' }]);
}

function sendOpts(opts?: CallOptions) {
  return opts?.signal ? { abortSignal: opts.signal } : undefined;
}
