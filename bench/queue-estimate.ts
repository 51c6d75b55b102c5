/**
 * The start estimate against what happens: a day of mixed submissions replayed on the embedded
 * default (the local stack, the real ASL on the local Step Functions engine, the reconciler, the
 * cluster simulator's Kueue with one team queue, the HTTP API). Runs of six models — 1 to 16 GPUs,
 * training 40 minutes to 4 hours (±20% per run), deadlines 1.5–3× their model's usual time, three
 * models' training code reporting an ETA on the metric channel and three not — arrive in bursts over
 * the day. Each run's estimate (`GET /v1/runs/{id}/queue`) is sampled the moment it is seen waiting
 * (and every `--every` day-minutes while it waits); its actual start is when the simulated Kueue
 * admits its job. Reported: the error of `likelySeconds` at p50/p90 (absolute, relative) and how
 * often the start fell inside [earliest, latest] — for the estimate as built (the API's: the history
 * of the model's completed runs, Kueue's default BestEffortFIFO order) and, sampled at the same
 * instant in this process, the estimate before it (deadlines only, StrictFIFO) and with the history
 * alone (StrictFIFO).
 *
 * Time: Gantry stamps its records with the wall clock while the simulator's training reports ETAs in
 * simulated seconds. The API divides those by the simulator's speed (the cluster's clockScale), but that
 * converts the ETAs instead of measuring them, so the bench runs the simulator and the state machine
 * at speed 1 (both scales 1) and compresses the day itself:
 * every duration, deadline and arrival of the day is divided by `--scale` (default 120: the day in
 * 12 minutes). Figures are measured in bench seconds and shown in day time (× scale).
 *
 * Run: `node bench/queue-estimate.ts [--scale 120] [--quota 32] [--every 30] [--seed 43] [--write]`
 * (`--write` updates bench/results/queue-estimate.md).
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { clock, gateway, records, table } from '../functions/_deps.ts';
import { settings } from '../functions/api/_intake.ts';
import type { StartEstimate } from '../lib/queue/estimate.ts';
import type { QueuePositionView } from '../lib/queue/position.ts';
import { makeGetQueuePosition } from '../lib/queue/queue-position.ts';
import { LABEL } from '../lib/trainjob/labels.ts';
import { DEMO_QUEUE, type Embedded, startEmbedded } from '../local/embedded.ts';
import { PRINCIPAL_HEADER } from '../local/http-api.ts';
import { isSuspended } from '../local/simulator/jobs.ts';
import { SIM_ANNOTATIONS } from '../local/simulator/sim-core.ts';
import { DEMO_TEAM } from '../local/stack.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = resolve(ROOT, 'bench/results/queue-estimate.md');
const PRINCIPAL = DEMO_TEAM.principals[0] as string;

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && process.argv[i + 1] !== undefined) return process.argv[i + 1] as string;
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq ? eq.slice(name.length + 3) : fallback;
}
const SCALE = Number(arg('scale', '120'));
const QUOTA = Number(arg('quota', '32'));
/** Day-minutes between the samples of a run that keeps waiting (0: only when it starts waiting). */
const EVERY_MIN = Number(arg('every', '30'));
const SEED = Number(arg('seed', '43'));
const WRITE = process.argv.includes('--write');
/** Relative errors are taken against at least this wait (day seconds), so a start "now" does not divide by 0. */
const REL_FLOOR_DAY_S = 600;
/** The request field's floor (lib/run/limits.ts minDeadlineSeconds), in bench seconds. */
const MIN_DEADLINE_S = 60;

/** The training code a run's model has: its size, its usual training time (day seconds), whether it reports an ETA. */
const MODELS = [
  { name: 'bert-ft', weight: 25, numNodes: 1, gpu: 1, meanDayS: 40 * 60, eta: true },
  { name: 'resnet-50', weight: 20, numNodes: 1, gpu: 2, meanDayS: 60 * 60, eta: true },
  { name: 'vit-l', weight: 15, numNodes: 1, gpu: 4, meanDayS: 2 * 3600, eta: false },
  { name: 'llama-7b-sft', weight: 15, numNodes: 1, gpu: 8, meanDayS: 3 * 3600, eta: true },
  { name: 'sdxl-ft', weight: 15, numNodes: 2, gpu: 4, meanDayS: 1.5 * 3600, eta: false },
  { name: 'llama-13b', weight: 10, numNodes: 2, gpu: 8, meanDayS: 4 * 3600, eta: false },
] as const;
/** The day's bursts: (hour of the day, runs submitted over the next 15 minutes). */
const BURSTS: ReadonlyArray<[number, number]> = [
  [1, 4],
  [8.5, 10],
  [10, 6],
  [13.5, 10],
  [16, 8],
  [20, 6],
  [23, 4],
];

