import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDynamoStateTable } from '../../lib/adapters/aws/dynamodb-table.ts';
import { parseConfig } from '../../lib/config.ts';
import { ConcurrentUpdateError, NotFoundError, ValidationError } from '../../lib/errors.ts';
import { makeListRuns } from '../../lib/intake/runs.ts';
import { makeListSweeps } from '../../lib/intake/sweeps.ts';
import { requestFingerprint } from '../../lib/run/ids.ts';
import { newRecord, type RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import type { StateTable } from '../../lib/state/table.ts';
import { makeSweeps } from '../../lib/sweep/sweeps.ts';
import { type LocalStateTable, startLocalStateTable, stateTableDefinition } from '../../local/state-table.ts';
import { aRunRequest } from '../helpers/builders.ts';
import { memoryTable } from '../helpers/intake-fakes.ts';

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
      { ifVersion: got?.version },
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
