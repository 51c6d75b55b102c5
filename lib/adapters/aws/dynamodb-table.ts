import {
  BatchGetCommand,
  type BatchGetCommandOutput,
  DeleteCommand,
  type DynamoDBDocumentClient,
  GetCommand,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { AwsUnavailableError, ConcurrentUpdateError, NotFoundError, ValidationError } from '../../errors.ts';
import type { CallOptions } from '../../ports.ts';
import {
  COUNTER_NAME,
  type CounterAdd,
  CounterLimitError,
  checkCounterAdd,
  counterAdds,
  INDEXES,
  type IndexEntries,
  type IndexName,
  type StateTable,
} from '../../state/table.ts';
import { translateAwsError } from './errors.ts';

/**
 * The StateTable port on DynamoDB. An item is `{ pk, body, ver, g1pk, g1sk, …, c_<name>, … }`: the
 * document as JSON text in `body` (stored as written, whatever its shape — no marshalling of empty
 * strings or nested undefineds), a version number in `ver`, the index keys it belongs to, and its
 * counters as number attributes (`ADD`ed by `increment`). A put is an UpdateItem that sets the
 * document, version and index keys (removing the index keys not given), so it keeps the counters;
 * `putCounted` is that UpdateItem and an `ADD` on the counters' item in one TransactWriteItems.
 * Reads are strongly consistent; a list reads a GSI (eventually consistent, as every GSI is).
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
        const counters = countersOf(out.Item);
        return {
          value: JSON.parse(String(out.Item.body)) as T,
          version: String(out.Item.ver),
          ...(counters ? { counters } : {}),
        };
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
      const { update, version } = putUpdate(TableName, key, value, indexes, cond);
      try {
        await client.send(new UpdateCommand(update), sendOpts(opts));
        return { version };
      } catch (err) {
        throw translateAwsError(err, `put ${key} in ${TableName}`);
      }
    },

    async putCounted(key, value, indexes, cond, count, opts) {
      checkCounterAdd(count);
      const adds = counterAdds(count);
      const { update, version } = putUpdate(TableName, key, value, indexes, cond);
      const counted = adds.map((add) => counterUpdate(TableName, add));
      try {
        await client.send(
          new TransactWriteCommand({
            TransactItems: [{ Update: update }, ...counted.map((Update) => ({ Update }))],
          }),
          sendOpts(opts),
        );
        return { version };
      } catch (err) {
        const reasons = (err as { name?: string; CancellationReasons?: Array<{ Code?: string }> })
          .CancellationReasons;
        if ((err as { name?: string }).name === 'TransactionCanceledException' && reasons) {
          // The record's own condition first: a lost race is read again; then the ceiling.
          if (
            reasons[0]?.Code === 'ConditionalCheckFailed' ||
            reasons.some((r) => r.Code === 'TransactionConflict')
          ) {
            throw new ConcurrentUpdateError(
              `put ${key} in ${TableName}: a concurrent writer changed it first`,
              {
                cause: err,
              },
            );
          }
          const refused = adds.find((_, i) => reasons[i + 1]?.Code === 'ConditionalCheckFailed');
          if (refused) {
            throw new CounterLimitError(`counters of ${refused.key} in ${TableName} would pass a ceiling`, {
              cause: err,
              key: refused.key,
            });
          }
        }
        throw translateAwsError(
          err,
          `put ${key} with counters of ${adds.map((a) => a.key).join(', ')} in ${TableName}`,
        );
      }
    },

    async increment(key, deltas, opts) {
      const entries = Object.entries(deltas);
      for (const [name, delta] of entries) {
        if (!COUNTER_NAME.test(name) || !Number.isInteger(delta)) {
          throw new TypeError(`counter ${name}: a name of letters and digits and a whole delta`);
        }
      }
      if (entries.length === 0) return {};
      const names: Record<string, string> = {};
      const values: Record<string, number> = {};
      entries.forEach(([name, delta], i) => {
        names[`#c${i}`] = `c_${name}`;
        values[`:d${i}`] = delta;
      });
      try {
        const out = await client.send(
          new UpdateCommand({
            TableName,
            Key: { pk: key },
            UpdateExpression: `ADD ${entries.map((_, i) => `#c${i} :d${i}`).join(', ')}`,
            ConditionExpression: 'attribute_exists(pk)',
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: values,
            ReturnValues: 'UPDATED_NEW',
          }),
          sendOpts(opts),
        );
        return countersOf(out.Attributes ?? {}) ?? {};
      } catch (err) {
        if ((err as { name?: string }).name === 'ConditionalCheckFailedException') {
          throw new NotFoundError(`${key} does not exist in ${TableName}: nothing to count on`);
        }
        throw translateAwsError(err, `increment counters of ${key} in ${TableName}`);
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
      let rows = (out.Items ?? []).map((i: Record<string, unknown>) => {
        const counters = countersOf(i);
        return {
          value: JSON.parse(String(i.body)) as T,
          meta: { version: String(i.ver), ...(counters ? { counters } : {}) },
        };
      });
      const where = page.where;
      if (where) rows = rows.filter((r) => where(r.value));
      return {
        items: rows.map((r) => r.value),
        meta: rows.map((r) => r.meta),
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

/**
 * The UpdateItem of a put: sets the document, version and index keys (removing the index keys not
 * given), so the item's counters are kept; conditioned on `cond`.
 */
function putUpdate(
  TableName: string,
  key: string,
  value: unknown,
  indexes: IndexEntries,
  cond: { ifAbsent?: boolean; ifVersion?: string },
) {
  const ver = cond.ifVersion === undefined ? 1 : Number(cond.ifVersion) + 1;
  const names: Record<string, string> = { '#body': 'body', '#ver': 'ver' };
  const values: Record<string, unknown> = { ':body': JSON.stringify(value), ':ver': ver };
  const set = ['#body = :body', '#ver = :ver'];
  const remove: string[] = [];
  for (const [name, attrs] of Object.entries(INDEXES)) {
    const entry = indexes[name as IndexName];
    names[`#${attrs.pk}`] = attrs.pk;
    names[`#${attrs.sk}`] = attrs.sk;
    if (entry) {
      set.push(`#${attrs.pk} = :${attrs.pk}`, `#${attrs.sk} = :${attrs.sk}`);
      values[`:${attrs.pk}`] = entry.pk;
      values[`:${attrs.sk}`] = entry.sk;
    } else {
      remove.push(`#${attrs.pk}`, `#${attrs.sk}`);
    }
  }
  let condition: string | undefined;
  if (cond.ifAbsent) condition = 'attribute_not_exists(pk)';
  else if (cond.ifVersion !== undefined) {
    condition = '#ver = :expected';
    values[':expected'] = Number(cond.ifVersion);
  }
  return {
    version: String(ver),
    update: {
      TableName,
      Key: { pk: key },
      UpdateExpression: `SET ${set.join(', ')}${remove.length ? ` REMOVE ${remove.join(', ')}` : ''}`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ...(condition ? { ConditionExpression: condition } : {}),
    },
  };
}

/** DynamoDB's BatchGetItem limit: 100 keys per request. */
const BATCH_GET_MAX = 100;
const BATCH_GET_ATTEMPTS = 5;

/** The `c_<name>` number attributes of an item, by name; undefined when it has none. */
function countersOf(item: Record<string, unknown>): Record<string, number> | undefined {
  let counters: Record<string, number> | undefined;
  for (const [attr, value] of Object.entries(item)) {
    if (!attr.startsWith('c_') || typeof value !== 'number') continue;
    counters ??= {};
    counters[attr.slice(2)] = value;
  }
  return counters;
}

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

/** The `ADD` on one counters' item of a counted write, with its ceilings as the condition. */
function counterUpdate(TableName: string, count: CounterAdd) {
  const names: Record<string, string> = { '#body': 'body', '#ver': 'ver' };
  const values: Record<string, unknown> = { ':emptyBody': '{}', ':zero': 0 };
  const adds: string[] = [];
  const limits: string[] = [];
  Object.entries(count.deltas).forEach(([name, delta], i) => {
    names[`#c${i}`] = `c_${name}`;
    values[`:d${i}`] = delta;
    adds.push(`#c${i} :d${i}`);
    const ceiling = count.atMost?.[name];
    if (ceiling === undefined) return;
    // A delta above the ceiling cannot fit even on an absent (zero) counter.
    if (delta > ceiling)
      throw new CounterLimitError(`counter ${name}: ${delta} exceeds its ceiling ${ceiling}`, {
        key: count.key,
      });
    values[`:max${i}`] = ceiling - delta;
    limits.push(`(attribute_not_exists(#c${i}) OR #c${i} <= :max${i})`);
  });
  return {
    TableName,
    Key: { pk: count.key },
    UpdateExpression: `SET #body = if_not_exists(#body, :emptyBody), #ver = if_not_exists(#ver, :zero) ADD ${adds.join(', ')}`,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: values,
    ...(limits.length ? { ConditionExpression: limits.join(' AND ') } : {}),
  };
}
