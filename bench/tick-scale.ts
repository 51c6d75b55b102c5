/**
 * Reconciler tick cost at scale (issue 23): N active runs (default 1,000, 3,000 and 10,000), each
 * a TrainJob on the cluster simulator carrying a waiting task token, with its record in the state
 * table. Requests per tick by kind — Kubernetes (the simulator's own request counter), Step
 * Functions (SendTask* and DescribeExecution calls), state table (by operation) — and the tick's
 * wall time and CPU, for a cold tick (a new reconciler, as a cold Lambda), steady ticks a minute
 * apart on an injected clock, and a cold restart once every record is up to date.
 *
 * Real parts: the production reconciler (lib/orchestration/reconcile.ts) with the production
 * Kubernetes gateway against the simulator (its own process: Kueue admits 64 GPUs' worth, the rest
 * wait in the queue) and the DynamoDB adapter on dynalite. Stand-in: Step Functions — the calls are
 * counted, not sent (every token is valid; a job whose admission is answered gets its completion
 * token as the state machine's AwaitCompletion step would store it, outside the measured tick).
 *
 * Run: `node bench/tick-scale.ts [1000,3000,10000]`; writes bench/results/tick-scale.md.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { makeDynamoStateTable } from '../lib/adapters/aws/dynamodb-table.ts';
import { makeKubernetesGateway } from '../lib/adapters/kubernetes/gateway.ts';
import { kubeConfigFromYaml } from '../lib/adapters/kubernetes/kubeconfig.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { HEARTBEAT_EVERY_SECONDS, makeReconciler, type TickReport } from '../lib/orchestration/reconcile.ts';
import type { JobApi, WorkflowEngine } from '../lib/ports.ts';
import { requestFingerprint } from '../lib/run/ids.ts';
import { newRecord } from '../lib/run/record.ts';
import { makeRunRecords } from '../lib/run/records.ts';
import type { RunSpec } from '../lib/run/spec.ts';
import type { StateTable } from '../lib/state/table.ts';
import { buildJob, jobApi } from '../lib/trainjob/build.ts';
import { ANNOTATION } from '../lib/trainjob/labels.ts';
import { startLocalStateTable } from '../local/state-table.ts';
import { aRunRequest } from '../test/helpers/builders.ts';
import { spawnSimulator } from './sim-process.ts';

const SIZES = (process.argv[2] ?? '1000,3000,10000').split(',').map(Number);
const TICK_SECONDS = 60;
const SHAPE = 'trainer-v2.2' as const;
const API: JobApi = jobApi(SHAPE);

/**
 * A task token for run i: a fixed prefix, the index, and a long pseudo-random tail, as Step Functions'
 * tokens are opaque and random. Short sequential tokens (`adm-17`) hash unevenly onto heartbeat phases
 * (lib/orchestration/heartbeats.ts), which made heartbeats per tick look ~50 % over N/5.
 */
const token = (kind: 'adm' | 'cmp', i: number | string) =>
  `${kind}-${i}-${createHash('sha256').update(`${kind}${i}`).digest('base64url')}`;

interface TickRow {
  tick: string;
  k8s: number;
  k8sBy: Record<string, number>;
  sfn: Record<string, number>;
  store: Record<string, number>;
  wallMs: number;
  cpuMs: number;
  report: TickReport;
}

function startSimulator() {
  return spawnSimulator(
    ['--speed=1', '--trainer=2.2', '--queue=demo-queue=64', `--duration-seconds=${30 * 24 * 3600}`],
    { kubeconfig: true },
  );
}

function countingTable(table: StateTable, counts: Record<string, number>): StateTable {
  const bump = (k: string, n = 1) => {
    counts[k] = (counts[k] ?? 0) + n;
  };
  return {
    get(...a) {
      bump('GetItem');
      return table.get(...a);
    },
    getMany(keys, opts) {
      bump('BatchGetItem', Math.ceil(keys.length / 100));
      return table.getMany(keys, opts);
    },
    put(...a) {
      bump('PutItem');
      return table.put(...a);
    },
    query(...a) {
      bump('Query');
      return table.query(...a);
    },
    delete(...a) {
      bump('DeleteItem');
      return table.delete(...a);
    },
    increment(...a) {
      bump('UpdateItem');
      return table.increment(...a);
    },
    putCounted(...a) {
      bump('TransactWriteItems');
      return table.putCounted(...a);
    },
  };
}