/** mulberry32: the same day for the same seed. */
function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Planned {
  i: number;
  model: (typeof MODELS)[number];
  arriveDayS: number;
  durationDayS: number;
  deadlineBenchS: number;
}

function plan(): Planned[] {
  const r = rng(SEED);
  const total = MODELS.reduce((s, m) => s + m.weight, 0);
  const pick = () => {
    let x = r() * total;
    for (const m of MODELS) {
      x -= m.weight;
      if (x < 0) return m;
    }
    return MODELS[0];
  };
  const out: Planned[] = [];
  for (const [hour, n] of BURSTS) {
    for (let k = 0; k < n; k++) {
      const model = pick();
      const durationDayS = model.meanDayS * (0.8 + 0.4 * r());
      const deadlineDayS = model.meanDayS * (1.5 + 1.5 * r());
      out.push({
        i: out.length,
        model,
        arriveDayS: hour * 3600 + r() * 15 * 60,
        durationDayS,
        deadlineBenchS: Math.max(MIN_DEADLINE_S, Math.ceil(deadlineDayS / SCALE)),
      });
    }
  }
  return out.sort((a, b) => a.arriveDayS - b.arriveDayS);
}

interface Sample {
  runId: string;
  model: string;
  eta: boolean;
  first: boolean;
  /** Bench seconds since t0. */
  at: number;
  position?: number;
  /** The API's answer: the estimate as built (model history, BestEffortFIFO). */
  after?: StartEstimate;
  /** In process, the same instant: deadlines only, StrictFIFO (the estimate before). */
  before?: StartEstimate;
  /** In process, the same instant: model history, StrictFIFO (one change at a time). */
  historyOnly?: StartEstimate;
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number;
};
/** Day time for people: bench seconds × scale. */
const dayTime = (benchS: number) => {
  const s = Math.round(benchS * SCALE);
  if (!Number.isFinite(s)) return 'n/a';
  const m = Math.round(s / 60);
  return m < 60 ? `${m} min` : `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`;
};

