import type { GantryConfig } from '../../lib/config.ts';
import { parseConfig } from '../../lib/config.ts';
import { ConcurrentUpdateError, NotFoundError } from '../../lib/errors.ts';
import type { Caller } from '../../lib/intake/tenancy.ts';
import type { ObjectStore, RunQueue, WorkflowEngine } from '../../lib/ports.ts';
import {
  COUNTER_NAME,
  CounterLimitError,
  checkCounterAdd,
  counterAdds,
  type IndexEntries,
  type IndexName,
  type QueryPage,
  type StateTable,
} from '../../lib/state/table.ts';

/**
 * Fakes of the ports the intake uses: object literals with the documented semantics (conditional
 * writes on the store, idempotent start by name on the workflow), for unit tests only. Integration
 * tests use the real adapters against fauxqs.
 */

/** An in-memory ObjectStore (fake of the port) with ETags and If-Match / If-None-Match. */
export function memoryStore(): ObjectStore & { objects: Map<string, { body: string; etag: string }> } {
  const objects = new Map<string, { body: string; etag: string }>();
  let version = 0;
  return {
    objects,
    async getJson<T>(key: string) {
      const o = objects.get(key);
      return o ? { value: JSON.parse(o.body) as T, etag: o.etag } : undefined;
    },
    async putJson(key, value, cond) {
      const current = objects.get(key);
      if (cond?.ifNoneMatch && current) throw new ConcurrentUpdateError(`${key} exists`);
      if (cond?.ifMatch !== undefined && current?.etag !== cond.ifMatch) {
        throw new ConcurrentUpdateError(`${key} changed`);
      }
      const etag = `"${++version}"`;
      objects.set(key, { body: JSON.stringify(value), etag });
      return { etag };
    },
    async list(prefix) {
      return [...objects.keys()]
        .filter((k) => k.startsWith(prefix))
        .sort()
        .map((key) => ({ key, size: (objects.get(key)?.body.length ?? 0) as number }));
    },
    async delete(key) {
      objects.delete(key);
    },
  };
}

/** A RunQueue (fake of the port) that records what was sent; `failNext` makes the next send throw. */
export function recordingQueue(): RunQueue & {
  sent: Array<{ message: unknown; attributes: Record<string, string> }>;
  failNext: (err: Error) => void;
} {
  const sent: Array<{ message: unknown; attributes: Record<string, string> }> = [];
  let failure: Error | undefined;
  return {
    sent,
    failNext: (err) => {
      failure = err;
    },
    async enqueue(message, attributes) {
      if (failure) {
        const err = failure;
        failure = undefined;
        throw err;
      }
      sent.push({ message: JSON.parse(JSON.stringify(message)), attributes });
    },
  };
}

/**
 * A WorkflowEngine (fake of the port) that records calls. `start` is idempotent by name as Step
 * Functions is: a second start of the same name reports `alreadyRunning` and creates nothing.
 */
export function recordingWorkflow(): WorkflowEngine & {
  starts: Array<{ name: string; input: unknown }>;
  executions: Map<string, unknown>;
  stops: string[];
} {
  const starts: Array<{ name: string; input: unknown }> = [];
  const executions = new Map<string, unknown>();
  const stops: string[] = [];
  return {
    starts,
    executions,
    stops,
    async start(name, input) {
      starts.push({ name, input });
      const alreadyRunning = executions.has(name);
      if (!alreadyRunning) executions.set(name, input);
      return { executionArn: `arn:aws:states:us-east-1:000000000000:execution:sm:${name}`, alreadyRunning };
    },
    async stop(name) {
      stops.push(name);
    },
    sendTaskSuccess: async () => true,
    sendTaskFailure: async () => true,
    sendTaskHeartbeat: async () => true,
    status: async (name) => (executions.has(name) ? 'RUNNING' : undefined),
  };
}

export const VISION_ARN = 'arn:aws:iam::111122223333:role/vision-ci';
export const NLP_ARN = 'arn:aws:iam::111122223333:role/nlp-ci';
export const STRANGER_ARN = 'arn:aws:iam::999999999999:user/mallory';

export const iam = (userArn: string): Caller => ({ iamArn: userArn, groups: [] });

/** Two teams on two clusters, as a deployment would configure them. */
export function intakeConfig(): GantryConfig {
  return parseConfig({
    clusters: [
      { name: 'local', kubeconfig: '/dev/null' },
      { name: 'gpu', kubeconfig: '/dev/null' },
    ],
    defaultCluster: 'local',
    teams: [
      {
        name: 'vision',
        principals: ['arn:aws:iam::111122223333:role/vision-*', 'vision-group'],
        namespaces: ['team-vision', 'vision-research'],
        queues: ['vision-queue', 'vision-batch'],
        runtimes: [],
        imagePrefixes: ['ghcr.io/acme/', 'registry.example.com/vision'],
        maxNodes: 8,
        maxGpusPerRun: 16,
        maxGpusInFlight: 32,
        priorityClasses: ['high', 'low'],
        outputPrefixes: ['s3://vision-exports/models/'],
      },
      {
        name: 'nlp',
        principals: [NLP_ARN],
        namespaces: ['team-nlp'],
        queues: [],
        runtimes: ['torch-distributed'],
        imagePrefixes: ['ghcr.io/acme/nlp/'],
        maxNodes: 4,
        maxGpusPerRun: 8,
        cluster: 'gpu',
      },
    ],
  });
}

export const BUCKET = 'gantry-runs';

