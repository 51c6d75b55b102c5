/**
 * Sweeps on the embedded default: a random sweep of N trials (default 1,000, 1 GPU each) against
 * one Kueue ClusterQueue of 64 GPUs in the cluster simulator, submitted through the HTTP API
 * (`POST /v1/sweeps`) as the e2e test does, against a baseline measured in the same run: the same
 * number of plain runs through `POST /v1/runs`, a closed loop keeping min(parallel, quota) in
 * flight (a new run the moment an execution closes; no sweep controller). A second sweep asks for
 * more parallel trials than the quota holds, to show that the extra trials wait as Pending and the
 * sweep does not pile on (peak unfinished jobs ≤ parallelTrials).
 *
 * Each case runs in a process of its own (the handlers keep their clients for the life of the
 * process, as a Lambda container does): the parent only starts them and writes the results.
 *
 * Run: `node bench/sweeps.ts [--trials 1000] [--parallel 64] [--over 96] [--speed 3600]
 *       [--duration 1800] [--quota 64] [--cases baseline,sweep,over] [--write]`
 * `--over 0` skips the over-quota sweep; `--write` updates bench/results/sweeps.md.
 * `--reconcile-ms N` sets the embedded reconciler's period (default 250), `--wake-gap-ms N` turns on
 * the watch between passes (off by default; AWS: a 10 s period and a 1 s gap), `--spread F` varies each
 * trial's training duration by up to ± F (the simulator's durationSpread; default 0: all equal).
 *
 * Per-trial orchestration overhead (sweep cases; see perTrialTimings): launch (trial released → its
 * job created) + record (job Complete/Failed → trial recorded ended), from the trial items and the
 * simulator's watch events, stamped with the wall clock; waiting for quota and training are not in it.
 * `--repeat K` runs the sweep and over-quota cases K times (no baseline) and appends a section with
 * one row per run (trials done, stalled, peak unfinished jobs against parallelTrials) to the results;
 * it saves the runs so far after each case in <out>/gantry-bench-sweeps-repeat.json, and
 * `--repeat-from FILE --command "<the flags>"` writes the section from such a file.
 */
import { execFile } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { S3Client } from '@aws-sdk/client-s3';
import { SFNClient } from '@aws-sdk/client-sfn';
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient, GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { LABEL } from '../lib/trainjob/labels.ts';
import { DEMO_QUEUE, type Embedded, startEmbedded } from '../local/embedded.ts';
import { PRINCIPAL_HEADER } from '../local/http-api.ts';
import { isSuspended } from '../local/simulator/jobs.ts';
import { DEMO_TEAM } from '../local/stack.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = resolve(ROOT, 'bench/results/sweeps.md');
const PRINCIPAL = DEMO_TEAM.principals[0] as string;

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0 && process.argv[i + 1] !== undefined) return process.argv[i + 1] as string;
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq ? eq.slice(name.length + 3) : fallback;
}

const TRIALS = Number(arg('trials', '1000'));
const PARALLEL = Number(arg('parallel', '64'));
const OVER = Number(arg('over', '96'));
const SPEED = Number(arg('speed', '3600'));
const DURATION = Number(arg('duration', '1800'));
const QUOTA = Number(arg('quota', '64'));
const TIMEOUT_S = Number(arg('timeout', '1800'));
const CASES = arg('cases', 'baseline,sweep,over').split(',');
const WRITE = process.argv.includes('--write');
/** Trial phases that end a trial (not in flight). */
const TRIAL_ENDED = ['Succeeded', 'Failed', 'EarlyStopped', 'Cancelled'];
/** The trial items are read every this many polls of the sweep item (20 × 250 ms = 5 s). */
const TRIAL_POLL_EVERY = 20;
const CASE = arg('case', '');
/** This run's own folder for logs and saved results (`--out DIR`; a new temp folder by default), so two runs never collide. */
const OUT = arg('out', '') || mkdtempSync(join(tmpdir(), 'gantry-bench-sweeps-'));
const LOG = arg('log', join(OUT, 'gantry-bench-sweeps.log'));
/** Run the sweep cases (not the baseline) this many times, one after the other, and report each run. */
const REPEAT = Number(arg('repeat', '0'));
/** The embedded reconciler loop's period (ms) and, when given, its wake on job changes (ms gap). */
const RECONCILE_MS = Number(arg('reconcile-ms', '250'));
const WAKE_GAP_MS = arg('wake-gap-ms', '');
/** ± fraction each trial's training duration varies by (the simulator's durationSpread); default 0. */
const SPREAD = Number(arg('spread', '0'));

const template = {
  modelName: 'sweep-bench',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: DEMO_QUEUE.name,
};
const parameters = [
  { name: 'lr', type: 'continuous', min: 1e-5, max: 1e-1, scale: 'log' },
  { name: 'dropout', type: 'continuous', min: 0, max: 0.5 },
  { name: 'batch_size', type: 'discrete', values: [16, 32, 64, 128, 256] },
];

interface CaseResult {
  kind: 'baseline' | 'sweep';
  trials: number;
  parallel: number;
  /** Trials (or runs) whose execution closed, by status. */
  executions: Record<string, number>;
  executionsStarted: number;
  /** Submit → the sweep record is final (baseline: → the last execution closed). */
  wallMs: number;
  /** Submit → the last trial's execution closed. */
  lastCloseMs: number;
  simElapsedSeconds: number;
  peakUnfinished: number;
  peakRunning: number;
  simCompleted: number;
  simFailed: number;
  sweep?: {
    phase: string;
    reason?: string;
    succeeded: number;
    failed: number;
    recordBytes: number;
    /** The trial items' documents together (0: trials inline in the sweep item). */
    trialBytes?: number;
    /** The most trials the record showed in flight (not terminal) at one poll. */
    peakInFlightRecord: number;
    /** The most trials the record showed Pending and waiting for quota at one poll. */
    peakWaitingRecord: number;
    best?: { trialIndex: number; objective: number };
  };
  s3: {
    total: number;
    byCommand: Record<string, number>;
    recordPuts: number;
    recordConflicts: number;
    recordGets: number;
    /** Conditional writes of trial items (`trial#…`: updates of the version read, creates if absent). */
    trialPuts?: number;
    trialConflicts?: number;
    /** Atomic counter adds to the sweep item (unconditional on its version: they never race). */
    counterAdds?: number;
    runRecordPuts: number;
    runRecordConflicts: number;
  };
  logs: Record<string, number>;
  logSamples: string[];
  maxRssMiB: number;
  cpuSeconds: number;
  loadBefore: number;
  loadAfter: number;
  timedOut: boolean;
  /** [seconds since submit, executions closed], every 15 s. */
  timeline: Array<[number, number]>;
  /** The error and cause of the first few executions that did not succeed. */
  failedSamples: string[];
  /** Per-trial timings (sweep cases): see perTrialTimings. */
  perTrial?: PerTrial;
}

/** median / p90 / max (and mean) of a list of seconds. */
interface Dist {
  n: number;
  median: number;
  p90: number;
  max: number;
  mean: number;
}

function dist(values: number[]): Dist {
  const v = [...values].sort((a, b) => a - b);
  const q = (p: number) =>
    v.length === 0 ? Number.NaN : (v[Math.min(v.length - 1, Math.ceil(p * v.length) - 1)] as number);
  return {
    n: v.length,
    median:
      v.length === 0
        ? Number.NaN
        : v.length % 2
          ? (v[(v.length - 1) / 2] as number)
          : ((v[v.length / 2 - 1] as number) + (v[v.length / 2] as number)) / 2,
    p90: q(0.9),
    max: v.length === 0 ? Number.NaN : (v[v.length - 1] as number),
    mean: v.length === 0 ? Number.NaN : v.reduce((a, b) => a + b, 0) / v.length,
  };
}

