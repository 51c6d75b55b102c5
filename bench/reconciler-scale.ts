/**
 * The reconciler at production shape (issue 37; BUDGETS.md "Operating budgets"): N active runs on
 * one cluster with realistic objects — TrainJobs, Kueue Workloads with pod templates, four pods per
 * running run, all with managedFields, and as many other tenants' Workloads in other namespaces —
 * served by bench/fixture-apiserver.ts in a process of its own. The production reconciler
 * (lib/orchestration/reconcile.ts) with the production Kubernetes gateway, the production pacing of
 * Step Functions calls (750 burst, 150/s: lib/config.ts GANTRY_SFN_ANSWERS_*) and passes 10 s apart.
 *
 * Measured per pass: the heap at its peak (process.memoryUsage().heapUsed sampled every 20 ms, after
 * a full GC before the pass), Kubernetes requests and objects listed (counted by the fixture
 * server), Step Functions calls, the pass's wall time — for a cold pass (a new container: every
 * token unknown), a minute of steady passes 10 s apart on the real clock, and a cold restart.
 * Stand-ins: Step Functions (calls paced and counted, not sent) and the state table (in memory, in
 * this process: its records are in the heap baseline, not in the reconciler's peak above it).
 *
 * Run: `node --expose-gc bench/reconciler-scale.ts [1000,10000]`; writes bench/results/tick-scale.md
 * (with `--out=<file>` elsewhere).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { getHeapStatistics } from 'node:v8';
import { makeKubernetesGateway } from '../lib/adapters/kubernetes/gateway.ts';
import { mapLimit } from '../lib/concurrency.ts';
import { tokenBucket } from '../lib/orchestration/pacing.ts';
import { makeReconciler, type TickReport } from '../lib/orchestration/reconcile.ts';
import type { CallOptions, JobApi, WorkflowEngine } from '../lib/ports.ts';
import { requestFingerprint } from '../lib/run/ids.ts';
import { newRecord } from '../lib/run/record.ts';
import { makeRunRecords } from '../lib/run/records.ts';
import type { RunSpec } from '../lib/run/spec.ts';
import { jobApi } from '../lib/trainjob/build.ts';
import { aRunRequest } from '../test/helpers/builders.ts';
import { memoryTable } from '../test/helpers/intake-fakes.ts';

const args = process.argv.slice(2);
const SIZES = (args.find((a) => !a.startsWith('--')) ?? '1000,10000').split(',').map(Number);
const OUT =
  args.find((a) => a.startsWith('--out='))?.slice(6) ??
  new URL('./results/tick-scale.md', import.meta.url).pathname;
const LABEL = args.find((a) => a.startsWith('--label='))?.slice(8) ?? '';
const PASS_MS = 10_000;
const INVOCATION_MS = 55_000;
const MEMORY_MB = 512;
const API: JobApi = jobApi('trainer-v2.2');
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
const MB = (b: number) => b / 2 ** 20;

interface Stats {
  requests: Record<string, number>;
  listed: Record<string, number>;
}

async function startFixtures(n: number): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [new URL('./fixture-apiserver.ts', import.meta.url).pathname, String(n)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      const m = /listening (\S+)/.exec(d.toString());
      if (m?.[1]) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`fixture server exited ${code}`)));
  });
  return { url, child };
}

/** Heap per object of a LIST page as JSON.parse leaves it (what the reconciler held before trimming). */
async function heapPerObject(url: string, path: string): Promise<number> {
  gc();
  const before = process.memoryUsage().heapUsed;
  const page = (await (await fetch(`${url}${path}`)).json()) as { items: unknown[] };
  gc();
  const after = process.memoryUsage().heapUsed;
  const per = (after - before) / page.items.length;
  page.items.length = 0;
  return per;
}

interface PassRow {
  pass: string;
  wallMs: number;
  cpuMs: number;
  peakHeapMb: number;
  baseHeapMb: number;
  peakRssMb: number;
  k8s: Record<string, number>;
  listed: Record<string, number>;
  sfn: Record<string, number>;
  report: TickReport;
}

