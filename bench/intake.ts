/**
 * Intake on the embedded default (2 cores): HTTP API latency (p50/p99) of POST /v1/runs and
 * GET /v1/runs/{id}, against GET /v1/openapi.json (a handler that touches no AWS service) as the
 * in-run baseline; and intake throughput — submissions per second until every execution has
 * started (record past Accepted). Run: `node bench/intake.ts [n=300]`.
 */
import { writeFileSync } from 'node:fs';
import { startEmbedded } from '../local/embedded.ts';
import { PRINCIPAL_HEADER } from '../local/http-api.ts';
import { DEMO_TEAM } from '../local/stack.ts';
import { runDriver } from '../test/helpers/runs.ts';

const N = Number(process.argv[2] ?? 300);
const PRINCIPAL = DEMO_TEAM.principals[0] as string;

const env = await startEmbedded({
  simSpeed: 600,
  sfnSpeed: 60,
  simulator: {
    defaultDurationSeconds: 3600,
    queues: [{ name: 'demo-queue', clusterQueue: 'cq', quota: { cpu: 1e6 } }],
  },
});
const driver = runDriver(env.stack);

const body = (i: number) =>
  JSON.stringify({
    modelName: 'bench',
    team: 'demo',
    runtime: { name: 'torch-distributed' },
    image: 'registry.local/bench:1',
    args: [`--seed=${i}`],
  });

async function timed(method: string, path: string, payload?: string, key?: string) {
  const t = performance.now();
  const res = await fetch(`${env.api.url}${path}`, {
    method,
    headers: {
      [PRINCIPAL_HEADER]: PRINCIPAL,
      ...(payload ? { 'content-type': 'application/json' } : {}),
      ...(key ? { 'idempotency-key': key } : {}),
    },
    ...(payload ? { body: payload } : {}),
  });
  const json = (await res.json()) as { runId?: string };
  return { ms: performance.now() - t, status: res.status, runId: json.runId };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
};

// Latency: one request at a time; the consumer and reconciler run as they would.
const base: number[] = [];
const post: number[] = [];
const get: number[] = [];
const ids: string[] = [];
for (let i = 0; i < 100; i++) base.push((await timed('GET', '/v1/openapi.json')).ms);
for (let i = 0; i < 100; i++) {
  const r = await timed('POST', '/v1/runs', body(i), `lat-${i}`);
  if (r.status !== 202 || !r.runId) throw new Error(`POST failed: ${r.status}`);
  post.push(r.ms);
  ids.push(r.runId);
}
for (const id of ids) get.push((await timed('GET', `/v1/runs/${id}`)).ms);

// Throughput: N submissions, 20 at a time, until every run's execution has started.
const t0 = performance.now();
const runIds: string[] = [];
for (let i = 0; i < N; i += 20) {
  const batch = await Promise.all(
    Array.from({ length: Math.min(20, N - i) }, (_, k) =>
      timed('POST', '/v1/runs', body(1000 + i + k), `tp-${i + k}`),
    ),
  );
  runIds.push(...batch.map((b) => b.runId as string));
}
const acceptedMs = performance.now() - t0;
const pending = new Set(runIds);
while (pending.size > 0) {
  for (const id of [...pending]) {
    const r = await driver.records.get(id);
    if (r && r.phase !== 'Accepted') pending.delete(id);
  }
  await new Promise((r) => setTimeout(r, 250));
}
const startedMs = performance.now() - t0;
await env.close();

const md = `# Intake

Measured ${new Date().toISOString().slice(0, 10)} on the embedded default (2 cores; fauxqs, local Step Functions, the
cluster simulator and the HTTP host in one process). \`node bench/intake.ts ${N}\`.

## API latency (one request at a time, 100 each)

| request | p50 | p99 | p50 × baseline |
| --- | --- | --- | --- |
| GET /v1/openapi.json (baseline: no AWS call) | ${pct(base, 50).toFixed(1)} ms | ${pct(base, 99).toFixed(1)} ms | 1.00 |
| POST /v1/runs (validate, tenancy, conditional record write, SQS send) | ${pct(post, 50).toFixed(1)} ms | ${pct(post, 99).toFixed(1)} ms | ${(pct(post, 50) / pct(base, 50)).toFixed(2)} |
| GET /v1/runs/{id} (one S3 read) | ${pct(get, 50).toFixed(1)} ms | ${pct(get, 99).toFixed(1)} ms | ${(pct(get, 50) / pct(base, 50)).toFixed(2)} |

## Intake throughput

${N} submissions, 20 in flight: all accepted (202) after ${(acceptedMs / 1000).toFixed(1)} s
(${((N / acceptedMs) * 1000).toFixed(0)} submissions/s); every execution started (record past Accepted) after
${(startedMs / 1000).toFixed(1)} s (${((N / startedMs) * 1000).toFixed(0)} runs/s through the queue into Step Functions).
`;
writeFileSync(new URL('./results/intake.md', import.meta.url), md);
console.log(md);
process.exit(0);
