/**
 * What the team caps cost at submit (issue 38, item 3): state-table reads (queries, items) and
 * time per POST /v1/runs with 100 and 3,000 runs of the team in flight, before and after the
 * team counters (docs/team-counters.md); and how many of 20 concurrent 1-GPU submits a cap of 4
 * GPUs lets through.
 *
 * Real parts: the submit use case (lib/intake/submit-run.ts: schema, tenancy, model owner check,
 * record, enqueue) and the DynamoDB adapter on the local state table (dynalite with its data on
 * disk under a mkdtemp folder, behind the TransactWriteItems shim), in this process. "Before" is
 * the previous path rebuilt here from the same exported steps: read the record (replay?), sum the
 * team's in-flight records from the team+phase index (`sumInFlight`, the previous
 * lib/intake/in-flight.ts, kept here only for this comparison), check the caps, create the record
 * with a plain conditional put. Stand-ins: the model owners' store and the runs queue are
 * in-memory fakes (their cost is the same on both paths).
 *
 * Run: `npm exec -- node bench/submit-cost.ts [100,3000]`; writes bench/results/submit-cost.md.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeModelOwners } from '../lib/artifacts/ownership.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { parseConfig } from '../lib/config.ts';
import { checkTeamCaps, makeInFlight } from '../lib/intake/in-flight.ts';
import { runMessage, runMessageAttributes } from '../lib/intake/message.ts';
import {
  acceptRequest,
  checkModelOwner,
  makeSubmitRun,
  type SubmitRunInput,
} from '../lib/intake/submit-run.ts';
import { requestedTotals } from '../lib/intake/tenancy.ts';
import type { CallOptions } from '../lib/ports.ts';
import { fingerprintOf } from '../lib/run/ids.ts';
import { IN_FLIGHT_PHASES } from '../lib/run/in-flight.ts';
import { newRecord, type RunRecord } from '../lib/run/record.ts';
import { makeRunRecords, runIndexes, runItemKey } from '../lib/run/records.ts';
import type { StateTable } from '../lib/state/table.ts';
import { startLocalStateTable, tableOfStack } from '../local/state-table.ts';
import { memoryStore, recordingQueue } from '../test/helpers/intake-fakes.ts';

const SIZES = (process.argv[2] ?? '100,3000').split(',').map(Number);
const SAMPLES = 40;
const WARMUP = 5;
const clock = { now: () => new Date() };
const config = parseConfig({
  clusters: [{ name: 'local', kubeconfig: '/dev/null' }],
  defaultCluster: 'local',
  teams: ['nlp', 'burst'].map((name) => ({
    name,
    principals: [`${name}-ci`],
    namespaces: [name],
    imagePrefixes: ['ghcr.io/acme/'],
    maxRunsInFlight: name === 'nlp' ? 100_000 : 100,
    maxGpusInFlight: name === 'nlp' ? 1_000_000 : 4,
  })),
});
const input = (team: string, key: string): SubmitRunInput => ({
  caller: { sub: `${team}-ci`, groups: [] },
  body: {
    modelName: 'm',
    team,
    runtime: { name: 'torch-distributed' },
    image: 'ghcr.io/acme/train:1',
    resourcesPerNode: { gpu: 1 },
  },
  idempotencyKey: key,
});

/** The previous lib/intake/in-flight.ts `makeInFlight`: one query per in-flight phase, every in-flight record read. */
function sumInFlight(table: StateTable) {
  return async (team: string) => {
    let runs = 0;
    let gpus = 0;
    for (const phase of IN_FLIGHT_PHASES) {
      let cursor: string | undefined;
      do {
        const page = await table.query<RunRecord>('byPhase', `${team}#run#${phase}`, {
          limit: 100,
          ...(cursor ? { cursor } : {}),
        });
        for (const run of page.items) {
          runs++;
          gpus += requestedTotals(run.spec.request).gpu;
        }
        cursor = page.cursor;
      } while (cursor);
    }
    return { runs, gpus };
  };
}

interface Counts {
  queries: number;
  itemsRead: number;
  gets: number;
  writes: number;
  transactions: number;
}
const zero = (): Counts => ({ queries: 0, itemsRead: 0, gets: 0, writes: 0, transactions: 0 });