/**
 * Per-trial timings in wall seconds, from the trial items' `releasedAt` / `endedAt` (Gantry's wall
 * clock, written by the advance that released / recorded the trial) and the simulator's watch
 * events for the trial's TrainJob (label `gantry.dev/run-id`), stamped with the wall clock by the
 * bench as they happen (the same process, no code of Gantry's changed):
 * - launch = job created − trial released (intake, the Step Functions execution, the run record, the job's creation);
 * - queue = job admitted (unsuspended by Kueue) − job created: waiting for quota, NOT overhead;
 * - train = job Complete/Failed − job admitted: simulated training (duration / speed), NOT overhead;
 * - record = trial recorded ended − job Complete/Failed (the reconciler sees the end, answers the
 *   task token, RecordOutcome, the sweep's advance writes the trial's end);
 * - overhead = launch + record (= trial lifetime − queue − train);
 * - refill = trial i+parallel released − trial i recorded ended (slot succession: how long a
 *   freed slot stays empty before its next trial is released; not in overhead);
 * - successor = trial i+parallel's job created − trial i's job finished (trial ended → successor's
 *   job created: the slot's whole gap as the cluster sees it, record + refill + launch). Paired by
 *   slot: a slot held earlier and refilled by another trial's end is counted against its own
 *   predecessor, so over quota a held slot's wait shows here too.
 * With more trials in flight than the quota holds, a trial is often launched while every GPU is
 * busy: its launch then delays nothing (had it been faster, it would have waited in Kueue longer).
 * So, beside overhead:
 * - launch while a GPU was free = (job admitted − trial released) less the part of that interval
 *   during which the quota was full (`quota` jobs admitted and not finished, from the same events);
 * - quota-aware overhead = launch while a GPU was free + record. With parallelTrials ≤ quota it
 *   differs from overhead only by the queue (a freed GPU is free until the trial is admitted).
 */
interface PerTrial {
  trials: number;
  /** Trials with every timestamp (released, job created, admitted, finished, ended). */
  measured: number;
  overhead: Dist;
  launch: Dist;
  record: Dist;
  queue: Dist;
  train: Dist;
  refill: Dist;
  /** Trial i's job finished → trial i + parallel's job created (see above). */
  successor: Dist;
  /** Every measured successor gap, seconds (to pool the runs). */
  successors: number[];
  /**
   * The successor gaps of the slots whose trial ended while the quota was full (every GPU of the
   * quota held by an admitted, unfinished job just before it ended), and of the others.
   */
  successorsFull?: number[];
  successorsFree?: number[];
  /** The successor gap split by stage (see `successorGaps`): each stage's distribution, seconds. */
  successorStages?: Record<string, Dist>;
  /** Per slot, each stage's seconds in STAGES order (to pool the runs). */
  successorStageRows?: number[][];
  /**
   * launch and record split at the trial's run record (its `transitions`): accept = run Accepted −
   * trial released; submit = job created − run Accepted; reconcile = the run's terminal transition −
   * job finished; handoff = trial recorded ended − the run's terminal transition.
   */
  accept?: Dist;
  submit?: Dist;
  reconcile?: Dist;
  handoff?: Dist;
  /**
   * reconcile split at the run's Publishing transition (PublishArtifacts' first write): answered =
   * Publishing − job finished (the wait answered, the state machine on to PublishArtifacts, the
   * metric drain); closing = run terminal − Publishing (NotifyServing, RecordSuccess).
   */
  answered?: Dist;
  closing?: Dist;
  /** launch while a GPU was free + record; launch while a GPU was free (see above). */
  quotaAware?: Dist;
  freeLaunch?: Dist;
  /** Every measured trial's overhead, seconds (to pool the runs). */
  overheads: number[];
  /** Every measured trial's quota-aware overhead, seconds, in the order of `overheads`. */
  quotaAwares?: number[];
  /** Every measured trial's launch and record, seconds, in the order of `overheads`. */
  launches: number[];
  records: number[];
}

interface JobTimes {
  created?: number;
  admitted?: number;
  finished?: number;
}

/**
 * How long the quota was full (at least `quota` jobs admitted and not finished, 1 GPU each) within
 * [from, to], in ms: from the admitted / finished times of every job.
 */
function quotaFull(jobs: Map<string, JobTimes>, quota: number): (from: number, to: number) => number {
  const changes: Array<[number, number]> = [];
  for (const j of jobs.values()) {
    if (j.admitted === undefined) continue;
    changes.push([j.admitted, 1]);
    if (j.finished !== undefined) changes.push([j.finished, -1]);
  }
  // Ends before starts at the same instant: a slot freed and refilled at once was never idle.
  changes.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const full: Array<[number, number]> = [];
  let running = 0;
  let since: number | undefined;
  for (const [at, d] of changes) {
    running += d;
    if (running >= quota && since === undefined) since = at;
    if (running < quota && since !== undefined) {
      full.push([since, at]);
      since = undefined;
    }
  }
  if (since !== undefined) full.push([since, Number.POSITIVE_INFINITY]);
  return (from, to) =>
    full.reduce((sum, [a, b]) => sum + Math.max(0, Math.min(b, to) - Math.max(a, from)), 0);
}

/**
 * The stages of "trial ended → successor's job created", per slot (trial i ended, trial i + parallel
 * its successor), from the simulator's events, the run records' transitions, the trial items and the
 * start-path stamps:
 * - seen: trial i's job finished → its execution leaves AwaitCompletion (the reconciler sees the end
 *   and answers the completion token);
 * - publish: → PublishArtifacts done (the metric drain, the run's Publishing write);
 * - notify: → RecordSuccess entered (NotifyServing);
 * - terminal: → the run's terminal transition (RecordOutcome's run write);
 * - handoff: run terminal → trial i recorded ended (RecordOutcome's sweep advance starts, its reads);
 * - refill: trial i recorded ended → successor released (both stamped by the advances that decided);
 * - enqueue: released → the successor's run message sent (the advance's writes, then SendMessage);
 * - deliver: message sent → the runs-queue consumer received it;
 * - accept: received → the successor's run record written (Accepted);
 * - start: Accepted → StartExecution returned;
 * - create: execution started → job created (CreateJob: the Lambda, the TrainJob create).
 */
const STAGES = [
  'seen',
  'publish',
  'notify',
  'terminal',
  'handoff',
  'refill',
  'enqueue',
  'deliver',
  'accept',
  'start',
  'create',
] as const;

function successorGaps(
  trials: Array<{ index: number; runId: string; releasedAt?: string; endedAt?: string }>,
  jobs: Map<string, JobTimes>,
  parallel: number,
  quota: number,
  runs: Map<string, { accepted?: number; publishing?: number; ended?: number }>,
  starts: Map<string, StartStamps>,
): Pick<PerTrial, 'successorsFull' | 'successorsFree' | 'successorStages' | 'successorStageRows'> {
  const byIndex = new Map(trials.map((t) => [t.index, t]));
  const admittedSpans = [...jobs.values()].filter((j) => j.admitted !== undefined);
  /** GPUs held just before `at` (1 per job: admitted before it, not finished before it). */
  const heldBefore = (at: number) =>
    admittedSpans.filter((j) => (j.admitted as number) < at && (j.finished ?? Infinity) >= at).length;
  const full: number[] = [];
  const free: number[] = [];
  const rows: number[][] = [];
  for (const t of trials) {
    const next = byIndex.get(t.index + parallel);
    const j = jobs.get(t.runId);
    const nj = jobs.get(next?.runId ?? '');
    if (!next || j?.finished === undefined || nj?.created === undefined) continue;
    const gap = (nj.created - j.finished) / 1000;
    (heldBefore(j.finished) >= quota ? full : free).push(gap);
    const run = runs.get(t.runId);
    const nrun = runs.get(next.runId);
    const st = starts.get(next.runId);
    const own = starts.get(t.runId);
    const points = [
      j.finished,
      own?.exited?.AwaitCompletion,
      own?.exited?.PublishArtifacts,
      own?.entered?.RecordSuccess,
      run?.ended,
      t.endedAt ? Date.parse(t.endedAt) : undefined,
      next.releasedAt ? Date.parse(next.releasedAt) : undefined,
      st?.queued,
      st?.received,
      nrun?.accepted,
      st?.started,
      nj.created,
    ];
    if (points.some((x) => x === undefined)) continue;
    const p = points as number[];
    rows.push(STAGES.map((_, i) => ((p[i + 1] as number) - (p[i] as number)) / 1000));
  }
  if (rows.length === 0) return { successorsFull: full, successorsFree: free };
  const successorStages = Object.fromEntries(
    STAGES.map((name, i) => [name, dist(rows.map((r) => r[i] as number))]),
  );
  return {
    successorsFull: full.map((x) => Math.round(x * 1000) / 1000),
    successorsFree: free.map((x) => Math.round(x * 1000) / 1000),
    successorStages,
    successorStageRows: rows.map((r) => r.map((x) => Math.round(x * 1000) / 1000)),
  };
}