/** A valid request body for team vision. */
export function visionBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    modelName: 'resnet',
    team: 'vision',
    runtime: { name: 'torch-distributed' },
    image: 'ghcr.io/acme/train:1.0',
    ...overrides,
  };
}

/**
 * An in-memory StateTable (fake of the port, for unit tests): versions, create-only and
 * update-only-this-version writes, index partitions ordered by sort key. The contract suite
 * (test/contract/state-table.test.ts) runs the same cases against it and the DynamoDB adapter on
 * the local server, so the fake cannot drift from the real thing.
 */
export function memoryTable(): StateTable & { items: Map<string, StoredRow> } {
  const items = new Map<string, StoredRow>();
  return {
    items,
    async get<T>(key: string) {
      const row = items.get(key);
      return row
        ? {
            value: JSON.parse(row.body) as T,
            version: String(row.version),
            ...(row.counters ? { counters: { ...row.counters } } : {}),
          }
        : undefined;
    },
    async getMany<T>(keys: readonly string[]) {
      const found = new Map<string, { value: T; version: string }>();
      for (const key of keys) {
        const row = items.get(key);
        if (row) found.set(key, { value: JSON.parse(row.body) as T, version: String(row.version) });
      }
      return found;
    },
    async put(key, value, indexes, cond) {
      const current = items.get(key);
      if (cond.ifAbsent && current) throw new ConcurrentUpdateError(`${key} exists`);
      if (cond.ifVersion !== undefined && String(current?.version) !== cond.ifVersion) {
        throw new ConcurrentUpdateError(`${key} changed`);
      }
      const version = cond.ifVersion === undefined ? 1 : Number(cond.ifVersion) + 1;
      items.set(key, {
        body: JSON.stringify(value),
        version,
        indexes,
        ...(current?.counters ? { counters: current.counters } : {}),
      });
      return { version: String(version) };
    },
    async putCounted(key, value, indexes, cond, count) {
      checkCounterAdd(count);
      const current = items.get(key);
      if (cond.ifAbsent && current) throw new ConcurrentUpdateError(`${key} exists`);
      if (cond.ifVersion !== undefined && String(current?.version) !== cond.ifVersion) {
        throw new ConcurrentUpdateError(`${key} changed`);
      }
      const writes = counterAdds(count).map((add) => {
        const counted = items.get(add.key);
        const counters = { ...(counted?.counters ?? {}) };
        for (const [name, delta] of Object.entries(add.deltas)) {
          const ceiling = add.atMost?.[name];
          const after = (counters[name] ?? 0) + delta;
          if (ceiling !== undefined && after > ceiling)
            throw new CounterLimitError(`${name} ${after} > ${ceiling}`, { key: add.key });
          counters[name] = after;
        }
        return { add, counted, counters };
      });
      const version = cond.ifVersion === undefined ? 1 : Number(cond.ifVersion) + 1;
      items.set(key, {
        body: JSON.stringify(value),
        version,
        indexes,
        ...(current?.counters ? { counters: current.counters } : {}),
      });
      for (const { add, counted, counters } of writes) {
        items.set(
          add.key,
          counted ? { ...counted, counters } : { body: '{}', version: 0, indexes: {}, counters },
        );
      }
      return { version: String(version) };
    },
    async increment(key, deltas) {
      const row = items.get(key);
      if (!row) throw new NotFoundError(`${key} does not exist`);
      const counters = { ...(row.counters ?? {}) };
      const changed: Record<string, number> = {};
      for (const [name, delta] of Object.entries(deltas)) {
        if (!COUNTER_NAME.test(name) || !Number.isInteger(delta)) throw new TypeError(`counter ${name}`);
        counters[name] = (counters[name] ?? 0) + delta;
        changed[name] = counters[name];
      }
      row.counters = counters;
      return changed;
    },
    async query<T>(index: IndexName, partition: string, page: QueryPage) {
      const descending = page.descending !== false;
      let rows = [...items.entries()]
        .map(([key, row]) => ({ key, row, entry: row.indexes[index] }))
        .filter((r) => r.entry?.pk === partition)
        .filter((r) => page.sortFrom === undefined || (r.entry?.sk ?? '') >= page.sortFrom)
        .sort((a, b) => compare(a.entry?.sk ?? '', b.entry?.sk ?? '') || compare(a.key, b.key));
      if (descending) rows.reverse();
      if (page.cursor) {
        const after = JSON.parse(Buffer.from(page.cursor, 'base64url').toString('utf8')) as { k: string };
        rows = rows.slice(rows.findIndex((r) => r.key === after.k) + 1);
      }
      const read = rows.slice(0, page.limit);
      const last = read.at(-1);
      const more = rows.length > page.limit && last !== undefined;
      let out = read.map((r) => ({
        value: JSON.parse(r.row.body) as T,
        meta: {
          version: String(r.row.version),
          ...(r.row.counters ? { counters: { ...r.row.counters } } : {}),
        },
      }));
      const where = page.where;
      if (where) out = out.filter((r) => where(r.value));
      return {
        items: out.map((r) => r.value),
        meta: out.map((r) => r.meta),
        read: read.length,
        ...(more ? { cursor: Buffer.from(JSON.stringify({ k: last.key })).toString('base64url') } : {}),
      };
    },
    async delete(key) {
      items.delete(key);
    },
  };
}

interface StoredRow {
  body: string;
  version: number;
  indexes: IndexEntries;
  counters?: Record<string, number>;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
