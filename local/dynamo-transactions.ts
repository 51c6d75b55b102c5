import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { crc32 } from 'node:zlib';

/**
 * TransactWriteItems for dynalite, which does not implement it (dynalite 4.0.0 answers
 * `UnknownOperationException`): a shim in front of dynalite's own request handler, in the same
 * process, used by the embedded default and the tests. On AWS the adapter sends the real
 * TransactWriteItems; nothing here runs there.
 *
 * How: every write request (PutItem, UpdateItem, DeleteItem, BatchWriteItem) holds a lock on the
 * items it names while dynalite serves it. A transaction takes the
 * locks of all its items, then applies its actions one by one through dynalite (each with its own
 * condition, `ReturnValues: ALL_OLD`); when one is refused it puts back the items the earlier ones
 * changed and answers `TransactionCanceledException` with a reason per action. So concurrent
 * writers see all of a transaction or none of it, and conditions hold exactly as on AWS.
 *
 * Limitations (named; the behaviour on AWS is not weakened by them):
 * - atomic against a crash only through the state journal (local/state-journal.ts): a transaction
 *   is journaled once all its actions applied, so a process killed between two actions comes back
 *   without any of it; in memory (no journal) a crash loses the table anyway;
 * - reads (GetItem, BatchGetItem, Query, Scan) take no locks: a read during a transaction can see
 *   part of it (on AWS, GetItem and BatchGetItem see all of it or none); the writes' conditions,
 *   which is what keeps a cap, are evaluated under the locks;
 * - only the first refused action is reported (`ConditionalCheckFailed`); the actions after it are
 *   reported `None` without being evaluated (AWS evaluates and reports each);
 * - transactions never conflict (`TransactionConflict`): they wait for each other's locks instead;
 * - `ClientRequestToken` (idempotent retries for 10 minutes) is ignored.
 */
