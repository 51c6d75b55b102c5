/**
 * How late Gantry notices (issue 23, "Lag"): for runs submitted through the HTTP API on the
 * embedded default, the time from a TrainJob's completion to the state machine's wait being
 * answered (AwaitCompletion's TaskSucceeded), and from the submit's 202 to the TrainJob's creation.
 *
 * The reconciler's schedule is time-compressed by COMPRESSION: the local stack runs a pass every
 * `passSeconds × 1000 / COMPRESSION` ms, the state machine runs at speed COMPRESSION, and answer
 * latencies are reported × COMPRESSION (production seconds). Two settings, in one run: the
 * 1-minute schedule with one pass per invocation (before), and passes every 10 s within the
 * invocation (serverless.yml's GANTRY_RECONCILE_PASS_SECONDS). The simulator runs in real time
 * (speed 1); the bench sees a job complete by listing TrainJobs every POLL_MS (its error,
 * × COMPRESSION, is given with the results). Submit → job created is not compressed: the local
 * queue poller plays SQS's event source mapping (1 s long polls), so it is reported as measured.
 *
 * Two more settings run in real time (compression 1, `REAL_RUNS` runs each, the same 3 s of
 * training): a pass every 10 s as above, and the same with the reconciler woken by job changes
 * between passes (GANTRY_RECONCILE_WAKE_GAP_SECONDS 1; lib/orchestration/wake.ts) — there the
 * answer does not wait for the period, so compressing it would only multiply the pass's own
 * local duration by 20.
 *
 * Run: `node bench/answer-latency.ts [runs=40]`; writes bench/results/answer-latency.md.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Embedded, startEmbedded } from '../local/embedded.ts';
import { PRINCIPAL_HEADER } from '../local/http-api.ts';
import { runDriver } from '../test/helpers/runs.ts';

const RUNS = Number(process.argv[2] ?? 40);
const REAL_RUNS = Math.max(10, Math.round(RUNS / 2));
const COMPRESSION = 20;
const POLL_MS = 20;
const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1/namespaces/demo/trainjobs';

interface Sample {
  answerSeconds?: number;
  createdMs?: number;
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1));
  return s[i] as number;
}

interface Setting {
  passSeconds: number;
  compression: number;
  /** The wake's gap, seconds (absent: passes only on the period). */
  wakeGapSeconds?: number;
  runs: number;
}

async function measure(setting: Setting) {
  const { passSeconds, compression, runs } = setting;
  const passMs = (passSeconds * 1000) / compression;
  const env: Embedded = await startEmbedded({
    simSpeed: 1,
    sfnSpeed: compression,
    simulator: { defaultDurationSeconds: 3 },
    stack: {
      reconcileEveryMs: passMs,
      orphanGraceSeconds: 30,
      ...(setting.wakeGapSeconds !== undefined
        ? { reconcileWakeGapMs: (setting.wakeGapSeconds * 1000) / compression }
        : {}),
    },
  });
  const completedAt = new Map<string, number>();
  const createdAt = new Map<string, number>();
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      const list = (await (await fetch(`${env.sim.url}${TRAINJOBS}`)).json()) as {
        items: Array<{
          metadata: { name: string };
          status?: { conditions?: Array<{ type: string; status: string }> };
        }>;
      };
      const now = Date.now();
      for (const job of list.items) {
        if (!createdAt.has(job.metadata.name)) createdAt.set(job.metadata.name, now);
        const done = job.status?.conditions?.some(
          (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
        );
        if (done && !completedAt.has(job.metadata.name)) completedAt.set(job.metadata.name, now);
      }
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  })();
  const driver = runDriver(env.stack);
  const samples: Sample[] = [];
  try {
    const submitted: Array<{ runId: string; at: number }> = [];
    for (let i = 0; i < runs; i++) {
      const res = await fetch(`${env.api.url}/v1/runs`, {
        method: 'POST',
        headers: {
          [PRINCIPAL_HEADER]: 'arn:aws:iam::000000000000:user/demo',
          'content-type': 'application/json',
          'idempotency-key': `latency-${passSeconds}-${compression}-${setting.wakeGapSeconds ?? 'none'}-${i}`,
        },
        body: JSON.stringify({
          modelName: 'latency',
          team: 'demo',
          runtime: { name: 'torch-distributed' },
          image: 'registry.local/train:1',
          numNodes: 1,
          resourcesPerNode: { gpu: 1 },
          queue: 'demo-queue',
        }),
      });
      const body = (await res.json()) as { runId: string };
      if (res.status !== 202) throw new Error(`submit: ${res.status} ${JSON.stringify(body)}`);
      submitted.push({ runId: body.runId, at: Date.now() });
      // Spread submissions over the pass period so completions fall at every phase of it.
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(passMs, 4000) * 1.5));
    }
    for (const { runId, at } of submitted) {
      const arn = `${env.stack.stateMachineArn.replace(':stateMachine:', ':execution:')}:${runId}`;
      await driver.finished(arn, 300_000);
      const history = await driver.history(arn);
      const entered = history.findIndex(
        (e) => e.type === 'TaskStateEntered' && e.stateEnteredEventDetails?.name === 'AwaitCompletion',
      );
      const answered = history.slice(entered).find((e) => e.type === 'TaskSucceeded');
      const done = completedAt.get(runId);
      const sample: Sample = {};
      if (answered?.timestamp && done !== undefined) {
        sample.answerSeconds = ((answered.timestamp.getTime() - done) / 1000) * compression;
      }
      const created = createdAt.get(runId);
      if (created !== undefined) sample.createdMs = created - at;
      samples.push(sample);
    }
  } finally {
    watching = false;
    await watcher;
    await env.close();
  }
  const answers = samples.flatMap((s) => (s.answerSeconds === undefined ? [] : [s.answerSeconds]));
  const created = samples.flatMap((s) => (s.createdMs === undefined ? [] : [s.createdMs]));
  return { ...setting, passMs, answers, created };
}

