import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDynamoStateTable } from '../../lib/adapters/aws/dynamodb-table.ts';
import { makeModelOwners } from '../../lib/artifacts/ownership.ts';
import { compact } from '../../lib/compact.ts';
import { parseConfig } from '../../lib/config.ts';
import { ConcurrentUpdateError, NotFoundError, ValidationError } from '../../lib/errors.ts';
import { RunMessageSchema } from '../../lib/intake/message-schema.ts';
import { makeListRuns } from '../../lib/intake/runs.ts';
import { makeSubmitSweep } from '../../lib/intake/submit-sweep.ts';
import { makeListSweeps } from '../../lib/intake/sweeps.ts';
import { toSweepSummary } from '../../lib/intake/views.ts';
import { requestFingerprint } from '../../lib/run/ids.ts';
import { newRecord, type RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import type { StateTable } from '../../lib/state/table.ts';
import type { SweepRecord, Trial } from '../../lib/sweep/record.ts';
import { makeSweeps, trialIndexes, trialItemKey } from '../../lib/sweep/sweeps.ts';
import { type LocalStateTable, startLocalStateTable, stateTableDefinition } from '../../local/state-table.ts';
import { aRunRequest } from '../helpers/builders.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  memoryStore,
  memoryTable,
  recordingQueue,
  VISION_ARN,
} from '../helpers/intake-fakes.ts';

/**
 * The state table's contract, run against the DynamoDB adapter on the local DynamoDB-compatible
 * server (dynalite, as the embedded default runs it) and against the unit tests' in-memory fake:
 * conditional create, lost update races, index moves, sparse indexes, pagination and filters,
 * and the API's lists on top (one team's items only, tokens bound to their listing).
 */

let local: LocalStateTable;
beforeAll(async () => {
  local = await startLocalStateTable();
});
afterAll(async () => {
  await local?.close();
});

const targets: Array<[string, () => StateTable]> = [
  [
    'DynamoDB adapter on the local server',
    () => makeDynamoStateTable({ client: local.client, tableName: local.tableName }),
  ],
  ['in-memory fake', () => memoryTable()],
];

/** Each list test gets its own table on the same server. */
async function freshTable(): Promise<StateTable> {
  const tableName = unique('gantry-state');
  await local.client.send(new CreateTableCommand(stateTableDefinition(tableName)));
  return makeDynamoStateTable({ client: local.client, tableName });
}

