/**
 * What the metric channel costs the embedded default: N runs submitted through the HTTP API and
 * followed to Succeeded, once with the simulated training code reporting through the metric
 * channel (JSON Lines objects → S3 notifications → metrics queue → consumer → run record and
 * history) and once without (the simulator's `metricChannel: false`: no reports at all). Each
 * variant runs in its own process (the handlers cache their configuration per process), A and B
 * alternated, and the ratio of medians is what counts.
 * Run: `npm run bench:metric-channel -- [runs=200] [rounds=2]`; results go to bench/results/metric-channel.md.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { startEmbedded } from '../local/embedded.ts';
import { PRINCIPAL_HEADER } from '../local/http-api.ts';
import { DEMO_TEAM } from '../local/stack.ts';

interface Sample {
  channel: boolean;
  runs: number;
  wallMs: number;
  metricObjects: number;
  withMetrics: number;
  succeeded: number;
}

async function child(channel: boolean, n: number): Promise<Sample> {
  const env = await startEmbedded({
    simSpeed: 600,
    sfnSpeed: 60,
    simulator: {
      defaultDurationSeconds: 60,
      metricChannel: channel,
      queues: [{ name: 'demo-queue', clusterQueue: 'cq', quota: { cpu: 100000 } }],
    },
    stack: { orphanGraceSeconds: 1, reconcileEveryMs: 500 },
  });
  const principal = DEMO_TEAM.principals[0] as string;
  const get = async (path: string) =>
    (await (await fetch(`${env.api.url}${path}`, { headers: { [PRINCIPAL_HEADER]: principal } })).json()) as {
      phase?: string;
      metrics?: Record<string, number>;
    };
  try {
    const started = performance.now();
    const ids = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const res = await fetch(`${env.api.url}/v1/runs`, {
          method: 'POST',
          headers: { [PRINCIPAL_HEADER]: principal, 'content-type': 'application/json' },
          body: JSON.stringify({
            modelName: 'bench',
            team: 'demo',
            runtime: { name: 'torch-distributed' },
            image: 'registry.local/tiny:1',
            idempotencyKey: `metric-bench-${i}`,
          }),
        });
        return ((await res.json()) as { runId: string }).runId;
      }),
    );
    const done = new Map<string, { phase?: string; metrics?: Record<string, number> }>();
    while (done.size < n && performance.now() - started < 600_000) {
      for (const id of ids) {
        if (done.has(id)) continue;
        const run = await get(`/v1/runs/${id}`);
        if (['Succeeded', 'Failed', 'Cancelled'].includes(String(run.phase))) done.set(id, run);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    const wallMs = performance.now() - started;
    let metricObjects = 0;
    let token: string | undefined;
    do {
      const page = await env.stack.s3.send(
        new ListObjectsV2Command({ Bucket: env.stack.bucket, Prefix: 'runs/', ContinuationToken: token }),
      );
      metricObjects += (page.Contents ?? []).filter((o) => o.Key?.endsWith('.jsonl')).length;
      token = page.NextContinuationToken;
    } while (token);
    const runs = [...done.values()];
    return {
      channel,
      runs: n,
      wallMs,
      metricObjects,
      withMetrics: runs.filter((r) => typeof r.metrics?.accuracy === 'number').length,
      succeeded: runs.filter((r) => r.phase === 'Succeeded').length,
    };
  } finally {
    await env.close();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

if (process.argv[2] === '--child') {
  const sample = await child(process.argv[3] === 'on', Number(process.argv[4]));
  console.log(`RESULT ${JSON.stringify(sample)}`);
  process.exit(0);
} else {
  const n = Number(process.argv[2] ?? 200);
  const rounds = Number(process.argv[3] ?? 2);
  const samples: Sample[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const mode of r % 2 === 0 ? ['off', 'on'] : ['on', 'off']) {
      const out = execFileSync(process.execPath, [import.meta.filename, '--child', mode, String(n)], {
        encoding: 'utf8',
        maxBuffer: 256 * 1024 * 1024,
        env: { ...process.env, GANTRY_LOG_LEVEL: 'error' },
      });
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      if (!line) throw new Error(`child ${mode} printed no result`);
      const s = JSON.parse(line.slice('RESULT '.length)) as Sample;
      samples.push(s);
      console.log(JSON.stringify(s));
    }
  }
  const on = samples.filter((s) => s.channel);
  const off = samples.filter((s) => !s.channel);
  const ratio = median(on.map((s) => s.wallMs)) / median(off.map((s) => s.wallMs));
  const row = (s: Sample) =>
    `| ${s.channel ? 'metric channel' : 'no reports'} | ${s.runs} | ${s.succeeded} | ${s.withMetrics} | ${s.metricObjects} | ${(s.wallMs / 1000).toFixed(1)} s |`;
  const md = `# The metric channel's cost on the embedded default

Measured ${new Date().toISOString().slice(0, 10)} (2 cores, shared with other work): \`node bench/metric-channel.ts ${n} ${rounds}\`.
${n} runs of 60 simulated seconds submitted at once through the HTTP API and followed to the end, with
the simulated training code reporting through the metric channel (about one object per 10 % of
progress plus the final one) and without any reports; each variant in its own process, alternated.

| variant | runs | Succeeded | with metrics in the record | metric objects | wall (submit → all ended) |
| --- | --- | --- | --- | --- | --- |
${samples.map(row).join('\n')}

Median wall, channel / no reports: **${ratio.toFixed(2)}×** (${(median(on.map((s) => s.wallMs)) / 1000).toFixed(1)} s vs ${(median(off.map((s) => s.wallMs)) / 1000).toFixed(1)} s).
Each metric object is one S3 PUT by the training code, one SQS message, one history write and one
record write (a batch of objects of the same run shares the history and record write). Without
reports no run has metrics: a sweep's objective and the published manifest's metrics come only
from the channel on a default install (Trainer's TrainJobStatus gate off).
`;
  writeFileSync(new URL('./results/metric-channel.md', import.meta.url), md);
  console.log(md);
}