// The handlers keep their clients for the life of the process (as a Lambda container does), so
// each setting runs in a process of its own.
const only = process.argv.find((a) => a.startsWith('--setting='));
if (only) {
  const result = await measure(JSON.parse(only.slice('--setting='.length)) as Setting);
  process.stdout.write(`\nRESULT ${JSON.stringify(result)}\n`);
  process.exit(0);
}
const { execFileSync } = await import('node:child_process');
const settings: Setting[] = [
  { passSeconds: 60, compression: COMPRESSION, runs: RUNS },
  { passSeconds: 10, compression: COMPRESSION, runs: RUNS },
  { passSeconds: 10, compression: 1, runs: REAL_RUNS },
  { passSeconds: 10, compression: 1, wakeGapSeconds: 1, runs: REAL_RUNS },
];
const results: Array<Awaited<ReturnType<typeof measure>>> = [];
for (const setting of settings) {
  process.stderr.write(`${JSON.stringify(setting)}\n`);
  const out = execFileSync(
    process.execPath,
    [new URL(import.meta.url).pathname, String(RUNS), `--setting=${JSON.stringify(setting)}`],
    {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, GANTRY_LOG_LEVEL: 'silent' },
    },
  );
  const line = out.split('\n').find((l) => l.startsWith('RESULT '));
  if (!line) throw new Error(`setting ${JSON.stringify(setting)} printed no result`);
  results.push(JSON.parse(line.slice('RESULT '.length)));
}
const resultsFile = join(mkdtempSync(join(tmpdir(), 'gantry-bench-answer-latency-')), 'results.json');
writeFileSync(resultsFile, JSON.stringify(results));
process.stderr.write(`bench/answer-latency: results in ${resultsFile}\n`);
const lines = [
  '# Answer latency: how late Gantry notices admission and completion',
  '',
  `Measured ${new Date().toISOString().slice(0, 10)} with \`node bench/answer-latency.ts ${RUNS}\` (Node ${process.version}, ${cpus().length} CPUs), the embedded`,
  `default, runs submitted through \`POST /v1/runs\` (1 GPU each, 3 s of training). In the first two rows the`,
  `reconciler's schedule is compressed ${COMPRESSION}× (latencies × ${COMPRESSION}, i.e. production seconds; the bench`,
  `sees a completion by listing TrainJobs every ${POLL_MS} ms, ± ${((POLL_MS / 1000) * COMPRESSION).toFixed(1)} s in production time); the last two run in`,
  `real time (± ${(POLL_MS / 1000).toFixed(2)} s).`,
  '',
  '| reconciler | time | job completed → wait answered, p50 | p90 | p99 | max | runs |',
  '| --- | --- | --- | --- | --- | --- | --- |',
];
for (const r of results) {
  const label =
    r.passSeconds === 60
      ? 'one pass per 1-minute invocation (before)'
      : r.wakeGapSeconds !== undefined
        ? `a pass every ${r.passSeconds} s, woken by job changes (gap ${r.wakeGapSeconds} s; serverless.yml)`
        : `a pass every ${r.passSeconds} s`;
  const time = r.compression === 1 ? 'real' : `compressed ${r.compression}×`;
  lines.push(
    `| ${label} | ${time} | ${quantile(r.answers, 0.5).toFixed(2)} s | ${quantile(r.answers, 0.9).toFixed(2)} s | ${quantile(r.answers, 0.99).toFixed(2)} s | ${Math.max(...r.answers).toFixed(2)} s | ${r.answers.length} |`,
  );
}
const [before, after, real, woken] = results;
if (before && after) {
  lines.push(
    '',
    `p50 ratio, 10 s passes / 1-minute passes (compressed): ${(quantile(after.answers, 0.5) / quantile(before.answers, 0.5)).toFixed(2)}.`,
  );
}
if (real && woken) {
  lines.push(
    `p50 ratio, woken / 10 s passes (real time): ${(quantile(woken.answers, 0.5) / quantile(real.answers, 0.5)).toFixed(3)}; p90 ratio ${(quantile(woken.answers, 0.9) / quantile(real.answers, 0.9)).toFixed(3)}.`,
  );
}
const allCreated = results.flatMap((r) => r.created);
lines.push(
  '',
  `Submit (202) → TrainJob created, not compressed (local queue poller with 1 s long polls, the state machine's`,
  `CreateJob): p50 ${quantile(allCreated, 0.5).toFixed(0)} ms, p99 ${quantile(allCreated, 0.99).toFixed(0)} ms over ${allCreated.length} runs.`,
  '',
);
const out = new URL('./results/answer-latency.md', import.meta.url).pathname;
writeFileSync(out, `${lines.join('\n')}\n`);
process.stdout.write(`${lines.join('\n')}\n`);
process.exit(0);