function counting(table: StateTable, c: { now: Counts }): StateTable {
  return {
    ...table,
    async get<T>(key: string, opts?: CallOptions) {
      c.now.gets++;
      const got = await table.get<T>(key, opts);
      if (got) c.now.itemsRead++;
      return got;
    },
    async getMany<T>(keys: readonly string[], opts?: CallOptions) {
      const got = await table.getMany<T>(keys, opts);
      c.now.itemsRead += got.size;
      return got;
    },
    async query(...a) {
      c.now.queries++;
      const page = await table.query(...(a as Parameters<StateTable['query']>));
      c.now.itemsRead += page.read;
      return page as never;
    },
    put(...a) {
      c.now.writes++;
      return table.put(...a);
    },
    putCounted(...a) {
      c.now.transactions++;
      return table.putCounted(...a);
    },
  };
}

function makePaths(table: StateTable) {
  const owners = makeModelOwners({ store: memoryStore(), clock });
  const queue = recordingQueue();
  const deps = { config, bucket: 'gantry-runs' };
  const after = makeSubmitRun({
    ...deps,
    records: makeRunRecords({ table, clock }),
    owners,
    queue,
    clock,
    inFlight: makeInFlight(table),
  });
  const sum = sumInFlight(table);
  /** The previous submit path, step by step. */
  async function before(i: SubmitRunInput) {
    const { request, spec } = await acceptRequest(i, deps);
    await checkModelOwner(owners, request);
    if (!(await table.get(runItemKey(spec.runId)))) {
      const team = config.teams.find((t) => t.name === request.team);
      if (team) checkTeamCaps(team, await sum(team.name), request);
    }
    const record = newRecord(spec, fingerprintOf(request), clock.now());
    await table.put(runItemKey(record.runId), record, runIndexes(record), { ifAbsent: true });
    await queue.enqueue(runMessage(record.spec), runMessageAttributes(record.spec));
    return { record, created: true };
  }
  return { before, after };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
};

interface Row {
  inFlight: number;
  path: 'before' | 'after';
  counts: Counts;
  p50: number;
  p95: number;
}