async function measure(n: number) {
  const sim = await startSimulator();
  const state = await startLocalStateTable();
  try {
    await fetch(`${sim.url}/api/v1/namespaces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } }),
    });
    const gateway = makeKubernetesGateway({
      kubeConfig: () => kubeConfigFromYaml(readFileSync(sim.kubeconfig, 'utf8')),
      fetchTimeoutMs: 300_000,
    });
    const storeCounts: Record<string, number> = {};
    const table = countingTable(
      makeDynamoStateTable({ client: state.client, tableName: state.tableName }),
      storeCounts,
    );
    let nowMs = Date.now();
    const clock = { now: () => new Date(nowMs) };
    const records = makeRunRecords({ table, clock });

    // N runs: record (Pending, as after CreateJob) and job with its admission token.
    const t0 = performance.now();
    const specs: RunSpec[] = Array.from({ length: n }, (_, i) => {
      const runId = `run-${String(i).padStart(20, '0')}`;
      return {
        runId,
        cluster: 'local',
        jobName: runId,
        namespace: 'demo',
        request: aRunRequest({
          team: 'demo',
          namespace: 'demo',
          queue: 'demo-queue',
          image: 'registry.local/train:1',
          resourcesPerNode: { gpu: 1 },
        }),
        outputUri: `s3://bench/runs/${runId}/output/`,
      };
    });
    await mapLimit(specs, 16, async (spec, i) => {
      await records.create(newRecord(spec, requestFingerprint(spec.request), clock.now()));
      await records.update(spec.runId, { phase: 'Pending' });
      const job = buildJob(spec, SHAPE);
      job.metadata.annotations = {
        ...job.metadata.annotations,
        [ANNOTATION.admissionToken]: token('adm', i),
      };
      await gateway.createJob(job);
    });
    const setupSeconds = (performance.now() - t0) / 1000;
    await new Promise((r) => setTimeout(r, 3000)); // Kueue admits the first 64 GPUs' worth

    // Step Functions stand-in: counts; an answered admission gets its completion token next.
    const sfnCounts: Record<string, number> = {};
    const admitted: string[] = [];
    const bump = (k: string) => {
      sfnCounts[k] = (sfnCounts[k] ?? 0) + 1;
    };
    const workflow = {
      async sendTaskSuccess(t: string) {
        bump('SendTaskSuccess');
        if (t.startsWith('adm-')) admitted.push(t.split('-')[1] as string);
        return true;
      },
      async sendTaskFailure() {
        bump('SendTaskFailure');
        return true;
      },
      async sendTaskHeartbeat() {
        bump('SendTaskHeartbeat');
        return true;
      },
      async status() {
        bump('DescribeExecution');
        return 'RUNNING' as const;
      },
    } as unknown as WorkflowEngine;

    const reconcilerOf = () =>
      makeReconciler({
        clusters: () => [{ name: 'local', gateway, jobApis: async () => [API] }],
        workflow,
        records,
        clock,
        orphanGraceSeconds: 30 * 24 * 3600,
      });
    let reconciler = reconcilerOf();
    const rows: TickRow[] = [];
    const tick = async (label: string) => {
      for (const k of Object.keys(sfnCounts)) delete sfnCounts[k];
      for (const k of Object.keys(storeCounts)) delete storeCounts[k];
      const before = await sim.stats();
      const cpu0 = process.cpuUsage();
      const w0 = performance.now();
      const report = await reconciler.tick();
      const wallMs = performance.now() - w0;
      const cpu = process.cpuUsage(cpu0);
      const after = await sim.stats();
      const k8sBy: Record<string, number> = {};
      for (const [k, v] of Object.entries(after.requests.byVerbResource)) {
        const d = v - (before.requests.byVerbResource[k] ?? 0);
        if (d > 0 && !k.includes('_sim')) k8sBy[k] = d;
      }
      rows.push({
        tick: label,
        k8s: Object.values(k8sBy).reduce((a, b) => a + b, 0),
        k8sBy,
        sfn: { ...sfnCounts },
        store: { ...storeCounts },
        wallMs,
        cpuMs: (cpu.user + cpu.system) / 1000,
        report,
      });
      process.stderr.write(
        `  n=${n} ${label}: ${JSON.stringify(rows.at(-1)?.report)} in ${wallMs.toFixed(0)} ms\n`,
      );
      // The state machine's next step stores the completion token of each answered admission.
      await mapLimit(admitted.splice(0), 16, async (i) => {
        await gateway.annotateJob(API, 'demo', `run-${i.padStart(20, '0')}`, {
          [ANNOTATION.completionToken]: token('cmp', i),
        });
      });
    };

    await tick('cold (t=0)');
    for (let t = TICK_SECONDS; t <= 6 * TICK_SECONDS; t += TICK_SECONDS) {
      nowMs += TICK_SECONDS * 1000;
      await tick(`steady (t=${t}s)`);
    }
    reconciler = reconcilerOf();
    nowMs += TICK_SECONDS * 1000;
    await tick(`cold restart (t=${7 * TICK_SECONDS}s)`);
    nowMs += TICK_SECONDS * 1000;
    await tick(`steady (t=${8 * TICK_SECONDS}s)`);
    const simStats = await sim.stats();
    return { n, setupSeconds, rows, running: simStats.jobs.running };
  } finally {
    await state.close();
    sim.stop();
  }
}

