import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeModelOwners } from '../../lib/artifacts/ownership.ts';
import { parseConfig } from '../../lib/config.ts';
import { TeamLimitError } from '../../lib/intake/errors.ts';
import { makeInFlight } from '../../lib/intake/in-flight.ts';
import { makeSubmitRun } from '../../lib/intake/submit-run.ts';
import { runIdFromKey } from '../../lib/run/ids.ts';
import { isInFlight, teamCountersKey } from '../../lib/run/in-flight.ts';
import type { RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import { repairCounters } from '../../lib/state/repair-counters.ts';
import type { StateTable } from '../../lib/state/table.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { recoverAfterRestart } from '../../local/restart.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { type LocalStateTable, startLocalStateTable, tableOfStack } from '../../local/state-table.ts';
import { apiClient } from '../helpers/api-client.ts';
import { BUCKET, memoryStore, recordingQueue } from '../helpers/intake-fakes.ts';

/**
 * Team caps counted in one item (docs/team-counters.md) on the real local state table: dynalite
 * behind the TransactWriteItems shim (local/dynamo-transactions.ts), through the DynamoDB adapter.
 */

const clock = { now: () => new Date() };
const team = (name: string, caps: { maxRunsInFlight: number; maxGpusInFlight: number }) => ({
  name,
  principals: [`${name}-ci`],
  namespaces: [name],
  imagePrefixes: ['ghcr.io/acme/'],
  ...caps,
});
const config = parseConfig({
  clusters: [{ name: 'local', kubeconfig: '/dev/null' }],
  defaultCluster: 'local',
  teams: [
    team('nlp', { maxRunsInFlight: 100, maxGpusInFlight: 4 }),
    team('ops', { maxRunsInFlight: 3, maxGpusInFlight: 0 }),
  ],
});
const body = (name: string, gpu: number) => ({
  modelName: 'm',
  team: name,
  runtime: { name: 'torch-distributed' },
  image: 'ghcr.io/acme/train:1',
  ...(gpu ? { resourcesPerNode: { gpu } } : {}),
});

describe('team counters on the local state table', () => {
  let local: LocalStateTable;
  let table: StateTable;
  beforeAll(async () => {
    local = await startLocalStateTable();
    table = tableOfStack({ stateTable: { name: local.tableName, client: local.client } });
  });
  afterAll(async () => {
    await local?.close();
  });

  const submitter = () =>
    makeSubmitRun({
      records: makeRunRecords({ table, clock }),
      owners: makeModelOwners({ store: memoryStore(), clock }),
      queue: recordingQueue(),
      clock,
      config,
      bucket: BUCKET,
      inFlight: makeInFlight(table),
    });
  const counters = async (name: string) => (await table.get(teamCountersKey(name)))?.counters;

  async function burst(name: string, gpu: number, n: number, keys = name) {
    const submit = submitter();
    const results = await Promise.allSettled(
      Array.from({ length: n }, (_, i) =>
        submit({
          caller: { sub: `${name}-ci`, groups: [] },
          body: body(name, gpu),
          idempotencyKey: `${keys}-${i}`,
        }),
      ),
    );
    const accepted = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
    return { accepted, refused };
  }

  it('20 submits of 1-GPU runs at once on a cap of 4 GPUs: exactly 4 accepted, never more', async () => {
    const { accepted, refused } = await burst('nlp', 1, 20);
    expect(accepted).toBe(4);
    expect(refused).toHaveLength(16);
    for (const err of refused) {
      expect(err).toBeInstanceOf(TeamLimitError);
      expect((err as TeamLimitError).limit).toBe('maxGpusInFlight');
    }
    expect(await counters('nlp')).toEqual({ runs: 4, gpus: 4 });
    // A refused submit wrote nothing: 4 records, the 4 accepted ones.
    const records = makeRunRecords({ table, clock });
    const stored = await records.getMany(
      Array.from({ length: 20 }, (_, i) => runIdFromKey('nlp', `nlp-${i}`)),
    );
    expect(stored.size).toBe(4);
  });

  it('20 submits at once on maxRunsInFlight 3: exactly 3 accepted; one ending makes room for one more', async () => {
    const { accepted, refused } = await burst('ops', 0, 20);
    expect(accepted).toBe(3);
    expect(refused.every((e) => e instanceof TeamLimitError && e.limit === 'maxRunsInFlight')).toBe(true);
    const records = makeRunRecords({ table, clock });
    const ids = Array.from({ length: 20 }, (_, i) => runIdFromKey('ops', `ops-${i}`));
    const [first] = [...(await records.getMany(ids)).keys()];
    await records.update(first as string, { phase: 'Cancelled', reason: 'Cancelled' });
    expect(await counters('ops')).toEqual({ runs: 2, gpus: 0 });
    const again = await burst('ops', 0, 20, 'ops-again');
    expect(again.accepted).toBe(1);
    expect(await counters('ops')).toEqual({ runs: 3, gpus: 0 });
  });

  it('the repair job finds a tampered counter, fixes it and reports the difference', async () => {
    const before = await counters('nlp');
    await table.increment(teamCountersKey('nlp'), { runs: 7, gpus: -2 });
    const report = await repairCounters({ table, teams: ['nlp', 'ops'] });
    expect(report).toEqual([
      { team: 'nlp', counted: { runs: 11, gpus: 2 }, actual: before, fixed: true },
      { team: 'ops', counted: { runs: 3, gpus: 0 }, actual: { runs: 3, gpus: 0 }, fixed: false },
    ]);
    expect(await counters('nlp')).toEqual(before);
  });

  it('a restart of the embedded default recounts: a state directory from before the counters', async () => {
    // Prepare: a fresh table whose records were written without counters (counters item deleted).
    const fresh = await startLocalStateTable();
    try {
      const t = tableOfStack({ stateTable: { name: fresh.tableName, client: fresh.client } });
      const records = makeRunRecords({ table: t, clock });
      const submit = makeSubmitRun({
        records,
        owners: makeModelOwners({ store: memoryStore(), clock }),
        queue: recordingQueue(),
        clock,
        config,
        bucket: BUCKET,
        inFlight: makeInFlight(t),
      });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const { record } = await submit({
          caller: { sub: 'nlp-ci', groups: [] },
          body: body('nlp', 1),
          idempotencyKey: `r-${i}`,
        });
        ids.push(record.runId);
      }
      await records.update(ids[0] as string, { phase: 'Running' });
      await records.update(ids[1] as string, { phase: 'Pending' });
      await t.delete(teamCountersKey('nlp'));
      // Act: the restart resumes the two started runs as a new attempt (still in flight) and queues
      // the Accepted one again.
      const started: string[] = [];
      const workflow = {
        async start(name: string) {
          started.push(name);
          return { executionArn: `arn:local:${name}`, alreadyRunning: false };
        },
      };
      const out = await recoverAfterRestart({ table: t, config, queue: recordingQueue(), workflow, clock });
      // Assess: the deleted counters are recounted from the records: three runs still in flight.
      expect(out.resumed.sort()).toEqual([ids[0], ids[1]].sort());
      expect(started.sort()).toEqual([ids[0], ids[1]].sort());
      expect(out.counters).toMatchObject([{ team: 'nlp', actual: { runs: 3, gpus: 3 }, fixed: true }]);
      expect((await t.get(teamCountersKey('nlp')))?.counters).toEqual({ runs: 3, gpus: 3 });
    } finally {
      await fresh.close();
    }
  });
});