function perTrialTimings(
  trials: Array<{ index: number; runId: string; releasedAt?: string; endedAt?: string }>,
  jobs: Map<string, JobTimes>,
  parallel: number,
  quota: number,
  runs: Map<string, { accepted?: number; publishing?: number; ended?: number }> = new Map(),
  starts: Map<string, StartStamps> = new Map(),
): PerTrial {
  const gap = successorGaps(trials, jobs, parallel, quota, runs, starts);
  const answered: number[] = [];
  const closing: number[] = [];
  const accept: number[] = [];
  const submit: number[] = [];
  const reconcile: number[] = [];
  const handoff: number[] = [];
  const launch: number[] = [];
  const record: number[] = [];
  const queue: number[] = [];
  const train: number[] = [];
  const overhead: number[] = [];
  const refill: number[] = [];
  const successor: number[] = [];
  const freeLaunch: number[] = [];
  const quotaAware: number[] = [];
  const fullDuring = quotaFull(jobs, quota);
  const byIndex = new Map(trials.map((t) => [t.index, t]));
  for (const t of trials) {
    const j = jobs.get(t.runId);
    const released = t.releasedAt ? Date.parse(t.releasedAt) : undefined;
    const ended = t.endedAt ? Date.parse(t.endedAt) : undefined;
    const prev = byIndex.get(t.index - parallel);
    if (released !== undefined && prev?.endedAt) refill.push((released - Date.parse(prev.endedAt)) / 1000);
    const nextJob = jobs.get(byIndex.get(t.index + parallel)?.runId ?? '');
    if (j?.finished !== undefined && nextJob?.created !== undefined)
      successor.push((nextJob.created - j.finished) / 1000);
    if (!j || released === undefined || ended === undefined) continue;
    if (j.created === undefined || j.admitted === undefined || j.finished === undefined) continue;
    const l = (j.created - released) / 1000;
    const r = (ended - j.finished) / 1000;
    launch.push(l);
    record.push(r);
    queue.push((j.admitted - j.created) / 1000);
    train.push((j.finished - j.admitted) / 1000);
    overhead.push(l + r);
    const free = (j.admitted - released - fullDuring(released, j.admitted)) / 1000;
    freeLaunch.push(free);
    quotaAware.push(free + r);
    const run = runs.get(t.runId);
    if (run?.accepted !== undefined) {
      accept.push((run.accepted - released) / 1000);
      submit.push((j.created - run.accepted) / 1000);
    }
    if (run?.ended !== undefined) {
      reconcile.push((run.ended - j.finished) / 1000);
      handoff.push((ended - run.ended) / 1000);
      if (run.publishing !== undefined) {
        answered.push((run.publishing - j.finished) / 1000);
        closing.push((run.ended - run.publishing) / 1000);
      }
    }
  }
  return {
    trials: trials.length,
    measured: overhead.length,
    overhead: dist(overhead),
    launch: dist(launch),
    record: dist(record),
    queue: dist(queue),
    train: dist(train),
    refill: dist(refill),
    successor: dist(successor),
    successors: successor.map((x) => Math.round(x * 1000) / 1000),
    accept: dist(accept),
    submit: dist(submit),
    reconcile: dist(reconcile),
    handoff: dist(handoff),
    ...(answered.length > 0 ? { answered: dist(answered), closing: dist(closing) } : {}),
    quotaAware: dist(quotaAware),
    freeLaunch: dist(freeLaunch),
    ...gap,
    overheads: overhead.map((x) => Math.round(x * 1000) / 1000),
    quotaAwares: quotaAware.map((x) => Math.round(x * 1000) / 1000),
    launches: launch.map((x) => Math.round(x * 1000) / 1000),
    records: record.map((x) => Math.round(x * 1000) / 1000),
  };
}

// ---------------------------------------------------------------------------------------------
// One case, in this process.

/**
 * S3 requests by command, and the conditional writes of sweep and run records (items of the state
 * table, lib/state/table.ts), counted at the SDKs.
 */
function countS3() {
  const counts: CaseResult['s3'] = {
    total: 0,
    byCommand: {},
    recordPuts: 0,
    recordConflicts: 0,
    recordGets: 0,
    trialPuts: 0,
    trialConflicts: 0,
    counterAdds: 0,
    runRecordPuts: 0,
    runRecordConflicts: 0,
  };
  const proto = S3Client.prototype as unknown as {
    send: (cmd: unknown, ...rest: unknown[]) => Promise<unknown>;
  };
  const send = proto.send;
  proto.send = async function (this: unknown, cmd: unknown, ...rest: unknown[]) {
    const c = cmd as { constructor: { name: string }; input?: { Key?: string }; benchOwn?: boolean };
    if (c.benchOwn) return send.call(this, cmd, ...rest);
    const name = c.constructor.name.replace(/Command$/, '');
    counts.total++;
    counts.byCommand[name] = (counts.byCommand[name] ?? 0) + 1;
    const key = c.input?.Key ?? '';
    const sweepRecord = /^sweeps\/[^/]+\/record\.json$/.test(key);
    const runRecord = /^runs\/[^/]+\/record\.json$/.test(key);
    if (sweepRecord && name === 'GetObject') counts.recordGets++;
    if (name === 'PutObject' && sweepRecord) counts.recordPuts++;
    if (name === 'PutObject' && runRecord) counts.runRecordPuts++;
    try {
      return await send.call(this, cmd, ...rest);
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      if (name === 'PutObject' && (status === 412 || status === 409)) {
        if (sweepRecord) counts.recordConflicts++;
        if (runRecord) counts.runRecordConflicts++;
      }
      throw err;
    }
  };
  // The state table: sweep and run items (`sweep#…`, `run#…`), their reads and conditional writes.
  const docProto = DynamoDBDocumentClient.prototype as unknown as {
    send: (cmd: unknown, ...rest: unknown[]) => Promise<unknown>;
  };
  const docSend = docProto.send;
  docProto.send = async function (this: unknown, cmd: unknown, ...rest: unknown[]) {
    const c = cmd as {
      constructor: { name: string };
      input?: { Key?: { pk?: string }; Item?: { pk?: string }; UpdateExpression?: string };
      benchOwn?: boolean;
    };
    if (c.benchOwn) return docSend.call(this, cmd, ...rest);
    const name = c.constructor.name.replace(/Command$/, '');
    const key = String(c.input?.Key?.pk ?? c.input?.Item?.pk ?? '');
    const sweepItem = key.startsWith('sweep#');
    const trialItem = key.startsWith('trial#');
    const runItem = key.startsWith('run#');
    // A document write is a Put (the layout before counters) or an Update that SETs the body; an
    // Update that only ADDs is a counter add.
    const add = name === 'Update' && /^ADD /.test(c.input?.UpdateExpression ?? '');
    const write = name === 'Put' || (name === 'Update' && !add);
    if (sweepItem && name === 'Get') counts.recordGets++;
    if (write && sweepItem) counts.recordPuts++;
    if (write && trialItem) counts.trialPuts = (counts.trialPuts ?? 0) + 1;
    if (add && sweepItem) counts.counterAdds = (counts.counterAdds ?? 0) + 1;
    if (write && runItem) counts.runRecordPuts++;
    try {
      return await docSend.call(this, cmd, ...rest);
    } catch (err) {
      if (write && (err as { name?: string }).name === 'ConditionalCheckFailedException') {
        if (sweepItem) counts.recordConflicts++;
        if (trialItem) counts.trialConflicts = (counts.trialConflicts ?? 0) + 1;
        if (runItem) counts.runRecordConflicts++;
      }
      throw err;
    }
  };
  return counts;
}

/** Wall-clock stamps of one run's start path (by run id), taken at the SDK calls in this process. */
interface StartStamps {
  /** The run message sent to the runs queue (SendMessage returned). */
  queued?: number;
  /** The message received by the runs-queue consumer (ReceiveMessage returned it). */
  received?: number;
  /** StartExecution returned (the execution exists; its first state is CreateJob). */
  started?: number;
  /** From the execution's history: each state's first entry and last exit (wall clock). */
  entered?: Record<string, number>;
  exited?: Record<string, number>;
}

/**
 * Stamps each run's message on the runs queue (sent, received) and its execution's start, by
 * wrapping `send` of the SQS and Step Functions clients in this process (the stack's own clients
 * are the only ones that send these commands).
 */