export function serveTransactions(server: Server): void {
  const handlers = server.listeners('request') as Array<(req: IncomingMessage, res: ServerResponse) => void>;
  const first = handlers[0];
  if (!first) throw new Error('serveTransactions: the dynalite server has no request handler');
  const dynalite = first;
  server.removeListener('request', dynalite);
  const locks = new KeyLocks();

  /** Serve one request through dynalite, in process: the answer's status and body. */
  function call(
    headers: IncomingMessage['headers'],
    operation: string,
    body: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    return new Promise((resolve) => {
      const req = fakeRequest(
        { ...headers, 'x-amz-target': `DynamoDB_20120810.${operation}` },
        Buffer.from(JSON.stringify(body)),
      );
      const res = {
        statusCode: 200,
        contentType: 'application/x-amz-json-1.0',
        setHeader() {},
        end(out?: string) {
          let parsed: Record<string, unknown> = {};
          try {
            parsed = out ? (JSON.parse(out) as Record<string, unknown>) : {};
          } catch {
            parsed = { __type: 'UnreadableAnswer', message: String(out) };
          }
          resolve({ status: res.statusCode, body: parsed });
        },
      };
      dynalite(req, res as unknown as ServerResponse);
    });
  }

  async function transact(headers: IncomingMessage['headers'], input: TransactInput) {
    const items = input.TransactItems;
    if (!Array.isArray(items) || items.length < 1 || items.length > 100) {
      return validation('TransactItems must hold 1 to 100 actions');
    }
    const actions: Action[] = [];
    for (const item of items) {
      const kinds = Object.keys(item ?? {}) as Array<keyof TransactItem>;
      const kind = kinds[0];
      if (kinds.length !== 1 || !kind || !(kind in ACTION_KINDS)) {
        return validation(
          'each of TransactItems must hold exactly one of Put, Update, Delete, ConditionCheck',
        );
      }
      const action = item[kind] as ActionBody;
      const key = kind === 'Put' ? keyOf(action.Item) : action.Key;
      if (!action.TableName || !key) return validation(`${kind} needs a TableName and a key`);
      actions.push({
        kind,
        body: action,
        table: action.TableName,
        key,
        lock: lockKey(action.TableName, key),
      });
    }
    if (new Set(actions.map((a) => a.lock)).size !== actions.length) {
      return validation('Transaction request cannot include multiple operations on one item');
    }
    return locks.with(
      actions.map((a) => a.lock),
      async () => {
        const done: Array<{ action: Action; old: unknown }> = [];
        for (const [i, action] of actions.entries()) {
          const out = await apply(headers, action);
          if (out.status === 200) {
            done.push({ action, old: out.body.Attributes });
            continue;
          }
          await undo(headers, done);
          const type = String(out.body.__type ?? '');
          if (!type.endsWith('#ConditionalCheckFailedException'))
            return { status: out.status, body: out.body };
          const reasons = actions.map((_, j) =>
            j === i
              ? { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' }
              : { Code: 'None' },
          );
          return {
            status: 400,
            body: {
              __type: 'com.amazonaws.dynamodb.v20120810#TransactionCanceledException',
              message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`,
              CancellationReasons: reasons,
            },
          };
        }
        return { status: 200, body: {} };
      },
    );
  }

  /** One action through dynalite, keeping the item as it was (to put it back if a later action is refused). */
  async function apply(headers: IncomingMessage['headers'], action: Action) {
    const { ReturnValuesOnConditionCheckFailure: _, ...body } = action.body;
    switch (action.kind) {
      case 'Put':
        return call(headers, 'PutItem', { ...body, ReturnValues: 'ALL_OLD' });
      case 'Update':
        return call(headers, 'UpdateItem', { ...body, ReturnValues: 'ALL_OLD' });
      case 'Delete':
        return call(headers, 'DeleteItem', { ...body, ReturnValues: 'ALL_OLD' });
      case 'ConditionCheck': {
        // The condition evaluated by dynalite, changing nothing: the item written back as it is
        // (or, when absent, a delete that deletes nothing).
        const got = await call(headers, 'GetItem', {
          TableName: action.table,
          Key: action.key,
          ConsistentRead: true,
        });
        if (got.status !== 200) return got;
        const condition = {
          TableName: action.table,
          ConditionExpression: body.ConditionExpression,
          ...(body.ExpressionAttributeNames
            ? { ExpressionAttributeNames: body.ExpressionAttributeNames }
            : {}),
          ...(body.ExpressionAttributeValues
            ? { ExpressionAttributeValues: body.ExpressionAttributeValues }
            : {}),
        };
        const out = got.body.Item
          ? await call(headers, 'PutItem', { ...condition, Item: got.body.Item })
          : await call(headers, 'DeleteItem', { ...condition, Key: action.key });
        return out.status === 200 ? { status: 200, body: {} } : out;
      }
    }
  }

  /** Put back what the applied actions changed, newest first (their locks are still held). */
  async function undo(headers: IncomingMessage['headers'], done: Array<{ action: Action; old: unknown }>) {
    for (const { action, old } of done.reverse()) {
      if (action.kind === 'ConditionCheck') continue;
      const out = old
        ? await call(headers, 'PutItem', { TableName: action.table, Item: old })
        : await call(headers, 'DeleteItem', { TableName: action.table, Key: action.key });
      if (out.status !== 200)
        throw new Error(`serveTransactions: could not undo ${action.kind}: ${JSON.stringify(out.body)}`);
    }
  }

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const operation = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let input: Record<string, unknown> | undefined;
      try {
        input = raw.length ? (JSON.parse(raw.toString('utf8')) as Record<string, unknown>) : undefined;
      } catch {
        input = undefined;
      }
      if (operation === 'TransactWriteItems' && req.method === 'POST' && input) {
        transact(req.headers, input as TransactInput).then(
          (out) => send(res, out.status, out.body),
          (err: Error) =>
            send(res, 500, {
              __type: 'com.amazonaws.dynamodb.v20120810#InternalServerError',
              message: err.message,
            }),
        );
        return;
      }
      const keys = input ? lockedKeys(operation, input) : [];
      const forward = () => dynalite(fakeRequest(req.headers, raw, req.method, req.url), res);
      if (keys.length === 0) return forward();
      void locks.with(
        keys,
        () =>
          new Promise<void>((done) => {
            res.once('finish', done);
            res.once('close', done);
            forward();
          }),
      );
    });
  });
}

const ACTION_KINDS = { Put: true, Update: true, Delete: true, ConditionCheck: true } as const;

interface ActionBody {
  TableName?: string;
  Item?: Record<string, unknown>;
  Key?: Record<string, unknown>;
  ConditionExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Record<string, unknown>;
  ReturnValuesOnConditionCheckFailure?: string;
  [other: string]: unknown;
}
type TransactItem = Partial<Record<keyof typeof ACTION_KINDS, ActionBody>>;
interface TransactInput {
  TransactItems?: TransactItem[];
}
interface Action {
  kind: keyof typeof ACTION_KINDS;
  body: ActionBody;
  table: string;
  key: Record<string, unknown>;
  lock: string;
}

/** The state table's key (`pk`) of an item; other tables' items are locked by their whole key. */
function keyOf(item: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!item) return undefined;
  return item.pk !== undefined ? { pk: item.pk } : item;
}

function lockKey(table: string, key: Record<string, unknown>): string {
  const sorted = Object.keys(key)
    .sort()
    .map((k) => [k, key[k]]);
  return `${table}\u0000${JSON.stringify(sorted)}`;
}

/** The items a plain write request names, as lock keys. */
function lockedKeys(operation: string, input: Record<string, unknown>): string[] {
  const table = String(input.TableName ?? '');
  switch (operation) {
    case 'PutItem': {
      const key = keyOf(input.Item as Record<string, unknown> | undefined);
      return key ? [lockKey(table, key)] : [];
    }
    case 'UpdateItem':
    case 'DeleteItem':
      return input.Key ? [lockKey(table, input.Key as Record<string, unknown>)] : [];
    case 'BatchWriteItem':
      return Object.entries(
        (input.RequestItems ?? {}) as Record<string, Array<Record<string, unknown>>>,
      ).flatMap(([name, requests]) =>
        (Array.isArray(requests) ? requests : []).flatMap((r) => {
          const put = r.PutRequest as { Item?: Record<string, unknown> } | undefined;
          const del = r.DeleteRequest as { Key?: Record<string, unknown> } | undefined;
          const key = put ? keyOf(put.Item) : del?.Key;
          return key ? [lockKey(name, key)] : [];
        }),
      );
    default:
      return [];
  }
}

/** A request dynalite can read: the body already read, the original's headers, method and URL. */
function fakeRequest(
  headers: IncomingMessage['headers'],
  body: Buffer,
  method = 'POST',
  url = '/',
): IncomingMessage {
  const req = Readable.from(body.length ? [body] : []) as unknown as IncomingMessage;
  return Object.assign(req, { headers, method, url });
}

function validation(message: string) {
  return { status: 400, body: { __type: 'com.amazon.coral.validate#ValidationException', message } };
}

function send(res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('x-amz-crc32', crc32(text));
  res.setHeader('Content-Type', 'application/x-amz-json-1.0');
  res.setHeader('Content-Length', Buffer.byteLength(text, 'utf8'));
  res.end(text);
}

/** Locks by key, taken in a sorted order (two holders of many keys cannot deadlock). */
class KeyLocks {
  private readonly tails = new Map<string, Promise<void>>();

  async with<T>(keys: string[], run: () => Promise<T>): Promise<T> {
    const sorted = [...new Set(keys)].sort();
    const releases: Array<() => void> = [];
    for (const key of sorted) {
      const before = this.tails.get(key) ?? Promise.resolve();
      let release!: () => void;
      const mine = new Promise<void>((r) => {
        release = r;
      });
      const tail = before.then(() => mine);
      this.tails.set(key, tail);
      releases.push(() => {
        release();
        if (this.tails.get(key) === tail) this.tails.delete(key);
      });
      await before;
    }
    try {
      return await run();
    } finally {
      for (const release of releases) release();
    }
  }
}