async function measure(n: number) {
  const { url, child } = await startFixtures(n);
  try {
    const perPod = await heapPerObject(url, '/api/v1/pods?limit=500');
    const perWorkload = await heapPerObject(url, '/apis/kueue.x-k8s.io/v1beta2/workloads?limit=500');
    let nowMs = Date.parse('2026-12-01T09:00:00Z');
    const clock = { now: () => new Date(nowMs) };
    const records = makeRunRecords({ table: memoryTable(), clock });
    const t0 = performance.now();
    await mapLimit(
      Array.from({ length: n }, (_, i) => i),
      64,
      async (i) => {
        const runId = `run-${String(i).padStart(8, '0')}`;
        const spec: RunSpec = {
          runId,
          cluster: 'c1',
          jobName: runId,
          namespace: `team-${i % 10}`,
          request: aRunRequest({
            team: `team-${i % 10}`,
            namespace: `team-${i % 10}`,
            queue: 'q',
            image: 'r/t:1',
          }),
          outputUri: `s3://bench/runs/${runId}/output/`,
        };
        await records.create(newRecord(spec, requestFingerprint(spec.request), clock.now()));
        await records.update(runId, { phase: 'Pending' });
      },
    );
    const setupSeconds = (performance.now() - t0) / 1000;
    const gateway = makeKubernetesGateway({
      kubeConfig: { getCurrentCluster: () => ({ server: url }), applyToHTTPSOptions: async () => undefined },
      fetchTimeoutMs: 120_000,
    });
    const sfn: Record<string, number> = {};
    const admitted: number[] = [];
    const bump = (k: string) => {
      sfn[k] = (sfn[k] ?? 0) + 1;
    };
    const workflow = {
      async sendTaskSuccess(t: string) {
        bump('SendTaskSuccess');
        if (t.startsWith('adm-')) admitted.push(Number(t.split('-')[1]));
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
    /** A new container: its own reconciler and pacing buckets (full), as a cold Lambda. */
    const container = () =>
      makeReconciler({
        clusters: () => [{ name: 'c1', gateway, jobApis: async () => [API] }],
        workflow,
        records,
        clock,
        orphanGraceSeconds: 30 * 24 * 3600,
        pacing: {
          answers: tokenBucket({ capacity: 750, perSecond: 150 }),
          describe: tokenBucket({ capacity: 120, perSecond: 5 }),
        },
      });
    let reconciler = container();
    let invocationStart = performance.now();
    const rows: PassRow[] = [];
    const pass = async (label: string) => {
      for (const k of Object.keys(sfn)) delete sfn[k];
      await fetch(`${url}/_reset`);
      gc();
      const base = process.memoryUsage();
      let peakHeap = base.heapUsed;
      let peakRss = base.rss;
      const sampler = setInterval(() => {
        const m = process.memoryUsage();
        peakHeap = Math.max(peakHeap, m.heapUsed);
        peakRss = Math.max(peakRss, m.rss);
      }, 20);
      const w0 = performance.now();
      const cpu0 = process.cpuUsage();
      // The invocation's remaining time, as Lambda's context says it (55 s from the invocation's start).
      const opts = {
        remainingMs: () => INVOCATION_MS - (performance.now() - invocationStart),
      } as CallOptions;
      const report = await reconciler.tick(opts);
      const wallMs = performance.now() - w0;
      const cpu = process.cpuUsage(cpu0);
      clearInterval(sampler);
      const m = process.memoryUsage();
      peakHeap = Math.max(peakHeap, m.heapUsed);
      peakRss = Math.max(peakRss, m.rss);
      const stats = (await (await fetch(`${url}/_stats`)).json()) as Stats;
      rows.push({
        pass: label,
        wallMs,
        cpuMs: (cpu.user + cpu.system) / 1000,
        peakHeapMb: MB(peakHeap),
        baseHeapMb: MB(base.heapUsed),
        peakRssMb: MB(peakRss),
        k8s: stats.requests,
        listed: stats.listed,
        sfn: { ...sfn },
        report,
      });
      process.stderr.write(
        `  n=${n} ${label}: ${wallMs.toFixed(0)} ms, heap ${MB(base.heapUsed).toFixed(0)} → ${MB(peakHeap).toFixed(0)} MB, ${JSON.stringify(report)}\n`,
      );
      // The state machine's next step stores the completion token of each answered admission.
      const runs = admitted.splice(0);
      if (runs.length) await fetch(`${url}/_admit`, { method: 'POST', body: JSON.stringify({ runs }) });
      return w0;
    };
    let started = await pass('cold (new container, t=0)');
    for (let k = 1; k <= 6; k++) {
      // Passes 10 s apart on the real clock (the pacing refills in real time), as runPasses spaces them.
      const took = performance.now() - started;
      const wait = Math.max(0, started + PASS_MS - performance.now());
      // runPasses' rule (lib/orchestration/passes.ts): no next pass in this invocation unless twice
      // the last pass's time and 5 s are left after the wait; the schedule's next invocation runs it.
      const left = INVOCATION_MS - (performance.now() - invocationStart);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (left - wait < 2 * took + 5000) invocationStart = performance.now();
      nowMs += PASS_MS;
      started = await pass(`steady (t=${k * 10}s)`);
    }
    reconciler = container();
    invocationStart = performance.now();
    nowMs += PASS_MS;
    await pass('cold restart (new container, t=70s)');
    return { n, setupSeconds, rows, perPod, perWorkload };
  } finally {
    child.kill();
  }
}

const loadBefore = loadavg()[0] ?? 0;
const results = [];
for (const n of SIZES) {
  process.stderr.write(`n=${n}\n`);
  results.push(await measure(n));
}

const sum = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);
const fmt = (o: Record<string, number>) =>
  Object.entries(o)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ') || '0';
const lines: string[] = [
  `# Reconciler at scale: memory, requests, cold pass${LABEL ? ` (${LABEL})` : ''}`,
  '',
  `Measured ${new Date().toISOString().slice(0, 10)} with \`node --expose-gc bench/reconciler-scale.ts ${SIZES.join(',')}\``,
  `(Node ${process.version}, ${cpus().length} CPUs shared with the fixture server and other work; node flags`,
  `\`${process.execArgv.join(' ') || 'none'}\`: V8 heap limit ${MB(getHeapStatistics().heap_size_limit).toFixed(0)} MB).`,
  `Machine load average (1 min) ${loadBefore.toFixed(1)} at the start, ${(loadavg()[0] ?? 0).toFixed(1)} at the end: wall times`,
  'move with it; heap, requests, objects and calls do not.',
  '',
];
for (const r of results) {
  const steady = r.rows.filter((x) => x.pass.startsWith('steady'));
  const perMin = (pick: (x: PassRow) => number) => steady.reduce((a, x) => a + pick(x), 0);
  const cold = r.rows[0] as PassRow;
  const peak = Math.max(...r.rows.map((x) => x.peakHeapMb));
  lines.push(
    `## ${r.n} active runs`,
    '',
    `Heap per object as a LIST page parses (before trimming): pod ${(r.perPod / 1024).toFixed(1)} KB, Workload ${(r.perWorkload / 1024).toFixed(1)} KB. Records set up in ${r.setupSeconds.toFixed(1)} s.`,
    '',
    '| pass | wall (reconciler CPU) | heap before → peak | peak RSS | Kubernetes requests | objects listed | Step Functions calls |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  );
  for (const x of r.rows)
    lines.push(
      `| ${x.pass} | ${(x.wallMs / 1000).toFixed(1)} s (${(x.cpuMs / 1000).toFixed(1)} s) | ${x.baseHeapMb.toFixed(0)} → ${x.peakHeapMb.toFixed(0)} MB | ${x.peakRssMb.toFixed(0)} MB | ${sum(x.k8s)} (${fmt(x.k8s)}) | ${sum(x.listed)} (${fmt(x.listed)}) | ${sum(x.sfn)} (${fmt(x.sfn)}) |`,
    );
  lines.push(
    '',
    `- Peak heap ${peak.toFixed(0)} MB: ${((peak / MEMORY_MB) * 100).toFixed(0)} % of the reconciler's ${MEMORY_MB} MB (goal ≤ 50 %).`,
    `- Cold pass: ${(cold.wallMs / 1000).toFixed(1)} s under production pacing against the ${INVOCATION_MS / 1000} s invocation; it answered ${cold.report.answered + cold.report.failed}, wrote ${cold.report.recordsUpdated} records and sent ${cold.report.heartbeats} heartbeats.`,
    `- Steady minute (6 passes 10 s apart): ${perMin((x) => sum(x.k8s))} Kubernetes requests, ${perMin((x) => sum(x.listed))} objects listed, ${perMin((x) => sum(x.sfn))} Step Functions calls. Each woken pass (at most one a second) costs one more pass's LISTs: ${sum((steady[0] as PassRow).k8s)} requests, ${sum((steady[0] as PassRow).listed)} objects.`,
    '',
  );
}
lines.push(
  '## What this bench leaves out',
  '',
  '- The API server is a fixture (bench/fixture-apiserver.ts): real objects in shape and size, but no',
  '  Kueue, no scheduler, no state changes beyond the token patches; a real apiserver serves LIST',
  '  pages slower, and its cost (etcd reads, serialization of ~8 KB per pod) is not measured here.',
  '- Step Functions is a stand-in: calls paced (750 burst, 150/s) and counted, answered at once.',
  '  Record writes go to an in-memory table in this process (its records are in the heap before',
  '  each pass), not DynamoDB: their latency is not in the pass times.',
  '- Lambda CPU: a 512 MB function has about a third of a vCPU; these passes ran on a shared core of a',
  '  development machine, so the wall times are lower bounds for Lambda.',
  '- Woken passes: none here (no job changes between passes); each costs one more pass (see above).',
  '- One cluster, one shard; 10 % of runs queued, 90 % running with 4 pods each; as many other',
  "  tenants' Workloads as Gantry's, in 10 other namespaces.",
  '',
);
writeFileSync(OUT, `${lines.join('\n')}\n`);
process.stdout.write(`${lines.join('\n')}\n`);
process.exit(0);