function stampStartPath(): Map<string, StartStamps> {
  const stamps = new Map<string, StartStamps>();
  const at = (runId: string | undefined, key: 'queued' | 'received' | 'started') => {
    if (!runId) return;
    const s = stamps.get(runId) ?? {};
    stamps.set(runId, s);
    if (s[key] === undefined) s[key] = Date.now();
  };
  const runIdOf = (body: unknown) => {
    try {
      return (JSON.parse(String(body)) as { run?: { runId?: string } }).run?.runId;
    } catch {
      return undefined;
    }
  };
  const runsQueue = (url: unknown) => typeof url === 'string' && /\/gantry-runs$/.test(url);
  type Send = (cmd: unknown, ...rest: unknown[]) => Promise<unknown>;
  const sqsProto = SQSClient.prototype as unknown as { send: Send };
  const sqsSend = sqsProto.send;
  sqsProto.send = async function (this: unknown, cmd: unknown, ...rest: unknown[]) {
    const c = cmd as {
      constructor: { name: string };
      input?: { QueueUrl?: string; MessageBody?: string; Entries?: Array<{ MessageBody?: string }> };
    };
    const out = (await sqsSend.call(this, cmd, ...rest)) as { Messages?: Array<{ Body?: string }> };
    if (!runsQueue(c.input?.QueueUrl)) return out;
    const name = c.constructor.name;
    if (name === 'SendMessageCommand') at(runIdOf(c.input?.MessageBody), 'queued');
    if (name === 'SendMessageBatchCommand')
      for (const e of c.input?.Entries ?? []) at(runIdOf(e.MessageBody), 'queued');
    if (name === 'ReceiveMessageCommand')
      for (const m of out?.Messages ?? []) at(runIdOf(m.Body), 'received');
    return out;
  };
  const sfnProto = SFNClient.prototype as unknown as { send: Send };
  const sfnSend = sfnProto.send;
  sfnProto.send = async function (this: unknown, cmd: unknown, ...rest: unknown[]) {
    const out = await sfnSend.call(this, cmd, ...rest);
    const c = cmd as { constructor: { name: string }; input?: { name?: string } };
    if (c.constructor.name === 'StartExecutionCommand') at(c.input?.name, 'started');
    return out;
  };
  return stamps;
}

/** Each run's state entries (first) and exits (last), from its execution's history (the local engine's wall clock). */
async function readStates(env: Embedded, stamps: Map<string, StartStamps>, runIds: Set<string>) {
  let nextToken: string | undefined;
  const arns: Array<[string, string]> = [];
  do {
    const page = await env.stack.sfn.listExecutions({
      stateMachineArn: env.stack.stateMachineArn,
      maxResults: 1000,
      ...(nextToken !== undefined ? { nextToken } : {}),
    });
    for (const e of page.executions) if (runIds.has(e.name)) arns.push([e.name, e.executionArn]);
    nextToken = page.nextToken;
  } while (nextToken);
  for (const [runId, executionArn] of arns) {
    const s = stamps.get(runId) ?? {};
    stamps.set(runId, s);
    const entered: Record<string, number> = {};
    const exited: Record<string, number> = {};
    let token: string | undefined;
    do {
      const page = await env.stack.sfn.getExecutionHistory({
        executionArn,
        maxResults: 1000,
        includeExecutionData: false,
        ...(token !== undefined ? { nextToken: token } : {}),
      });
      for (const ev of page.events) {
        const name = (ev.stateEnteredEventDetails ?? ev.stateExitedEventDetails) as
          | { name?: string }
          | undefined;
        if (!name?.name) continue;
        // A state's first entry and its last exit: AwaitCompletion is left and entered again at
        // each heartbeat check, and the exit that answered the job's end is the last one.
        if (ev.type.endsWith('StateEntered')) entered[name.name] ??= ev.timestamp.getTime();
        else exited[name.name] = ev.timestamp.getTime();
      }
      token = page.nextToken;
    } while (token);
    s.entered = entered;
    s.exited = exited;
  }
}

/** Every log line the handlers print goes to a file; WARN and ERROR lines are counted by message. */
function captureLogs(file: string) {
  const counts: Record<string, number> = {};
  const samples: string[] = [];
  writeFileSync(file, '');
  const original = console.log;
  console.log = (...args: unknown[]) => {
    const line = args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ');
    appendFileSync(file, `${line}\n`);
    const m = /^\{"level":"(WARN|ERROR)".*?"msg":"([^"]*)"/.exec(line);
    if (m) {
      const k = `${m[1]} ${m[2]}`;
      counts[k] = (counts[k] ?? 0) + 1;
      if (samples.length < 8) samples.push(line.slice(0, 600));
    }
  };
  const originalError = console.error;
  console.error = (...args: unknown[]) => {
    const line = args.map((a) => (a instanceof Error ? a.stack : String(a))).join(' ');
    appendFileSync(file, `STDERR ${line}\n`);
    const k = `console.error ${line.slice(0, 80)}`;
    counts[k] = (counts[k] ?? 0) + 1;
    if (samples.length < 8) samples.push(line.slice(0, 600));
  };
  return { counts, samples, restore: () => Object.assign(console, { log: original, error: originalError }) };
}