async function main() {
  const runs = plan();
  const loadBefore = loadavg()[0] as number;
  const env: Embedded = await startEmbedded({
    simSpeed: 1,
    sfnSpeed: 1,
    simulator: {
      defaultDurationSeconds: 60,
      queues: [{ ...DEMO_QUEUE, quota: { 'nvidia.com/gpu': QUOTA, cpu: 4096, memory: '64Ti' } }],
    },
    // The team's in-flight cap above what a burst asks for: the bench measures the queue, not the cap.
    stack: { reconcileEveryMs: 250, teams: [{ ...DEMO_TEAM, maxGpusInFlight: 4096 }] },
  });
  // A mutating admission webhook of the bench's cluster: each job trains the time its run was planned
  // for (BENCH_TRAIN_SECONDS in its trainer's env), and the training code of a model without an ETA
  // never sees the metric channel (GANTRY_METRICS_URI removed), so it reports nothing.
  env.sim.api.addAdmission({
    mutate(op, def, o) {
      if (op !== 'CREATE' || def.kind !== 'TrainJob') return;
      const spec = (o.spec ?? {}) as { trainer?: { env?: Array<{ name: string; value?: string }> } };
      const list = spec.trainer?.env ?? [];
      const get = (n: string) => list.find((e) => e.name === n)?.value;
      const seconds = get('BENCH_TRAIN_SECONDS');
      if (seconds === undefined) return;
      const meta = (o.metadata ?? {}) as { annotations?: Record<string, string> };
      meta.annotations = { ...meta.annotations, [SIM_ANNOTATIONS.duration]: seconds };
      o.metadata = meta;
      if (get('BENCH_NO_ETA') === '1' && spec.trainer)
        spec.trainer.env = list.filter((e) => e.name !== 'GANTRY_METRICS_URI');
    },
  });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${env.api.url}${path}`, {
      method,
      headers: { [PRINCIPAL_HEADER]: PRINCIPAL, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, any> };
  };
  // The estimate before (deadlines only, StrictFIFO) and with the history only: the same use case,
  // in this process, sampled at the instant the API is asked.
  const deps = { ...settings(), records: records(), table: table(), gateway, clock };
  const beforeUseCase = makeGetQueuePosition({ ...deps, history: false, queueingStrategy: 'StrictFIFO' });
  const historyOnlyUseCase = makeGetQueuePosition({ ...deps, queueingStrategy: 'StrictFIFO' });
  const caller = { iamArn: PRINCIPAL, groups: [] as string[] };

  const t0 = performance.now();
  const now = () => (performance.now() - t0) / 1000;
  const byRun = new Map<string, Planned>();
  const created = new Map<string, number>();
  const started = new Map<string, number>();
  const ended = new Set<string>();
  const samples: Sample[] = [];
  const localErrors: string[] = [];
  const unwatch = env.sim.api.onEvent((e) => {
    if (e.def.kind !== 'TrainJob') return;
    const labels = ((e.object.metadata ?? {}) as { labels?: Record<string, string> }).labels;
    const runId = labels?.[LABEL.runId];
    if (!runId) return;
    if (!created.has(runId)) created.set(runId, now());
    if (e.type === 'DELETED') return;
    if (!started.has(runId) && !isSuspended(e.def, e.object)) started.set(runId, now());
  });

  async function sample(runId: string, first: boolean): Promise<boolean> {
    const p = byRun.get(runId) as Planned;
    const at = now();
    const local = (useCase: typeof beforeUseCase) =>
      useCase({ caller, runId }).catch((err: unknown) => {
        localErrors.push(String(err).slice(0, 200));
        return undefined as QueuePositionView | undefined;
      });
    const [http, before, historyOnly] = await Promise.all([
      call('GET', `/v1/runs/${runId}/queue`),
      local(beforeUseCase),
      local(historyOnlyUseCase),
    ]);
    const view = http.body as QueuePositionView;
    if (!view.queued || started.has(runId)) return false;
    samples.push({
      runId,
      model: p.model.name,
      eta: p.model.eta,
      first,
      at,
      ...(view.position !== undefined ? { position: view.position } : {}),
      ...(view.estimate ? { after: view.estimate } : {}),
      ...(before?.estimate ? { before: before.estimate } : {}),
      ...(historyOnly?.estimate ? { historyOnly: historyOnly.estimate } : {}),
    });
    return true;
  }

  // Each run: submitted at its arrival; sampled when first seen waiting, then every EVERY_MIN day-minutes.
  const watchers: Promise<void>[] = [];
  const errors: string[] = [];
  async function follow(p: Planned) {
    const wait = p.arriveDayS / SCALE - now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait * 1000));
    const r = await call('POST', '/v1/runs', {
      modelName: p.model.name,
      team: 'demo',
      runtime: { name: 'torch-distributed' },
      image: 'registry.local/vision/train:1.0',
      numNodes: p.model.numNodes,
      resourcesPerNode: { gpu: p.model.gpu },
      queue: DEMO_QUEUE.name,
      producesArtifacts: false,
      runDeadlineSeconds: p.deadlineBenchS,
      env: {
        BENCH_TRAIN_SECONDS: (p.durationDayS / SCALE).toFixed(2),
        ...(p.model.eta ? {} : { BENCH_NO_ETA: '1' }),
      },
      idempotencyKey: `queue-estimate-${SEED}-${p.i}`,
    });
    if (r.status !== 202) {
      errors.push(`${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      return;
    }
    const runId = r.body.runId as string;
    byRun.set(runId, p);
    let sampled = false;
    let next = 0;
    while (!started.has(runId) && !ended.has(runId)) {
      if (!sampled && created.has(runId)) {
        sampled = await sample(runId, true);
        if (sampled) next = now() + (EVERY_MIN * 60) / SCALE;
      } else if (sampled && EVERY_MIN > 0 && now() >= next) {
        await sample(runId, false);
        next = now() + (EVERY_MIN * 60) / SCALE;
      }
      await new Promise((res) => setTimeout(res, 150));
    }
  }
  for (const p of runs) watchers.push(follow(p));
  const progress = setInterval(() => {
    const st = env.sim.stats().jobs;
    process.stderr.write(
      `[queue-estimate] ${now().toFixed(0)} s (day ${dayTime(now())}): ${byRun.size}/${runs.length} submitted, ` +
        `${started.size} started, ${st.running} running, ${st.pending} pending, ${samples.length} samples, load ${loadavg()[0]?.toFixed(1)}\n`,
    );
  }, 15_000);
  await Promise.all(watchers);
  // Every run started (or never will): wait for them to end so nothing is torn down mid-write.
  const end = Date.now() + 10 * 60_000;
  while (Date.now() < end) {
    const st = env.sim.stats().jobs;
    if (st.running === 0 && st.pending === 0) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  clearInterval(progress);
  unwatch();
  const wallS = now();
  await env.close();

  // The error of each sample: actual wait (bench s) against the estimate's.
  const rows = samples
    .filter((s) => started.has(s.runId))
    .map((s) => ({ ...s, actual: Math.max(0, (started.get(s.runId) as number) - s.at) }));
  const floor = REL_FLOOR_DAY_S / SCALE;
  const stats = (sel: typeof rows, which: 'after' | 'before' | 'historyOnly') => {
    const xs = sel.filter((s) => s[which] !== undefined);
    const abs = xs.map((s) => Math.abs((s[which] as StartEstimate).likelySeconds - s.actual));
    const rel = xs.map((s, i) => (abs[i] as number) / Math.max(s.actual, floor));
    const inside = xs.filter(
      (s) =>
        (s[which] as StartEstimate).earliestSeconds <= s.actual &&
        s.actual <= (s[which] as StartEstimate).latestSeconds,
    ).length;
    const signed = xs.map((s) => (s[which] as StartEstimate).likelySeconds - s.actual);
    return {
      n: xs.length,
      p50: pct(abs, 50),
      p90: pct(abs, 90),
      rel50: pct(rel, 50),
      rel90: pct(rel, 90),
      inside: xs.length ? inside / xs.length : Number.NaN,
      bias: pct(signed, 50),
    };
  };
  const firsts = rows.filter((r) => r.first);
  const VARIANT = {
    before: 'before: deadlines, StrictFIFO',
    historyOnly: 'model history, StrictFIFO',
    after: 'after: model history, BestEffortFIFO (the API)',
  } as const;
  const cases: Array<[string, typeof rows]> = [
    ['when it starts waiting', firsts],
    ['every sample (also every 30 day-min while waiting)', rows],
    [
      'when it starts waiting, first in line (waits for running jobs only)',
      firsts.filter((r) => r.position === 1),
    ],
    ['when it starts waiting, behind other waiting runs', firsts.filter((r) => (r.position ?? 1) > 1)],
  ];
  const f = (x: number, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const pc = (x: number) => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : 'n/a');
  const table1 = cases
    .flatMap(([label, sel]) =>
      (['before', 'historyOnly', 'after'] as const).map((w) => {
        const s = stats(sel, w);
        return `| ${label} | ${VARIANT[w]} | ${s.n} | ${dayTime(s.p50)} | ${dayTime(s.p90)} | ${pc(s.rel50)} | ${pc(s.rel90)} | ${pc(s.inside)} | ${s.bias >= 0 ? '+' : '−'}${dayTime(Math.abs(s.bias))} |`;
      }),
    )
    .join('\n');
  const waits = firsts.map((r) => r.actual);
  const out = `# Queue start estimate: a replayed day

\`node bench/queue-estimate.ts --scale ${SCALE} --quota ${QUOTA} --every ${EVERY_MIN} --seed ${SEED}\` replays a day of
mixed submissions on the embedded default (the local stack, the real ASL on the local Step Functions engine,
the reconciler every 250 ms, the cluster simulator's Kueue with one ClusterQueue of ${QUOTA} GPUs for team
\`demo\`, the HTTP API) and checks the start estimate of \`GET /v1/runs/{id}/queue\` against when each run's job
was admitted.

**The day** (seed ${SEED}): ${runs.length} runs in ${BURSTS.length} bursts (${BURSTS.map(([h, n]) => `${n} at ${Math.floor(h)}:${String(Math.round((h % 1) * 60)).padStart(2, '0')}`).join(', ')}; each
burst's runs arrive over 15 minutes) of six models:

| model | GPUs | usual training | reports an ETA | runs |
| --- | --- | --- | --- | --- |
${MODELS.map((m) => `| ${m.name} | ${m.numNodes * m.gpu} (${m.numNodes}×${m.gpu}) | ${dayTime(m.meanDayS / SCALE)} ±20% | ${m.eta ? 'yes (metric channel)' : 'no'} | ${runs.filter((r) => r.model === m).length} |`).join('\n')}

Each run's deadline is 1.5–3× its model's usual time (at least ${MIN_DEADLINE_S} bench seconds, the field's floor:
${dayTime(MIN_DEADLINE_S)} of day time). Durations are set per job by a mutating admission hook of the simulated
cluster (\`sim.gantry.dev/duration-seconds\` from the run's env); the same hook removes
\`GANTRY_METRICS_URI\` from the jobs of the models that report no ETA.

**Time.** Gantry stamps records with its own (wall) clock, while the simulator's training reports ETAs in
simulated seconds. The API divides them by the simulator's speed, but that converts them rather than measuring them.
So the simulator and the state machine run at speed 1 (both time scales 1) and the bench compresses the day itself: every
duration, deadline and arrival is divided by ${SCALE} (the day in ${f(86400 / SCALE / 60, 0)} minutes). Every figure below
is measured in bench seconds and shown × ${SCALE}, in day time. Gantry's own latencies (queue consumer,
state machine, reconciler period, metric-channel ingest: about a second each) are compressed too, so they
weigh ${SCALE}× more against the durations here than on a real day.

**Measured.** Wall ${f(wallS)} s (day ${dayTime(wallS)}), ${cpus().length} cores, load ${loadBefore.toFixed(1)} before.
${byRun.size}/${runs.length} submitted${errors.length ? ` (${errors.length} refused: ${errors.slice(0, 2).join('; ')})` : ''}, ${started.size} admitted, ${firsts.length} seen waiting
(the others started at once), ${rows.length} samples in all. The waits seen: p50 ${dayTime(pct(waits, 50))},
p90 ${dayTime(pct(waits, 90))}, longest ${dayTime(Math.max(0, ...waits))}.

Error of \`likelySeconds\` against the actual wait (sample → the job admitted). Three estimates sampled at the
same instant: the API's (as built: each model's history of completed runs for durations nothing reports,
and Kueue's default BestEffortFIFO order), and in the bench's process the same use case as it was before
(\`history: false\`, StrictFIFO: deadlines only, the line held by a run that does not fit) and with only the
history added (StrictFIFO). Relative
error against the actual wait, at least ${REL_FLOOR_DAY_S / 60} day-minutes; "inside" = earliest ≤ actual ≤ latest; bias =
the median of likely − actual (+: too late).

| samples | estimate | n | abs. error p50 | abs. error p90 | rel. p50 | rel. p90 | inside [earliest, latest] | bias |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
${table1}

**What the bench leaves out.** One team and one ClusterQueue (no other tenants' workloads, no cohort
borrowing, no preemption); no failures, retries or requeues; no visibility API (the simulator serves none:
Gantry's view, by priority then time, and no priority classes here); every run of a model trains
within ±20% of its usual time (real histories vary more); training starts the moment Kueue admits (no
image pulls or slow starts); only the first estimate while waiting and every ${EVERY_MIN} day-minutes after
are sampled, not the moment-to-moment answer; one seed.
`;
  process.stdout.write(out);
  if (localErrors.length)
    process.stderr.write(`in-process estimate failed ${localErrors.length}×: ${localErrors[0]}\n`);
  const dump = arg('dump', '');
  if (dump)
    writeFileSync(dump, JSON.stringify({ rows, runs: [...byRun].map(([id, p]) => ({ id, ...p })) }, null, 1));
  if (WRITE) writeFileSync(RESULTS, out);
}

await main();
process.exit(0);