const results = [];
for (const n of SIZES) {
  process.stderr.write(`n=${n}: setting up\n`);
  results.push(await measure(n));
}

const fmt = (o: Record<string, number>) =>
  Object.entries(o)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || '0';
const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);
const lines: string[] = [
  '# Reconciler tick cost at scale',
  '',
  `Measured ${new Date().toISOString().slice(0, 10)} with \`node bench/tick-scale.ts ${SIZES.join(',')}\` (Node ${process.version}, ${cpus().length} CPUs shared`,
  'with the simulator process). N runs each wait on a task token stored on their TrainJob (Kueue admits',
  '64 one-GPU jobs, the rest stay queued); records in the state table (DynamoDB adapter on dynalite).',
  'Step Functions is a counting stand-in (calls counted, not sent). Ticks a minute apart on an injected',
  `clock; heartbeats are paced once per ${HEARTBEAT_EVERY_SECONDS} s per token, each at a phase of its own.`,
  '',
];
for (const r of results) {
  lines.push(
    `## ${r.n} active runs`,
    '',
    `Setup (records + jobs, 16 in flight): ${r.setupSeconds.toFixed(1)} s; running at the end: ${r.running}.`,
    '',
  );
  lines.push(
    '| tick | Kubernetes requests | Step Functions calls | state table calls | wall | reconciler CPU |',
  );
  lines.push('| --- | --- | --- | --- | --- | --- |');
  for (const row of r.rows) {
    lines.push(
      `| ${row.tick} | ${row.k8s} (${fmt(row.k8sBy)}) | ${sum(row.sfn)} (${fmt(row.sfn)}) | ${sum(row.store)} (${fmt(row.store)}) | ${row.wallMs.toFixed(0)} ms | ${row.cpuMs.toFixed(0)} ms |`,
    );
  }
  const steady = r.rows.filter((x) => x.tick.startsWith('steady'));
  const maxSfn = Math.max(...steady.map((x) => sum(x.sfn)));
  const meanSfn = steady.reduce((a, x) => a + sum(x.sfn), 0) / steady.length;
  const maxStore = Math.max(...steady.map((x) => sum(x.store)));
  lines.push(
    '',
    `Steady ticks: Step Functions calls mean ${meanSfn.toFixed(0)}, max ${maxSfn} (goal ≤ N/5 + changes = ${r.n / 5} + changes); state table calls max ${maxStore} (goal: changes only).`,
    '',
  );
}
const out = new URL('./results/tick-scale.md', import.meta.url).pathname;
writeFileSync(out, `${lines.join('\n')}\n`);
process.stdout.write(`${lines.join('\n')}\n`);
process.exit(0);