async function runCase(kind: 'baseline' | 'sweep', parallel: number): Promise<CaseResult> {
  const loadBefore = loadavg()[0] as number;
  const s3 = countS3();
  const startStamps = stampStartPath();
  const logs = captureLogs(LOG);
  const env: Embedded = await startEmbedded({
    simSpeed: SPEED,
    sfnSpeed: 60,
    simulator: {
      defaultDurationSeconds: DURATION,
      durationSpread: SPREAD,
      queues: [{ ...DEMO_QUEUE, quota: { 'nvidia.com/gpu': QUOTA, cpu: 4096, memory: '64Ti' } }],
    },
    stack: {
      reconcileEveryMs: RECONCILE_MS,
      ...(WAKE_GAP_MS ? { reconcileWakeGapMs: Number(WAKE_GAP_MS) } : {}),
    },
  });
  const executions: Record<string, number> = {};
  let lastClose = 0;
  const failedSamples: string[] = [];
  const closed: Array<() => void> = [];
  env.stack.sfn.onExecutionClosed((e) => {
    executions[e.status] = (executions[e.status] ?? 0) + 1;
    if (e.status !== 'SUCCEEDED' && failedSamples.length < 5)
      failedSamples.push(`${e.name} ${e.status} ${e.error}: ${String(e.cause).slice(0, 300)}`);
    lastClose = performance.now();
    for (const f of closed) f();
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
  const closedCount = () => Object.values(executions).reduce((a, b) => a + b, 0);
  const timeline: Array<[number, number]> = [];
  const progress = setInterval(() => {
    const st = env.sim.stats().jobs;
    timeline.push([Math.round((performance.now() - t0) / 1000), closedCount()]);
    process.stderr.write(
      `[${kind} p=${parallel}] ${((performance.now() - t0) / 1000).toFixed(0)} s: ${closedCount()}/${TRIALS} closed, ` +
        `${st.running} running, ${st.pending} pending, load ${loadavg()[0]?.toFixed(1)}\n`,
    );
  }, 15_000);
  // Wall-clock times of each trial's job as the simulator's API server changes it (by run id).
  const jobs = new Map<string, JobTimes>();
  const unwatch = env.sim.api.onEvent((e) => {
    if (e.def.kind !== 'TrainJob') return;
    const meta = (e.object.metadata ?? {}) as { labels?: Record<string, string> };
    const runId = meta.labels?.[LABEL.runId];
    if (!runId) return;
    const now = Date.now();
    const j = jobs.get(runId) ?? {};
    jobs.set(runId, j);
    if (e.type === 'ADDED' && j.created === undefined) j.created = now;
    if (e.type === 'DELETED') return;
    if (j.admitted === undefined && !isSuspended(e.def, e.object)) j.admitted = now;
    const conditions = ((e.object.status ?? {}) as { conditions?: Array<{ type: string; status: string }> })
      .conditions;
    if (
      j.finished === undefined &&
      (conditions ?? []).some((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True')
    )
      j.finished = now;
  });
  const sim0 = env.sim.now().getTime();
  const deadline = Date.now() + TIMEOUT_S * 1000;
  let timedOut = false;
  let sweepOut: CaseResult['sweep'];
  let perTrial: PerTrial | undefined;
  const t0 = performance.now();
  try {
    if (kind === 'baseline') {
      // Closed loop: `parallel` runs in flight; each closed execution lets one more in.
      let submitted = 0;
      const errors: string[] = [];
      const submit = async () => {
        const i = submitted++;
        const r = await call('POST', '/v1/runs', {
          ...template,
          producesArtifacts: false,
          args: [`--lr=${(10 ** (-5 + 4 * Math.random())).toPrecision(3)}`, `--dropout=${Math.random() / 2}`],
          idempotencyKey: `baseline-${i}`,
        });
        if (r.status !== 202) errors.push(`${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      };
      let wake: () => void = () => undefined;
      closed.push(() => wake());
      const initial = Math.min(parallel, TRIALS);
      for (let i = 0; i < initial; i += 16)
        await Promise.all(Array.from({ length: Math.min(16, initial - i) }, () => submit()));
      while (closedCount() < TRIALS) {
        if (errors.length > 0) throw new Error(`POST /v1/runs failed: ${errors.slice(0, 3).join('; ')}`);
        if (Date.now() > deadline) {
          timedOut = true;
          break;
        }
        const toSubmit = Math.min(TRIALS - submitted, closedCount() + parallel - submitted);
        if (toSubmit > 0) {
          await Promise.all(Array.from({ length: toSubmit }, () => submit()));
          continue;
        }
        await new Promise<void>((r) => {
          wake = r;
          setTimeout(r, 1000);
        });
      }
    } else {
      const submittedSweep = await call('POST', '/v1/sweeps', {
        template,
        parameters,
        objective: { metric: 'accuracy', direction: 'maximize' },
        algorithm: { name: 'random', seed: 7 },
        maxTrials: TRIALS,
        parallelTrials: parallel,
        // Count failed trials rather than end the sweep on them.
        maxFailedTrials: TRIALS,
      });
      if (submittedSweep.status !== 202)
        throw new Error(`POST /v1/sweeps: ${submittedSweep.status} ${JSON.stringify(submittedSweep.body)}`);
      const sweepId = submittedSweep.body.sweepId as string;
      // Poll the record itself (not through the API), uncounted: its size, phase and trials in flight.
      // The sweep item (its phase and per-phase trial counters) every 250 ms; the trial items (which
      // trials wait for quota) only every TRIAL_POLL_EVERY polls and at the end: reading every trial
      // item four times a second cost the process more CPU than a sweep advance as the sweep grew.
      let peakInFlightRecord = 0;
      let peakWaitingRecord = 0;
      let lastTrialBytes = 0;
      let polls = 0;
      for (;;) {
        const get = new GetCommand({
          TableName: env.stack.stateTable.name,
          Key: { pk: `sweep#${sweepId}` },
          ConsistentRead: true,
        });
        (get as unknown as { benchOwn: boolean }).benchOwn = true;
        const out = await env.stack.stateTable.client.send(get);
        const text = String(out.Item?.body ?? '{"phase":"Running","trials":[]}');
        const counters = Object.entries(out.Item ?? {}).filter(
          (e): e is [string, number] => e[0].startsWith('c_') && typeof e[1] === 'number',
        );
        const openCounted = counters
          .filter(([attr]) => !TRIAL_ENDED.includes(attr.slice(2)))
          .reduce((sum, [, n]) => sum + n, 0);
        peakInFlightRecord = Math.max(peakInFlightRecord, openCounted);
        const record = JSON.parse(text) as {
          phase: string;
          reason?: string;
          trials?: Array<{
            index: number;
            runId: string;
            phase: string;
            waitingForQuota?: boolean;
            releasedAt?: string;
            endedAt?: string;
          }>;
          best?: { trialIndex: number; objective: number };
        };
        const final = ['Succeeded', 'Failed', 'Cancelled'].includes(record.phase);
        const ending = final || Date.now() > deadline;
        // The trials: inline (the layout before trial items) or the sweep's trial items.
        let trialBytes = 0;
        if (!record.trials && !ending && polls++ % TRIAL_POLL_EVERY !== 0) {
          await new Promise((r) => setTimeout(r, 250));
          continue;
        }
        if (!record.trials) {
          record.trials = [];
          let start: Record<string, unknown> | undefined;
          do {
            const q = new QueryCommand({
              TableName: env.stack.stateTable.name,
              IndexName: 'bySweep',
              KeyConditionExpression: 'g4pk = :p',
              ExpressionAttributeValues: { ':p': `trial#${sweepId}` },
              ...(start ? { ExclusiveStartKey: start } : {}),
            });
            (q as unknown as { benchOwn: boolean }).benchOwn = true;
            const page = await env.stack.stateTable.client.send(q);
            for (const item of page.Items ?? []) {
              trialBytes += Buffer.byteLength(String(item.body));
              record.trials.push(JSON.parse(String(item.body)));
            }
            start = page.LastEvaluatedKey;
          } while (start);
        }
        lastTrialBytes = trialBytes;
        const open = record.trials.filter((t) => !TRIAL_ENDED.includes(t.phase));
        peakInFlightRecord = Math.max(peakInFlightRecord, open.length);
        peakWaitingRecord = Math.max(peakWaitingRecord, open.filter((t) => t.waitingForQuota).length);
        if (ending) {
          timedOut = !final;
          // Each trial's run record: when it was Accepted and when it went terminal (its transitions).
          const runs = new Map<string, { accepted?: number; publishing?: number; ended?: number }>();
          const ids = record.trials.map((t) => t.runId);
          for (let i = 0; i < ids.length; i += 32) {
            await Promise.all(
              ids.slice(i, i + 32).map(async (runId) => {
                const g = new GetCommand({
                  TableName: env.stack.stateTable.name,
                  Key: { pk: `run#${runId}` },
                });
                (g as unknown as { benchOwn: boolean }).benchOwn = true;
                const item = (await env.stack.stateTable.client.send(g)).Item;
                if (!item) return;
                const run = JSON.parse(String(item.body)) as {
                  transitions?: Array<{ phase: string; at: string }>;
                };
                const tr = run.transitions ?? [];
                const accepted = tr.find((x) => x.phase === 'Accepted')?.at;
                const terminal = tr.find((x) => ['Succeeded', 'Failed', 'Cancelled'].includes(x.phase))?.at;
                const publishing = tr.find((x) => x.phase === 'Publishing')?.at;
                runs.set(runId, {
                  ...(accepted ? { accepted: Date.parse(accepted) } : {}),
                  ...(publishing ? { publishing: Date.parse(publishing) } : {}),
                  ...(terminal ? { ended: Date.parse(terminal) } : {}),
                });
              }),
            );
          }
          await readStates(env, startStamps, new Set(ids));
          perTrial = perTrialTimings(record.trials, jobs, parallel, QUOTA, runs, startStamps);
          sweepOut = {
            phase: record.phase,
            ...(record.reason ? { reason: record.reason } : {}),
            succeeded: record.trials.filter((t) => t.phase === 'Succeeded').length,
            failed: record.trials.filter((t) => t.phase === 'Failed').length,
            recordBytes: Buffer.byteLength(text),
            trialBytes: lastTrialBytes,
            peakInFlightRecord,
            peakWaitingRecord,
            ...(record.best
              ? { best: { trialIndex: record.best.trialIndex, objective: record.best.objective } }
              : {}),
          };
          break;
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    const wallMs = performance.now() - t0;
    const stats = env.sim.stats();
    let started = 0;
    let nextToken: string | undefined;
    do {
      const page = await env.stack.sfn.listExecutions({
        stateMachineArn: env.stack.stateMachineArn,
        maxResults: 1000,
        ...(nextToken !== undefined ? { nextToken } : {}),
      });
      started += page.executions.length;
      nextToken = page.nextToken;
    } while (nextToken);
    const usage = process.resourceUsage();
    return {
      kind,
      trials: TRIALS,
      parallel,
      executions,
      executionsStarted: started,
      wallMs,
      lastCloseMs: lastClose - t0,
      simElapsedSeconds: (env.sim.now().getTime() - sim0) / 1000,
      peakUnfinished: stats.jobs.peakUnfinished,
      peakRunning: stats.jobs.peakRunning,
      simCompleted: stats.jobs.completed,
      simFailed: stats.jobs.failed,
      ...(sweepOut ? { sweep: sweepOut } : {}),
      ...(perTrial ? { perTrial } : {}),
      s3,
      logs: logs.counts,
      logSamples: logs.samples,
      maxRssMiB: usage.maxRSS / 1024,
      cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6,
      loadBefore,
      loadAfter: loadavg()[0] as number,
      timedOut,
      timeline,
      failedSamples,
    };
  } finally {
    clearInterval(progress);
    unwatch();
    await env.close().catch(() => undefined);
    logs.restore();
  }
}

// ---------------------------------------------------------------------------------------------
// The parent: one process per case, then the figures.

function measure(name: string, kind: 'baseline' | 'sweep', parallel: number): Promise<CaseResult> {
  return new Promise((res, rej) => {
    const child = execFile(
      process.execPath,
      [
        fileURLToPath(import.meta.url),
        `--case=${kind}`,
        `--parallel=${parallel}`,
        `--trials=${TRIALS}`,
        `--speed=${SPEED}`,
        `--duration=${DURATION}`,
        `--spread=${SPREAD}`,
        `--quota=${QUOTA}`,
        `--timeout=${TIMEOUT_S}`,
        `--reconcile-ms=${RECONCILE_MS}`,
        ...(WAKE_GAP_MS ? [`--wake-gap-ms=${WAKE_GAP_MS}`] : []),
        `--out=${OUT}`,
        `--log=${join(OUT, `gantry-bench-sweeps-${name}.log`)}`,
      ],
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
      (err, stdout) => {
        const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
        if (line) writeFileSync(join(OUT, `gantry-bench-sweeps-${name}.json`), line.slice('RESULT '.length));
        if (line) res(JSON.parse(line.slice('RESULT '.length)) as CaseResult);
        else rej(err ?? new Error(`case ${name} printed no result`));
      },
    );
    child.stderr?.pipe(process.stderr);
  });
}

interface Derived {
  slots: number;
  idealS: number;
  wallS: number;
  overheadPerTrialS: number;
  trialsPerS: number;
  speedup: number;
  efficiency: number;
}

/** Trials that ended: as the sweep record says (an execution may fail after its run succeeded), else closed executions. */
function doneOf(r: CaseResult): number {
  return r.sweep
    ? r.sweep.succeeded + r.sweep.failed
    : (r.executions.SUCCEEDED ?? 0) + (r.executions.FAILED ?? 0);
}

function derive(r: CaseResult): Derived {
  const slots = Math.min(r.parallel, QUOTA);
  const done = doneOf(r);
  // Over the trials that finished (all of them unless the case timed out).
  const idealS = Math.ceil(done / slots) * (DURATION / SPEED);
  const wallS = r.wallMs / 1000;
  const serialS = (done * DURATION) / SPEED;
  return {
    slots,
    idealS,
    wallS,
    overheadPerTrialS: ((wallS - idealS) * slots) / done,
    trialsPerS: done / wallS,
    speedup: serialS / wallS,
    efficiency: idealS / wallS,
  };
}

function report(results: Record<string, CaseResult>, loadBefore: number, loadAfter: number): string {
  const f = (v: number, d = 1) => v.toFixed(d);
  const rows: string[] = [];
  const d: Record<string, Derived> = {};
  for (const [name, r] of Object.entries(results)) {
    const x = derive(r);
    d[name] = x;
    const label =
      r.kind === 'baseline'
        ? `plain runs, closed loop of ${r.parallel} (baseline)`
        : `sweep, parallelTrials ${r.parallel}`;
    const done = doneOf(r);
    rows.push(
      `| ${label} | ${done}${r.timedOut ? ' (**timed out**)' : ''} | ${f(x.wallS)} s | ${f(x.idealS)} s | ${f(x.efficiency * 100, 0)} % | ` +
        `${f(x.speedup)}× of ${x.slots} | ${f(x.trialsPerS, 2)} | ${f(x.overheadPerTrialS, 2)} s | ` +
        `${r.peakUnfinished} / ${r.peakRunning} | ${f(r.maxRssMiB, 0)} MiB | ${f(r.cpuSeconds, 0)} s |`,
    );
  }
  const base = d.baseline;
  const ratio = (name: string, pick: (x: Derived) => number) =>
    base && d[name] ? f(pick(d[name] as Derived) / pick(base), 2) : 'n/a';
  const sweepCases = Object.entries(results).filter(([, r]) => r.kind === 'sweep');
  const details = sweepCases
    .map(([name, r]) => {
      const s = r.sweep;
      const puts = r.s3.recordPuts;
      return `### sweep, parallelTrials ${r.parallel}

- ${r.timedOut ? `Record phase at the time box: ${s?.phase}` : `Ended ${s?.phase}${s?.reason ? ` (${s.reason})` : ''}`}: ${s?.succeeded} trials succeeded, ${s?.failed} failed; best trial ${s?.best?.trialIndex} (accuracy ${s?.best?.objective}).
- ${r.timedOut ? `**Timed out** after ${f(r.wallMs / 1000)} s with ${doneOf(r)} of ${r.trials} trials ended (the record still ${s?.phase}); the last execution closed at ${f(r.lastCloseMs / 1000)} s.` : `Last trial's execution closed at ${f(r.lastCloseMs / 1000)} s; the sweep record was final at ${f(r.wallMs / 1000)} s (publishing the best, the reconciler's end of the sweep).`}
- Overhead per trial against the baseline's: **${ratio(name, (x) => x.overheadPerTrialS)}×**; trials per second against plain runs per second: **${ratio(name, (x) => x.trialsPerS)}×**.
- Peak concurrent trials as the simulator saw them: ${r.peakUnfinished} unfinished jobs (≤ parallelTrials ${r.parallel}: ${r.peakUnfinished <= r.parallel ? 'yes' : '**no**'}), ${r.peakRunning} running (quota ${QUOTA}); as the sweep record showed them: ${s?.peakInFlightRecord} in flight, at most ${s?.peakWaitingRecord} waiting for quota.
- Sweep record: ${s ? f(s.recordBytes / 1024, 0) : '?'} KiB at the end (${s ? f(s.recordBytes / Math.max(1, doneOf(r)), 0) : '?'} B per ended trial); ${puts} conditional writes attempted, ${r.s3.recordConflicts} lost (ConditionalCheckFailed, then re-read and re-decided) = ${f(puts ? (100 * r.s3.recordConflicts) / puts : 0, 1)} %; ${r.s3.recordGets} reads by Gantry. Writes per ended trial: ${f(puts / Math.max(1, doneOf(r)), 2)}; bytes written to the record: ~${s ? f((puts * s.recordBytes) / 2 / 2 ** 20, 1) : '?'} MiB (writes × half the final size).
${
  r.s3.trialPuts
    ? `- Trial items: ${s ? f((s.trialBytes ?? 0) / 1024, 0) : '?'} KiB together; ${r.s3.trialPuts} conditional writes attempted, ${r.s3.trialConflicts ?? 0} lost = ${f((100 * (r.s3.trialConflicts ?? 0)) / r.s3.trialPuts, 1)} %; ${r.s3.counterAdds ?? 0} counter adds to the sweep item. Sweep and trial items together: ${puts + r.s3.trialPuts} conditional writes, ${r.s3.recordConflicts + (r.s3.trialConflicts ?? 0)} lost = **${f((100 * (r.s3.recordConflicts + (r.s3.trialConflicts ?? 0))) / Math.max(1, puts + r.s3.trialPuts), 1)} %**.
`
    : ''
}- S3 requests per ended trial: ${f(r.s3.total / Math.max(1, doneOf(r)), 1)} (baseline: ${results.baseline ? f(results.baseline.s3.total / Math.max(1, doneOf(results.baseline)), 1) : 'n/a'} per run). By command: ${Object.entries(
        r.s3.byCommand,
      )
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}.
${r.perTrial ? `- ${perTrialLine(r.perTrial)}\n` : ''}- Step Functions executions: ${r.executionsStarted} started; closed ${JSON.stringify(r.executions)}.${(r.failedSamples ?? []).length > 0 ? ` First that did not succeed: ${(r.failedSamples ?? []).map((x) => `\`${x.slice(0, 200)}\``).join('; ')}.` : ''}
- Executions closed over time (s: closed): ${r.timeline.map(([t, n]) => `${t}: ${n}`).join(', ')}.
- WARN/ERROR log lines: ${
        Object.keys(r.logs).length === 0
          ? 'none'
          : Object.entries(r.logs)
              .map(([k, v]) => `${k}: ${v}`)
              .join('; ')
      }.
`;
    })
    .join('\n');
  const b = results.baseline;
  const baseDetails = b
    ? `### baseline

- ${b.executionsStarted} executions started; closed ${JSON.stringify(b.executions)}; peak ${b.peakUnfinished} unfinished / ${b.peakRunning} running jobs.
- Executions closed over time (s: closed): ${b.timeline.map(([t, n]) => `${t}: ${n}`).join(', ')}.
- S3 requests per run: ${f(b.s3.total / Math.max(1, doneOf(b)), 1)}. By command: ${Object.entries(
        b.s3.byCommand,
      )
        .sort((a, c) => c[1] - a[1])
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}.
- WARN/ERROR log lines: ${
        Object.keys(b.logs).length === 0
          ? 'none'
          : Object.entries(b.logs)
              .map(([k, v]) => `${k}: ${v}`)
              .join('; ')
      }.
`
    : '';
  return `## Latest run

${new Date().toISOString().slice(0, 10)}, Node ${process.version}, ${cpus().length} CPUs shared with other engineers' work;
load average ${f(loadBefore)} before, ${f(loadAfter)} after.
\`node bench/sweeps.ts --trials ${TRIALS} --parallel ${PARALLEL} --over ${OVER} --speed ${SPEED} --duration ${DURATION} --quota ${QUOTA} --timeout ${TIMEOUT_S}\`:
${TRIALS} trials of ${DURATION} simulated seconds (${f(DURATION / SPEED, 2)} s of wall each at ${SPEED}×), 1 GPU each, one
ClusterQueue of ${QUOTA} GPUs. Ideal wall = ceil(${TRIALS} / min(parallel, ${QUOTA})) × ${f(DURATION / SPEED, 2)} s (every slot always busy);
overhead per trial = (wall − ideal) × min(parallel, ${QUOTA}) / trials ended (all ${TRIALS} unless the case timed out;
then the ideal is over the trials that ended).

| case | trials done | wall | ideal | ideal / wall | speed-up over one at a time | trials/s | overhead per trial | peak unfinished / running jobs | peak RSS | CPU |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${rows.join('\n')}

Sweep (parallelTrials ${PARALLEL}) against the baseline: overhead per trial **${ratio('sweep', (x) => x.overheadPerTrialS)}×**,
throughput **${ratio('sweep', (x) => x.trialsPerS)}×**${results.sweep?.timedOut ? ' (the sweep timed out: wall is not comparable)' : `, wall **${ratio('sweep', (x) => x.wallS)}×**`}.

${baseDetails}
${details}`;
}

function fmtDist(d: Dist): string {
  return `${d.median.toFixed(2)} / ${d.p90.toFixed(2)} / ${d.max.toFixed(2)} s`;
}

function perTrialLine(p: PerTrial): string {
  return (
    `Per-trial orchestration overhead (launch + record; median / p90 / max over ${p.measured} of ${p.trials} trials): **${fmtDist(p.overhead)}**; ` +
    `launch (released → job created) ${fmtDist(p.launch)}, record (job finished → trial recorded ended) ${fmtDist(p.record)}; ` +
    `not overhead: waiting for quota (job created → admitted) ${fmtDist(p.queue)}, training (admitted → finished) ${fmtDist(p.train)}; ` +
    `slot refill (trial i ended → trial i + parallel released) ${fmtDist(p.refill)}; ` +
    `trial ended → successor's job created (trial i's job finished → trial i + parallel's job created) ${p.successor ? fmtDist(p.successor) : 'n/a'}.` +
    (p.accept && p.reconcile && p.submit && p.handoff
      ? ` Split at the run record: released → run Accepted ${fmtDist(p.accept)}, Accepted → job created ${fmtDist(p.submit)}; job finished → run terminal ${fmtDist(p.reconcile)}, run terminal → trial ended ${fmtDist(p.handoff)}.`
      : '') +
    (p.answered && p.closing
      ? ` Job finished → run Publishing (answer, state machine, metric drain) ${fmtDist(p.answered)}; Publishing → run terminal ${fmtDist(p.closing)}.`
      : '') +
    (p.quotaAware && p.freeLaunch
      ? ` Quota-aware overhead (launch while a GPU was free + record): ${fmtDist(p.quotaAware)}; launch while a GPU was free ${fmtDist(p.freeLaunch)}.`
      : '')
  );
}

/** The repeated runs of the sweep cases: one row per run, then the per-trial overhead pooled per case. */
function repeatReport(runs: Array<{ name: string; run: number; r: CaseResult }>, command: string): string {
  const f = (v: number, d = 2) => v.toFixed(d);
  const rows = runs.map(({ name, run, r }) => {
    const done = doneOf(r);
    const p = r.perTrial;
    return (
      `| ${name} (parallelTrials ${r.parallel}) | ${run} | ${done} of ${r.trials}${done === r.trials ? '' : ' **(not all)**'} | ` +
      `${r.timedOut ? `**stalled** (record ${r.sweep?.phase} at the ${TIMEOUT_S} s time box)` : `no (${r.sweep?.phase})`} | ` +
      `${r.peakUnfinished} ≤ ${r.parallel}: ${r.peakUnfinished <= r.parallel ? 'yes' : '**no**'} | ${r.peakRunning} | ` +
      `${f(r.wallMs / 1000, 1)} s | ${f(derive(r).overheadPerTrialS)} s | ` +
      `${p ? `${f(p.overhead.median)} / ${f(p.overhead.p90)} / ${f(p.overhead.max)} s` : 'n/a'} | ` +
      `${p?.quotaAware ? `${f(p.quotaAware.median)} / ${f(p.quotaAware.p90)} / ${f(p.quotaAware.max)} s` : 'n/a'} | ` +
      `${p ? `${f(p.launch.median)} / ${f(p.record.median)} s` : 'n/a'} | ` +
      `${p?.accept && p.submit && p.reconcile && p.handoff ? `${f(p.accept.median)} / ${f(p.submit.median)} / ${f(p.reconcile.median)} / ${f(p.handoff.median)} s` : 'n/a'} | ${p ? `${f(p.queue.median)} / ${f(p.queue.max)} s` : 'n/a'} | ` +
      `${p ? f(p.refill.median) : 'n/a'} s | ${p?.successor ? `${f(p.successor.median)} / ${f(p.successor.p90)} s` : 'n/a'} | ${f(r.loadBefore, 1)} → ${f(r.loadAfter, 1)} |`
    );
  });
  const names = [...new Set(runs.map((x) => x.name))];
  const pooled = names.map((name) => {
    const mine = runs.filter((x) => x.name === name);
    const all = mine.flatMap((x) => x.r.perTrial?.overheads ?? []);
    const d = dist(all);
    const medians = mine.map((x) => x.r.perTrial?.overhead.median ?? Number.NaN);
    const aware = dist(mine.flatMap((x) => x.r.perTrial?.quotaAwares ?? []));
    const awareMedians = mine.map((x) => x.r.perTrial?.quotaAware?.median ?? Number.NaN);
    const succ = dist(mine.flatMap((x) => x.r.perTrial?.successors ?? []));
    const refillMedians = mine.map((x) => x.r.perTrial?.refill.median ?? Number.NaN);
    const stalls = mine.filter((x) => x.r.timedOut).length;
    const exceeded = mine.filter((x) => x.r.peakUnfinished > x.r.parallel).length;
    return (
      `- **${name}** (parallelTrials ${mine[0]?.r.parallel}): ${mine.length} runs, ${stalls} stalled, parallelism exceeded in ${exceeded}; ` +
      `per-trial overhead pooled over ${d.n} trials: median **${f(d.median)} s**, p90 ${f(d.p90)} s, max ${f(d.max)} s, mean ${f(d.mean)} s; ` +
      `medians of the runs ${medians.map((m) => f(m)).join(', ')} s → ≤ 1 s at the median: **${medians.every((m) => m <= 1) ? 'met in every run' : `not met (${medians.filter((m) => m > 1).length} of ${medians.length} runs above 1 s)`}**. ` +
      `Quota-aware (launch while a GPU was free + record) pooled: median **${f(aware.median)} s**, p90 ${f(aware.p90)} s; ` +
      `medians of the runs ${awareMedians.map((m) => f(m)).join(', ')} s → ≤ 1 s: **${awareMedians.every((m) => m <= 1) ? 'met in every run' : `not met (${awareMedians.filter((m) => !(m <= 1)).length} of ${awareMedians.length} runs)`}**. ` +
      `Trial ended → successor's job created, pooled over ${succ.n} slots: median **${f(succ.median)} s**, p90 ${f(succ.p90)} s. ` +
      successorLine(mine.map((x) => x.r)) +
      `Slot refill medians of the runs ${refillMedians.map((m) => f(m)).join(', ')} s → ≤ 2 s: **${refillMedians.every((m) => m <= 2) ? 'met in every run' : `not met (${refillMedians.filter((m) => !(m <= 2)).length} of ${refillMedians.length} runs)`}**.`
    );
  });
  return `## Per-trial overhead, repeated runs (${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC)

Node ${process.version}, ${cpus().length} CPUs shared with other engineers' work. \`${command}\`:
${TRIALS} trials of ${DURATION} simulated seconds (${f(DURATION / SPEED)} s of wall at ${SPEED}×), 1 GPU each, quota ${QUOTA} GPUs;
the cases ran one after the other, each in a process of its own.

| case | run | trials done | stalled | peak unfinished jobs ≤ parallelTrials | peak running | wall | overhead per trial (average from wall) | per-trial overhead median / p90 / max | quota-aware overhead median / p90 / max | launch / record median | accept / submit / reconcile / handoff median | quota wait median / max | slot refill median | trial ended → successor's job created median / p90 | load before → after |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${rows.join('\n')}

${pooled.join('\n')}

${stageTable(names.map((name) => [name, runs.filter((x) => x.name === name).map((x) => x.r)]))}
`;
}

/** The successor gap's ≤ 2 s check: pooled and per run, while the quota was full and while it was not. */
function successorLine(rs: CaseResult[]): string {
  const f = (v: number) => (Number.isNaN(v) ? 'n/a' : v.toFixed(2));
  const fullMedians = rs.map((r) => dist(r.perTrial?.successorsFull ?? []).median);
  const full = dist(rs.flatMap((r) => r.perTrial?.successorsFull ?? []));
  const free = dist(rs.flatMap((r) => r.perTrial?.successorsFree ?? []));
  const all = rs.map((r) => r.perTrial?.successor.median ?? Number.NaN);
  return (
    `Trial ended → successor's job created, medians of the runs ${all.map(f).join(', ')} s → ≤ 2 s: **${all.every((m) => m <= 2) ? 'met in every run' : `not met (${all.filter((m) => !(m <= 2)).length} of ${all.length} runs)`}**; ` +
    `slots whose trial ended while the quota was full (${full.n}): median **${f(full.median)} s**, p90 ${f(full.p90)} s (medians of the runs ${fullMedians.map(f).join(', ')} s); ` +
    `while a GPU was free (${free.n}): median ${f(free.median)} s, p90 ${f(free.p90)} s. `
  );
}

/** "Trial ended → successor's job created" split by stage, pooled per case: median / p90 of each. */
function stageTable(cases: Array<[string, CaseResult[]]>): string {
  const body = cases.flatMap(([name, rs]) => {
    const rows = rs.flatMap((r) => r.perTrial?.successorStageRows ?? []);
    if (rows.length === 0) return [];
    const cells = STAGES.map((_, i) => {
      const d = dist(rows.map((row) => row[i] as number));
      return `${d.median.toFixed(2)} / ${d.p90.toFixed(2)}`;
    });
    const total = dist(rows.map((row) => row.reduce((a, b) => a + b, 0)));
    return [
      `| ${name} | ${rows.length} | ${cells.join(' | ')} | ${total.median.toFixed(2)} / ${total.p90.toFixed(2)} |`,
    ];
  });
  if (body.length === 0) return '';
  return `Trial ended → successor's job created by stage, pooled over the runs (median / p90, s; slots with every stamp):
seen = trial's job finished → AwaitCompletion answered (the reconciler's watch); publish = → PublishArtifacts done
(metric drain, Publishing write); notify = → RecordSuccess entered (NotifyServing); terminal = → the run's terminal
write; handoff = run terminal → trial recorded ended (RecordOutcome's advance); refill = trial ended → successor
released; enqueue = released → run message sent; deliver = sent → received by the runs-queue consumer; accept = received →
the successor's run record written; start = record → StartExecution returned; create = execution started → job created.

| case | slots | ${STAGES.join(' | ')} | total |
| --- | --- | ${STAGES.map(() => '---').join(' | ')} | --- |
${body.join('\n')}`;
}

const START = '<!-- results:start -->';
const END = '<!-- results:end -->';

if (CASE) {
  const result = await runCase(CASE as 'baseline' | 'sweep', PARALLEL);
  process.stdout.write(`\nRESULT ${JSON.stringify(result)}\n`);
  process.exit(0);
}

const REPEAT_FROM = arg('repeat-from', '');
if (REPEAT_FROM) {
  // The repeated runs' section from what a run saved after each case (e.g. one stopped before its last).
  const runs = JSON.parse(readFileSync(REPEAT_FROM, 'utf8')) as Array<{
    name: string;
    run: number;
    r: CaseResult;
  }>;
  const command = `node bench/sweeps.ts ${arg('command', '')}`;
  const section = repeatReport(runs, command);
  console.log(section);
  if (WRITE) appendFileSync(RESULTS, `\n${section}`);
  process.exit(0);
}

if (REPEAT > 0) {
  const runs: Array<{ name: string; run: number; r: CaseResult }> = [];
  const command = `node bench/sweeps.ts ${process.argv
    .slice(2)
    .filter((a) => a !== '--write')
    .join(' ')}`;
  for (let run = 1; run <= REPEAT; run++) {
    for (const [name, parallel] of [
      ['sweep', PARALLEL],
      ['over', OVER],
    ] as const) {
      if (!CASES.includes(name) || parallel <= 0) continue;
      const r = await measure(`${name}-${run}`, 'sweep', parallel);
      runs.push({ name, run, r });
      process.stderr.write(
        `[repeat] ${name} run ${run}: ${doneOf(r)} done, timedOut ${r.timedOut}, peak ${r.peakUnfinished}/${parallel}, ` +
          `overhead median ${r.perTrial?.overhead.median.toFixed(2)} s, CPU ${r.cpuSeconds?.toFixed(0)} s\n` +
          (r.perTrial ? `  ${perTrialLine(r.perTrial)}\n` : ''),
      );
      writeFileSync(join(OUT, 'gantry-bench-sweeps-repeat.json'), JSON.stringify(runs));
    }
  }
  const section = repeatReport(runs, command);
  console.log(section);
  if (WRITE) appendFileSync(RESULTS, `\n${section}`);
  process.exit(0);
}

const FROM = arg('from', '');
let loadBefore = loadavg()[0] as number;
const results: Record<string, CaseResult> = {};
if (FROM) {
  // Rewrite the report from the case results a previous run saved (same flags).
  for (const name of ['baseline', 'sweep', 'over']) {
    const file = `${FROM}/gantry-bench-sweeps-${name}.json`;
    if (existsSync(file)) results[name] = JSON.parse(readFileSync(file, 'utf8')) as CaseResult;
  }
  loadBefore = Object.values(results)[0]?.loadBefore ?? loadBefore;
} else {
  if (CASES.includes('baseline')) results.baseline = await measure('baseline', 'baseline', PARALLEL);
  if (CASES.includes('sweep')) results.sweep = await measure('sweep', 'sweep', PARALLEL);
  if (CASES.includes('over') && OVER > 0) results.over = await measure('over', 'sweep', OVER);
}
const loadAfter = FROM ? (Object.values(results).at(-1)?.loadAfter ?? 0) : (loadavg()[0] as number);
writeFileSync(join(OUT, 'gantry-bench-sweeps.json'), JSON.stringify(results, null, 2));
process.stderr.write(`bench/sweeps: logs and results in ${OUT}\n`);
const section = report(results, loadBefore, loadAfter);
console.log(section);
if (WRITE) {
  const previous = existsSync(RESULTS) ? readFileSync(RESULTS, 'utf8') : '';
  const [head, rest] = previous.includes(START) ? previous.split(START) : ['# Sweeps\n\n', `\n${END}\n`];
  const tail = (rest ?? '').includes(END) ? (rest ?? '').slice((rest ?? '').indexOf(END) + END.length) : '';
  writeFileSync(RESULTS, `${head}${START}\n${section}\n${END}${tail}`);
}
process.exit(0);