let n = 0;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${n++}`;

describe.each(targets)('state table: %s', (_name, make) => {
  it('creates only when absent, and updates only the version read', async () => {
    const table = make();
    const key = unique('doc');
    const { version } = await table.put(key, { a: 1, empty: '' }, {}, { ifAbsent: true });
    await expect(table.put(key, { a: 2 }, {}, { ifAbsent: true })).rejects.toBeInstanceOf(
      ConcurrentUpdateError,
    );
    expect(await table.get(key)).toEqual({ value: { a: 1, empty: '' }, version });
    const next = await table.put(key, { a: 3 }, {}, { ifVersion: version });
    await expect(table.put(key, { a: 4 }, {}, { ifVersion: version })).rejects.toBeInstanceOf(
      ConcurrentUpdateError,
    );
    expect(await table.get(key)).toEqual({ value: { a: 3 }, version: next.version });
    await expect(table.put(unique('missing'), {}, {}, { ifVersion: '1' })).rejects.toBeInstanceOf(
      ConcurrentUpdateError,
    );
    await table.delete(key);
    expect(await table.get(key)).toBeUndefined();
  });

  it('reads many items in one call, past the 100-key batch, with their versions; missing keys are absent', async () => {
    const table = make();
    const keys = Array.from({ length: 230 }, (_, i) => unique(`many-${i}`));
    const versions = await Promise.all(keys.map((k, i) => table.put(k, { i }, {}, { ifAbsent: true })));
    const updated = await table.put(
      keys[5] as string,
      { i: 5, again: true },
      {},
      { ifVersion: versions[5]?.version as string },
    );
    const missing = unique('missing');

    const found = await table.getMany<{ i: number }>([...keys, missing, keys[0] as string]);

    expect(found.size).toBe(230);
    expect(found.has(missing)).toBe(false);
    expect(found.get(keys[229] as string)).toEqual({ value: { i: 229 }, version: versions[229]?.version });
    expect(found.get(keys[5] as string)).toEqual({ value: { i: 5, again: true }, version: updated.version });
    expect(await table.getMany([])).toEqual(new Map());
  });

  it('of two writers holding the same version exactly one wins', async () => {
    const table = make();
    const key = unique('race');
    const { version } = await table.put(key, { n: 0 }, {}, { ifAbsent: true });
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => table.put(key, { n: i + 1 }, {}, { ifVersion: version })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(
      results.filter((r) => r.status === 'rejected' && r.reason instanceof ConcurrentUpdateError),
    ).toHaveLength(7);
  });

  it('pages an index partition newest first, from a sort key, and moves items between partitions', async () => {
    const table = make();
    const p = unique('part');
    for (let i = 0; i < 25; i++) {
      const sk = `2026-01-01T00:00:${String(i).padStart(2, '0')}.000Z#i${i}`;
      await table.put(
        `${p}#${i}`,
        { i, phase: i % 5 === 0 ? 'Failed' : 'Running' },
        { byTeam: { pk: p, sk } },
        {
          ifAbsent: true,
        },
      );
    }
    const seen: number[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await table.query<{ i: number }>('byTeam', p, {
        limit: 10,
        ...(cursor ? { cursor } : {}),
      });
      expect(page.read).toBeLessThanOrEqual(10);
      seen.push(...page.items.map((x) => x.i));
      cursor = page.cursor;
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => 24 - i));

    const from = await table.query<{ i: number }>('byTeam', p, {
      limit: 100,
      sortFrom: '2026-01-01T00:00:20',
      descending: false,
    });
    expect(from.items.map((x) => x.i)).toEqual([20, 21, 22, 23, 24]);

    const filtered = await table.query<{ i: number }>('byTeam', p, {
      limit: 10,
      where: (x) => (x as { phase: string }).phase === 'Failed',
    });
    expect(filtered.items.map((x) => x.i)).toEqual([20, 15]);
    expect(filtered.read).toBe(10);

    // An update that changes the item's index entry moves it; one that leaves a sparse index out removes it.
    const got = await table.get(`${p}#3`);
    await table.put(
      `${p}#3`,
      { i: 3 },
      { byPhase: { pk: `${p}#moved`, sk: 'x' } },
      got ? { ifVersion: got.version } : {},
    );
    expect((await table.query<{ i: number }>('byPhase', `${p}#moved`, { limit: 5 })).items).toEqual([
      { i: 3 },
    ]);
    const rest = await table.query<{ i: number }>('byTeam', p, { limit: 100 });
    expect(rest.items.map((x) => x.i)).not.toContain(3);
    expect(rest.items).toHaveLength(24);
  });
});