const tmp = mkdtempSync(join(tmpdir(), 'gantry-submit-cost-'));
const rows: Row[] = [];
const bursts: Record<string, number> = {};
try {
  for (const n of SIZES) {
    const local = await startLocalStateTable({ dataDir: join(tmp, `n${n}`) });
    const base = tableOfStack({ stateTable: { name: local.tableName, client: local.client } });
    const records = makeRunRecords({ table: base, clock });
    // The team's runs in flight, spread over the in-flight phases (counted in its counters).
    const seedSubmit = makePaths(base).after;
    await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      16,
      async (i) => {
        const { record } = await seedSubmit(input('nlp', `seed-${i}`));
        const phase = IN_FLIGHT_PHASES[i % IN_FLIGHT_PHASES.length];
        if (phase && phase !== 'Accepted') await records.update(record.runId, { phase });
      },
    );
    const c = { now: zero() };
    const paths = makePaths(counting(base, c));
    for (const path of ['before', 'after'] as const) {
      const lat: number[] = [];
      let counts = zero();
      for (let i = 0; i < WARMUP + SAMPLES; i++) {
        c.now = zero();
        const t0 = performance.now();
        const { record } = await paths[path](input('nlp', `${path}-${n}-${i}`));
        const ms = performance.now() - t0;
        if (i >= WARMUP) lat.push(ms);
        counts = c.now;
        // Ended again at once (outside the timing), so the team keeps n runs in flight.
        if (path === 'after') await records.update(record.runId, { phase: 'Succeeded' });
        else {
          const got = await base.get<RunRecord>(runItemKey(record.runId));
          const done = { ...record, phase: 'Succeeded' as const };
          await base.put(runItemKey(record.runId), done, runIndexes(done), {
            ifVersion: got?.version ?? '1',
          });
        }
      }
      rows.push({ inFlight: n, path, counts, p50: pct(lat, 50), p95: pct(lat, 95) });
      console.log(JSON.stringify(rows.at(-1)));
    }
    if (n === SIZES[0]) {
      // 20 submits of 1-GPU runs at once, on a team with a cap of 4 GPUs and nothing in flight.
      for (const path of ['before', 'after'] as const) {
        const submit = makePaths(base)[path];
        const results = await Promise.allSettled(
          Array.from({ length: 20 }, (_, i) => submit(input('burst', `${path}-burst-${i}`))),
        );
        bursts[path] = results.filter((r) => r.status === 'fulfilled').length;
        for (const r of results) {
          if (r.status !== 'fulfilled') continue;
          const id = r.value.record.runId;
          if (path === 'after') await records.update(id, { phase: 'Cancelled' });
          else {
            const got = await base.get<RunRecord>(runItemKey(id));
            const done = { ...r.value.record, phase: 'Cancelled' as const };
            await base.put(runItemKey(id), done, runIndexes(done), { ifVersion: got?.version ?? '1' });
          }
        }
      }
    }
    await local.close();
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

const row = (n: number, p: Row['path']) => rows.find((r) => r.inFlight === n && r.path === p) as Row;
const lines = [
  '# Submit cost of the team caps (bench/submit-cost.ts)',
  '',
  `Per POST /v1/runs through the submit use case on the local state table (dynalite on disk, DynamoDB adapter), ${SAMPLES} submits per row after ${WARMUP} warm-up, each new run ended again outside the timing so the team keeps its runs in flight. "Before": the previous path (sum the team's in-flight records from the team+phase index at every submit, then a plain conditional put); "after": the team counters (one TransactWriteItems: the record and an ADD on \`count#<team>\` conditioned on the caps). Machine: 2 shared cores; figures from one run of \`npm exec -- node bench/submit-cost.ts\`.`,
  '',
  '| runs in flight | path | queries | items read | GetItem | PutItem/UpdateItem | TransactWriteItems | p50 ms | p95 ms |',
  '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ...rows.map(
    (r) =>
      `| ${r.inFlight.toLocaleString('en')} | ${r.path} | ${r.counts.queries} | ${r.counts.itemsRead} | ${r.counts.gets} | ${r.counts.writes} | ${r.counts.transactions} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} |`,
  ),
  '',
  'Ratios (same run, before ÷ after):',
  '',
  ...SIZES.map((n) => {
    const b = row(n, 'before');
    const a = row(n, 'after');
    return `- ${n.toLocaleString('en')} in flight: p50 ${(b.p50 / a.p50).toFixed(1)}× faster after; items read ${b.counts.itemsRead} → ${a.counts.itemsRead}, queries ${b.counts.queries} → ${a.counts.queries}.`;
  }),
  `- After, the time per POST with ${SIZES.at(-1)?.toLocaleString('en')} in flight is ${(row(SIZES.at(-1) as number, 'after').p50 / row(SIZES[0] as number, 'after').p50).toFixed(2)}× that with ${SIZES[0]} (before: ${(row(SIZES.at(-1) as number, 'before').p50 / row(SIZES[0] as number, 'before').p50).toFixed(1)}×).`,
  '',
  `20 submits of 1-GPU runs at once on a cap of 4 GPUs (nothing in flight): before ${bursts.before} accepted, after ${bursts.after}.`,
  '',
  'What the figures leave out: the HTTP layer (API Gateway, Lambda, the local API host) and the runs-queue enqueue (an in-memory fake here, the same on both paths); the network round trip to DynamoDB (in process here: on AWS each request is a few ms, so the 35 queries of the 3,000 case cost more there than here, and the one transaction about one round trip); the cost of a transactional write on AWS (2 write units per item, and TransactionConflict retries when many submits of one team hit the counters item at the same instant — the local shim serializes them instead); the writes that end a run, which now also write the counters item (one more item per ending, in the same transaction). "Items read" counts what the state table returned to Gantry (query pages and GetItems); a transaction\'s condition reads are not counted.',
];
writeFileSync(new URL('./results/submit-cost.md', import.meta.url), `${lines.join('\n')}\n`);
console.log(lines.join('\n'));