/** A team of the embedded default whose runs end every way a run ends. */
const MIXED = {
  ...DEMO_TEAM,
  name: 'mixed',
  principals: ['arn:aws:iam::000000000000:user/mixed'],
  namespaces: ['mixed'],
  queues: [],
  imagePrefixes: ['registry.local/mixed/'],
  maxRunsInFlight: 50,
  maxGpusInFlight: 64,
};

describe('team counters through the embedded default', () => {
  let env: Embedded;
  const failing = new Set<string>();
  const api = apiClient(() => env.api.url, MIXED.principals[0] as string);

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) failing.add(runIdFromKey('mixed', `fail-${i}`));
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: {
        defaultDurationSeconds: 300,
        namespaces: ['mixed'],
        podFailure: (job) =>
          failing.has((job.metadata as { name: string }).name) ? 'CreateContainerConfigError' : undefined,
      },
      stack: { teams: [DEMO_TEAM, MIXED] },
    });
  }, 60_000);
  afterAll(async () => {
    await env?.close();
  });

  async function until(runId: string, done: (phase: string) => boolean, timeoutMs = 90_000) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await api('GET', `/v1/runs/${runId}`);
      if (done(r.body.phase)) return r.body.phase as string;
      if (Date.now() > end) throw new Error(`run ${runId} is still ${r.body.phase}`);
      await new Promise((res) => setTimeout(res, 150));
    }
  }

  it('counters equal the records after submits, cancels, failures and successes', async () => {
    const table = tableOfStack(env.stack);
    const counters = async () => (await table.get(teamCountersKey('mixed')))?.counters;
    const request = (key: string, gpu: number) => ({
      modelName: `m-${key}`,
      team: 'mixed',
      runtime: { name: 'torch-distributed' },
      image: 'registry.local/mixed/train:1',
      resourcesPerNode: { gpu },
    });
    const submit = async (key: string, gpu: number) => {
      const r = await api('POST', '/v1/runs', request(key, gpu), { 'Idempotency-Key': key });
      expect(r.status).toBe(202);
      return r.body.runId as string;
    };
    // While runs start and end: the counters equal what the records say whenever neither moves.
    const consistent = async () => {
      const [r] = await repairCounters({ table, teams: ['mixed'], dryRun: true });
      expect(r?.unsettled).toBeUndefined();
      expect(r?.counted).toEqual(r?.actual);
      return r?.counted;
    };
    const ok = await Promise.all([0, 1, 2, 3].map((i) => submit(`ok-${i}`, 1)));
    const fail = await Promise.all([0, 1, 2].map((i) => submit(`fail-${i}`, 2)));
    const cancel = await Promise.all([0, 1, 2].map((i) => submit(`cancel-${i}`, 4)));
    await consistent();
    for (const id of cancel) expect((await api('POST', `/v1/runs/${id}/cancel`)).status).toBeLessThan(300);
    await consistent();
    const ended = (p: string) => !isInFlight(p as RunRecord['phase']);
    const phases = await Promise.all([...ok, ...fail, ...cancel].map((id) => until(id, ended)));
    expect(phases).toEqual([
      ...ok.map(() => 'Succeeded'),
      ...fail.map(() => 'Failed'),
      ...cancel.map(() => 'Cancelled'),
    ]);
    expect(await counters()).toEqual({ runs: 0, gpus: 0 });
    // A replay of an ended run (same key, same body) is answered and counts nothing.
    const replay = await api('POST', '/v1/runs', request('ok-0', 1), { 'Idempotency-Key': 'ok-0' });
    expect([replay.status, replay.body.phase]).toEqual([200, 'Succeeded']);
    expect(await counters()).toEqual({ runs: 0, gpus: 0 });
    const last = await submit('last', 3);
    await consistent();
    await until(last, ended);
    expect(await counters()).toEqual({ runs: 0, gpus: 0 });
    expect(await consistent()).toEqual({ runs: 0, gpus: 0 });
  }, 180_000);
});