describe('the API lists on the state table (DynamoDB adapter on the local server)', () => {
  const clock = { now: () => new Date() };
  const team = (name: string, principal: string) => ({
    name,
    principals: [principal],
    namespaces: [name],
    imagePrefixes: ['registry.local/'],
    maxNodes: 4,
    maxGpusPerRun: 8,
  });
  const config = parseConfig({
    clusters: [{ name: 'local', kubeconfig: '/dev/null' }],
    defaultCluster: 'local',
    teams: [
      team('alpha', 'alpha-user'),
      team('beta', 'beta-user'),
      team('gamma', 'multi-user'),
      team('delta', 'multi-user'),
    ],
  });
  const alpha = { sub: 'alpha-user', groups: [] };
  const beta = { sub: 'beta-user', groups: [] };

  async function seed(table: StateTable) {
    const records = makeRunRecords({ table, clock });
    const made: RunRecord[] = [];
    for (let i = 0; i < 12; i++) {
      const team = i % 3 === 2 ? 'beta' : 'alpha';
      const runId = `run-${String.fromCharCode(97 + i).repeat(20)}`;
      const request = aRunRequest({ team, namespace: team, modelName: i % 2 === 0 ? 'even' : 'odd' });
      const at = new Date(Date.UTC(2026, 0, 1, 0, 0, i));
      const record = newRecord(
        {
          runId,
          cluster: 'local',
          jobName: runId,
          namespace: team,
          request,
          outputUri: `s3://b/runs/${runId}/`,
        },
        requestFingerprint(request),
        at,
      );
      await records.create(record);
      if (i % 4 === 0) await records.update(runId, { phase: 'Pending' });
      made.push(record);
    }
    return { records, made };
  }

  it("lists one team's runs newest first, by phase, by model, since a time, with bound tokens", async () => {
    const t = await freshTable();
    const { made } = await seed(t);
    const list = makeListRuns({ table: t, config });
    const alphaIds = made.filter((r) => r.spec.request.team === 'alpha').map((r) => r.runId);

    const all: string[] = [];
    let nextToken: string | undefined;
    do {
      const page = await list({ caller: alpha, query: { limit: '3', ...(nextToken ? { nextToken } : {}) } });
      expect(page.runs.length).toBeLessThanOrEqual(3);
      all.push(...page.runs.map((r) => r.runId));
      nextToken = page.nextToken;
    } while (nextToken);
    expect(all).toEqual([...alphaIds].reverse());

    const pending = await list({ caller: alpha, query: { phase: 'Pending' } });
    expect(pending.runs.map((r) => r.runId)).toEqual([made[4]?.runId, made[0]?.runId]);
    expect(pending.runs.every((r) => r.spec.request.team === 'alpha')).toBe(true);

    const odd = await list({ caller: alpha, query: { model: 'odd', phase: 'Accepted' } });
    expect(odd.runs.map((r) => r.runId)).toEqual(
      made
        .filter((r, i) => r.spec.request.team === 'alpha' && i % 2 === 1 && i % 4 !== 0)
        .map((r) => r.runId)
        .reverse(),
    );

    const since = await list({ caller: alpha, query: { since: '2026-01-01T00:00:09Z' } });
    expect(since.runs.map((r) => r.runId)).toEqual([made[10]?.runId, made[9]?.runId]);

    // A token works only for its own listing: another team, or other filters, is a 400 naming nextToken.
    const first = await list({ caller: alpha, query: { limit: '2' } });
    expect(first.nextToken).toBeDefined();
    await expect(list({ caller: beta, query: { limit: '2', nextToken: first.nextToken } })).rejects.toThrow(
      /nextToken: belongs to another listing/,
    );
    await expect(
      list({ caller: alpha, query: { limit: '2', phase: 'Pending', nextToken: first.nextToken } }),
    ).rejects.toBeInstanceOf(ValidationError);
    await expect(list({ caller: alpha, query: { nextToken: 'not-a-token' } })).rejects.toThrow(/nextToken/);

    // A caller in several teams names one; one not theirs is refused by name.
    const multi = { sub: 'multi-user', groups: [] };
    await expect(list({ caller: multi, query: {} })).rejects.toThrow(/team: is required/);
    await expect(list({ caller: multi, query: { team: 'alpha' } })).rejects.toThrow(
      /team: must be one of your teams/,
    );
    expect((await list({ caller: multi, query: { team: 'gamma' } })).runs).toEqual([]);
  });

  it("lists one team's sweeps, and the reconciler's active sweeps through the sparse index", async () => {
    const t = await freshTable();
    const records = makeRunRecords({ table: t, clock });
    const sweeps = makeSweeps({ table: t, records, clock, bucket: 'b' });
    const base = {
      team: 'alpha',
      phase: 'Running' as const,
      trials: [],
      updatedAt: '2026-01-01T00:00:00.000Z',
    };
    const ids = ['swp-aaaaaaaaaaaaaaaaaaaa', 'swp-bbbbbbbbbbbbbbbbbbbb', 'swp-cccccccccccccccccccc'];
    for (const [i, sweepId] of ids.entries()) {
      await sweeps.create({
        ...base,
        sweepId,
        createdAt: `2026-01-01T00:00:0${i}.000Z`,
      } as unknown as Parameters<typeof sweeps.create>[0]);
    }
    const listed = await makeListSweeps({ table: t, config })({ caller: alpha, query: {} });
    expect(listed.sweeps.map((s) => s.sweepId)).toEqual([...ids].reverse());
    expect((await makeListSweeps({ table: t, config })({ caller: beta, query: {} })).sweeps).toEqual([]);
    await expect(sweeps.advance('swp-dddddddddddddddddddd')).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe.each(targets)('counters and trial items: %s', (_name, make) => {
  it('counts with atomic adds beside the document: 50 at once all count, and the version is untouched', async () => {
    const table = make();
    const key = unique('counted');
    await expect(table.increment(key, { Succeeded: 1 })).rejects.toBeInstanceOf(NotFoundError);
    expect(await table.get(key)).toBeUndefined();
    const listed = { byTeam: { pk: key, sk: 'x' } };
    const { version } = await table.put(key, { doc: 1 }, listed, { ifAbsent: true });
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        table.increment(key, i % 2 === 0 ? { Succeeded: 1 } : { Succeeded: 1, Running: -1 }),
      ),
    );
    // Every add saw its own new value: none was lost or applied twice.
    expect(new Set(results.map((r) => r.Succeeded)).size).toBe(50);
    expect(Math.max(...results.map((r) => r.Succeeded as number))).toBe(50);
    expect(await table.get(key)).toEqual({
      value: { doc: 1 },
      version,
      counters: { Succeeded: 50, Running: -25 },
    });
    // The document's conditional write still holds with the version read before the adds, and keeps the counters.
    const next = await table.put(key, { doc: 2 }, listed, { ifVersion: version });
    await expect(table.put(key, { doc: 3 }, listed, { ifVersion: version })).rejects.toBeInstanceOf(
      ConcurrentUpdateError,
    );
    expect((await table.get(key))?.counters).toEqual({ Succeeded: 50, Running: -25 });
    const page = await table.query<{ doc: number }>('byTeam', key, { limit: 5 });
    expect(page.items).toEqual([{ doc: 2 }]);
    expect(page.meta).toEqual([{ version: next.version, counters: { Succeeded: 50, Running: -25 } }]);
    await expect(table.increment(key, { 'not-a-name': 1 })).rejects.toThrow(TypeError);
  });

  it("creates a trial index once of 10 racing releases, and pages a sweep's trials in index order", async () => {
    const table = make();
    const sweepId = unique('swp');
    const racing = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        table.put(trialItemKey(sweepId, 0), { index: 0, by: i }, trialIndexes(sweepId, { index: 0 }), {
          ifAbsent: true,
        }),
      ),
    );
    expect(racing.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(
      racing.filter((r) => r.status === 'rejected' && r.reason instanceof ConcurrentUpdateError),
    ).toHaveLength(9);
    // Created out of order, listed in index order (10 after 9: the index is zero-padded in the key).
    for (const index of [12, 3, 1, 10, 2, 9, 4, 11, 5, 8, 7, 6]) {
      await table.put(trialItemKey(sweepId, index), { index }, trialIndexes(sweepId, { index }), {
        ifAbsent: true,
      });
    }
    const seen: number[] = [];
    const versions: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await table.query<{ index: number }>('bySweep', `trial#${sweepId}`, {
        limit: 5,
        descending: false,
        ...(cursor ? { cursor } : {}),
      });
      expect(page.items.length).toBeLessThanOrEqual(5);
      expect(page.meta).toHaveLength(page.items.length);
      seen.push(...page.items.map((t) => t.index));
      versions.push(...page.meta.map((m) => m.version));
      cursor = page.cursor;
      pages++;
    } while (cursor && pages < 10);
    expect(seen).toEqual(Array.from({ length: 13 }, (_, i) => i));
    expect(pages).toBeGreaterThanOrEqual(3);
    // The version a page returned is the one a trial's conditional update needs.
    await table.put(
      trialItemKey(sweepId, 4),
      { index: 4, phase: 'Running' },
      trialIndexes(sweepId, { index: 4 }),
      versions[4] !== undefined ? { ifVersion: versions[4] } : {},
    );
  });

  it('runs a sweep under 6 concurrent advancers: every trial index once, parallelTrials never exceeded, counts exact', async () => {
    const table = make();
    const clock = { now: () => new Date('2026-12-02T10:00:00Z') };
    const records = makeRunRecords({ table, clock });
    const queue = recordingQueue();
    const stopped: string[] = [];
    const caps = {
      queue,
      stopRun: async (spec: { runId: string }) => {
        stopped.push(spec.runId);
      },
    };
    const sweeps = makeSweeps({ table, records, clock, bucket: BUCKET });
    const intake = {
      sweeps,
      owners: makeModelOwners({ store: memoryStore(), clock }),
      config: intakeConfig(),
      bucket: BUCKET,
      clock,
      caps: { queue },
      newSeed: () => 42,
    };
    const { record } = await makeSubmitSweep(intake)({
      caller: iam(VISION_ARN),
      body: {
        template: {
          modelName: 'resnet',
          team: 'vision',
          runtime: { name: 'torch-distributed' },
          image: 'ghcr.io/acme/train:1',
          resourcesPerNode: { gpu: 1 },
        },
        parameters: [{ name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' }],
        objective: { metric: 'accuracy', direction: 'maximize' },
        algorithm: { name: 'random', seed: 3 },
        maxTrials: 30,
        parallelTrials: 4,
        maxFailedTrials: 30,
        publish: 'none',
      },
    });
    const { sweepId } = record;
    const started = new Set<string>();
    let ended = 0;
    let peak = 0;
    for (let round = 0; round < 40; round++) {
      // What the queue delivered starts; everything running then ends.
      for (const sent of queue.sent) {
        const spec = RunMessageSchema.parse(sent.message).run;
        if (started.has(spec.runId)) continue;
        started.add(spec.runId);
        const { trial, ...rest } = spec;
        const run = compact({ ...rest, ...(trial ? { trial: compact(trial) } : {}) });
        await records.create(newRecord(run, 'f', clock.now()));
      }
      const items = await table.query<Trial>('bySweep', `trial#${sweepId}`, {
        limit: 100,
        descending: false,
      });
      peak = Math.max(peak, items.items.length - ended);
      for (const runId of started) {
        const run = await records.get(runId);
        if (run?.phase !== 'Accepted') continue;
        await records.update(runId, { phase: 'Succeeded', metrics: { accuracy: (ended % 17) / 20 } });
        ended++;
      }
      await Promise.all(Array.from({ length: 6 }, () => sweeps.advance(sweepId, caps)));
      if ((await sweeps.get(sweepId))?.phase === 'Succeeded') break;
    }
    const after = (await sweeps.get(sweepId)) as SweepRecord;
    expect(after.phase).toBe('Succeeded');
    expect(after.trials.map((t) => t.index)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    expect(after.trials.every((t) => t.phase === 'Succeeded')).toBe(true);
    expect(peak).toBeLessThanOrEqual(4);
    // Each trial's message went out once: a release that lost an index to another sent nothing.
    const sentIds = queue.sent.map((m) => RunMessageSchema.parse(m.message).run.runId);
    expect(sentIds).toHaveLength(30);
    expect(new Set(sentIds).size).toBe(30);
    expect(after.best?.objective).toBe(0.8);
    expect(stopped).toEqual([]);
    // The list shows the counters; the sweep item holds no trials.
    const summary = toSweepSummary(
      (await makeListSweeps({ table, config: intakeConfig() })({ caller: iam(VISION_ARN), query: {} }))
        .sweeps[0] as SweepRecord,
    );
    expect(summary.counts).toEqual({ Succeeded: 30 });
    expect((await table.get<Record<string, unknown>>(`sweep#${sweepId}`))?.value.trials).toBeUndefined();
  });

  it('reads a sweep item of the previous layout (trials inline) as it is, and moves it to trial items when it advances', async () => {
    const table = make();
    const clock = { now: () => new Date('2026-12-02T10:00:00Z') };
    const records = makeRunRecords({ table, clock });
    const sweeps = makeSweeps({ table, records, clock, bucket: BUCKET });
    const sweepId = 'swp-eeeeeeeeeeeeeeeeeeee';
    const trial = (index: number, phase: Trial['phase']): Trial => ({
      index,
      runId: `run-${index}`,
      parameters: { lr: index },
      phase,
      releasedAt: '2026-12-02T09:00:00.000Z',
    });
    const old = {
      sweepId,
      team: 'vision',
      phase: 'Succeeded',
      trials: [trial(0, 'Succeeded'), trial(1, 'Failed'), trial(2, 'Succeeded')],
      createdAt: '2026-12-02T09:00:00.000Z',
      updatedAt: '2026-12-02T09:00:00.000Z',
    };
    await table.put(`sweep#${sweepId}`, old, {}, { ifAbsent: true });
    const got = await sweeps.get(sweepId);
    expect(got?.trials).toEqual(old.trials);
    // A read (GET /v1/sweeps/{id}, which may only read) changes nothing.
    expect((await table.get<Record<string, unknown>>(`sweep#${sweepId}`))?.value.trials).toEqual(old.trials);
    expect((await sweeps.advance(sweepId)).phase).toBe('Succeeded');
    expect((await sweeps.get(sweepId))?.trials).toEqual(old.trials);
    const item = await table.get<Record<string, unknown>>(`sweep#${sweepId}`);
    expect(item?.value.trials).toBeUndefined();
    expect(item?.counters).toEqual({ Succeeded: 2, Failed: 1 });
    expect((await table.get(trialItemKey(sweepId, 1)))?.value).toEqual(old.trials[1]);
    // Advanced again: nothing moves twice.
    await sweeps.advance(sweepId);
    expect((await sweeps.get(sweepId))?.trials).toEqual(old.trials);
    expect((await table.get(`sweep#${sweepId}`))?.counters).toEqual({ Succeeded: 2, Failed: 1 });
  });
});
