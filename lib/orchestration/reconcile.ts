import { mapLimit } from '../concurrency.ts';
import { ClusterAccessDeniedError } from '../errors.ts';
import type { CallOptions, Clock, ClusterGateway, JobApi, WorkflowEngine } from '../ports.ts';
import type { RunRecords } from '../run/records.ts';
import { attemptOf } from '../trainjob/disruption.ts';
import { LABEL, MANAGED_SELECTOR } from '../trainjob/labels.ts';
import { DEFAULT_POD_HEALTH, type PodHealthOptions, podsByRun } from '../trainjob/pod-health.ts';
import { toRunPhase } from '../trainjob/status.ts';
import type { K8sObject } from '../trainjob/types.ts';
import { decide } from './decide.ts';
import {
  type DueHeartbeat,
  HEARTBEAT_EVERY_SECONDS,
  HEARTBEAT_RESERVE_MS,
  type HeartbeatGate,
  makeHeartbeats,
} from './heartbeats.ts';
import { makeJobNotes } from './job-notes.ts';
import { makeOrphanRemoval, type OrphanDeps } from './orphans.ts';
import { type Pacer, UNPACED } from './pacing.ts';
import {
  answer,
  answerVanished,
  type JobAt,
  type JobReconciling,
  type JobSinks,
  reconcileJob,
  TOKEN_KEYS,
} from './reconcile-job.ts';
import { makeRecordWrites, type PendingRecord } from './record-writes.ts';
import { makeStallActions } from './stall-actions.ts';
import { drainedSweeps, waitsForQuota } from './sweep-queue.ts';
import { emptyReport, type TickReport } from './tick-report.ts';
import {
  jobKey,
  type Listed,
  tokensOf,
  vanishedSince,
  type WakeReason,
  waitForChange,
  watchedForm,
} from './wake.ts';

export { HEARTBEAT_EVERY_SECONDS } from './heartbeats.ts';

/** A failing watch is logged at most this often per cluster (each line counts the failures since). */
export const WATCH_FAILURE_LOG_EVERY_MS = 60_000;
export { emptyReport, type TickReport } from './tick-report.ts';

export interface ReconcilerDeps {
  /** The configured clusters, each with its gateway and the job APIs Gantry creates there. */
  clusters: () => Array<{
    name: string;
    gateway: ClusterGateway;
    jobApis: () => Promise<JobApi[]>;
    /**
     * Seconds a queued job may go without its Kueue Workload before its run fails
     * (`decideMissingWorkload`; config `kueueWorkloadGraceSeconds`). Absent: never.
     */
    kueueWorkloadGraceSeconds?: number;
  }>;
  workflow: WorkflowEngine;
  records: RunRecords;
  clock: Clock;
  /** A job with no waiting token is only an orphan after this long (covers the gap between steps). */
  orphanGraceSeconds?: number;
  /** How long a job may stay suspended after Kueue admitted it (default ADMITTED_SUSPENDED_GRACE_SECONDS). */
  admittedSuspendedGraceSeconds?: number;
  /** Unschedulable grace and crash-loop restart limit for health after admission (pod-health.ts). */
  podHealth?: Partial<PodHealthOptions>;
  /**
   * Seconds between two heartbeats of one waiting token (default HEARTBEAT_EVERY_SECONDS: half the
   * state machine's `HeartbeatSeconds` of 600). Each token is heartbeated once per interval, at a
   * phase of its own, so the calls of many runs spread evenly over the ticks.
   */
  heartbeatEverySeconds?: number;
  /**
   * Paces the Step Functions calls (lib/orchestration/pacing.ts): `answers` the SendTask* calls,
   * `describe` DescribeExecution. Default: unpaced (the embedded default has no quotas).
   */
  pacing?: { answers?: Pacer; describe?: Pacer };
  /**
   * Divides every run's `stallAfterSeconds` (the embedded default's time compression, its Step
   * Functions speed); default 1.
   */
  stallTimeScale?: number;
  /** Advances every active sweep after the jobs (releases, early stopping, publishing the best). */
  sweeps?: { advanceActive(opts?: CallOptions): Promise<{ sweeps: number; errors: number }> };
  /**
   * A pass advances the active sweeps only when this many seconds have gone since the last pass that
   * did (default 0: every pass). A trial's own RecordOutcome advances its sweep as the trial ends;
   * the passes are the safety net (a lost handoff, early stopping, a sweep's end), and one woken
   * every second by job changes need not read every open trial's run record each time.
   */
  sweepsEverySeconds?: number;
  /**
   * Advances one sweep now: a pass that sees the last of a sweep's trials waiting for quota admitted
   * calls it for that sweep after the pass's record writes, so the slots the sweep held back are
   * released within the pass rather than at the next `sweepsEverySeconds` (lib/orchestration/sweep-queue.ts).
   */
  advanceSweep?: (sweepId: string, opts?: CallOptions) => Promise<unknown>;
  log?: (line: Record<string, unknown>) => void;
  /** Archives an orphan job's pod logs before it is deleted (lib/logs/archive.ts). */
  archiveLogs?: OrphanDeps['archiveLogs'];
}

type Cluster = ReturnType<ReconcilerDeps['clusters']>[number];

/** A pass's options: the caller's signal, and the time its invocation has left. */
export interface TickOptions extends CallOptions {
  /**
   * Milliseconds the invocation has left (Lambda's `context.getRemainingTimeInMillis`): a pass
   * stops sending heartbeats HEARTBEAT_RESERVE_MS before it ends and leaves the rest, still due,
   * to the next pass. Absent: no limit (the embedded default).
   */
  remainingMs?: () => number;
}

/** What a reconciler keeps between passes, and the helpers its passes share. */
interface Reconciling extends JobReconciling {
  deps: ReconcilerDeps;
  /**
   * What was last written to each run's record, while this reconciler lives (a warm Lambda
   * keeps it between ticks). Only an optimisation: an unchanged job costs no store call, and a
   * cold start writes each record once more, which changes nothing.
   */
  recorded: Map<string, string>;
  /** Each cluster's jobs as the last pass listed them: what `waitForChange` compares the watch with. */
  listed: Map<string, Listed>;
  /** Answers given from the watch since the last pass started (answerFromWatch). */
  betweenPasses: TickReport;
  /** When a pass last advanced the sweeps (ms; `sweepsEverySeconds`). */
  sweptAt: number;
  sweepsEveryMs: number;
  /** Per sweep, its trial jobs the last pass that listed every cluster saw waiting for quota. */
  queuedBefore: Map<string, number>;
  /** Watch failures per cluster: when one was last logged, and how many since (rate-limited log). */
  watchFailed: Map<string, { loggedAt: number; unlogged: number }>;
  heartbeat: ReturnType<typeof makeHeartbeats>['heartbeat'];
  inSendOrder: ReturnType<typeof makeHeartbeats>['inSendOrder'];
  writeRecords: ReturnType<typeof makeRecordWrites>['writeRecords'];
}

/** One pass over every cluster: its report and what it saw, for the bookkeeping after it. */
interface Pass {
  report: TickReport;
  /** Runs whose jobs were listed. */
  live: Set<string>;
  waitingTokens: Set<string>;
  /** Per sweep, its trial jobs this pass saw waiting for quota. */
  queuedNow: Map<string, number>;
  listedAll: boolean;
  // Set when Step Functions throttles a heartbeat, or the invocation nears its end: the rest of
  // this pass's heartbeats wait for the next pass (they stay due); answers still go out.
  heartbeats: HeartbeatGate;
  /** Due heartbeats this pass left for the next one (throttled or out of time). */
  deferred: number;
}

/** One cluster's LISTs of a pass, the jobs paired with their gates and pods. */
interface ClusterListing {
  cluster: Cluster;
  gateByOwner: Map<string, K8sObject[]>;
  podsOfRun: ReturnType<typeof podsByRun> | undefined;
  work: Array<{ api: JobApi; job: K8sObject }>;
}

/**
 * One reconciler tick: per cluster, one LIST per job kind, one of admission gates (Kueue
 * Workloads / PodGroups) and one of Gantry's pods (health after admission: image pulls, config
 * errors, crash loops, unschedulable gangs) — never one call per run — then answer, fail or heartbeat each waiting
 * token, write progress into run records, and delete jobs whose execution has ended.
 * Idempotent: every decision is recomputed from the cluster each tick, and a token that was
 * already answered is simply stale (SendTask* reports it and the annotation is cleared).
 */
export function makeReconciler(deps: ReconcilerDeps) {
  const r = reconciling(deps);
  return {
    tick: (opts?: TickOptions) => tick(r, opts),
    waitForJobChange: (ms: number, opts?: CallOptions) => waitForJobChange(r, ms, opts),
  };
}

/** The reconciler's state and helpers (heartbeats, stall actions, record writes, orphan removal). */
function reconciling(deps: ReconcilerDeps): Reconciling {
  const log = deps.log ?? (() => undefined);
  /**
   * When this reconciler last heartbeated each waiting token (ms). Only ever set after a heartbeat
   * was delivered, so it can make a token's heartbeat late by at most one interval, never skip it:
   * a cold start (an empty map) heartbeats every token once, then only those that are due.
   */
  const beaten = new Map<string, number>();
  /**
   * Stall detection (decideStall): per running job, the time (ms) its record must next be read,
   * learnt from the last read; Infinity when the run has no detection. A job not in the map is read
   * at its next tick (a cold start reads every running job's record once, as it writes them anyway);
   * a job that is not due costs the store nothing.
   */
  const stallDue = new Map<string, number>();
  const recorded = new Map<string, string>();
  const answers = deps.pacing?.answers ?? UNPACED;
  const stallScale = deps.stallTimeScale ?? 1;
  const note = makeJobNotes({ clock: deps.clock, log });
  const everyMs = (deps.heartbeatEverySeconds ?? HEARTBEAT_EVERY_SECONDS) * 1000;
  const { heartbeatDue, heartbeat, inSendOrder } = makeHeartbeats({
    workflow: deps.workflow,
    answers,
    log,
    everyMs,
    beaten,
  });
  const actOnStall = makeStallActions({
    workflow: deps.workflow,
    answers,
    log,
    note,
    stallScale,
    stallDue,
    beaten,
  });
  const { progressChange, writeRecords } = makeRecordWrites({
    records: deps.records,
    clock: deps.clock,
    log,
    stallScale,
    recorded,
    stallDue,
    actOnStall,
  });
  const removeIfOrphan = makeOrphanRemoval({
    workflow: deps.workflow,
    records: deps.records,
    describe: deps.pacing?.describe ?? UNPACED,
    log,
    note,
    graceMs: (deps.orphanGraceSeconds ?? 300) * 1000,
    ...(deps.archiveLogs ? { archiveLogs: deps.archiveLogs } : {}),
  });
  return {
    deps,
    clock: deps.clock,
    workflow: deps.workflow,
    admittedSuspendedGraceSeconds: deps.admittedSuspendedGraceSeconds,
    healthOptions: { ...DEFAULT_POD_HEALTH, ...deps.podHealth },
    answers,
    log,
    note,
    beaten,
    stallDue,
    heartbeatDue,
    progressChange,
    removeIfOrphan,
    recorded,
    listed: new Map(),
    betweenPasses: emptyReport(),
    sweptAt: Number.NEGATIVE_INFINITY,
    sweepsEveryMs: (deps.sweepsEverySeconds ?? 0) * 1000,
    queuedBefore: new Map(),
    watchFailed: new Map(),
    heartbeat,
    inSendOrder,
    writeRecords,
  };
}

/** listJobs → interpret and answer each job → heartbeats → writeRecords, per cluster; then bookkeeping. */
async function tick(r: Reconciling, tickOpts?: TickOptions): Promise<TickReport> {
  const { remainingMs, ...opts } = tickOpts ?? {};
  // What was answered between passes counts in this pass's report.
  const report = r.betweenPasses;
  r.betweenPasses = emptyReport();
  const sweeping = startSweeps(r, report, opts);
  const pass: Pass = {
    report,
    live: new Set(),
    waitingTokens: new Set(),
    queuedNow: new Map(),
    listedAll: true,
    heartbeats: {
      throttled: false,
      ...(remainingMs ? { outOfTime: () => remainingMs() < HEARTBEAT_RESERVE_MS } : {}),
    },
    deferred: 0,
  };
  // Clusters in parallel: a slow or unreachable cluster does not delay the others' answers.
  await Promise.all(r.deps.clusters().map((cluster) => reconcileCluster(r, cluster, pass, opts)));
  if (pass.deferred > 0)
    r.log({
      level: 'WARN',
      msg: 'heartbeats left for the next pass',
      deferred: pass.deferred,
      reason: pass.heartbeats.throttled ? 'throttled' : 'invocation ending',
    });
  forgetGone(r, pass);
  await sweeping;
  await advanceDrainedSweeps(r, pass, opts);
  return report;
}

/**
 * Sweeps advance beside the job pass, on what the run records said at the last tick: a slow
 * job pass (many jobs, a slow cluster) must not starve the sweeps, nor they it.
 */
function startSweeps(r: Reconciling, report: TickReport, opts?: CallOptions): Promise<void> | undefined {
  const startedAt = r.clock.now().getTime();
  const sweepsDue = startedAt - r.sweptAt >= r.sweepsEveryMs;
  if (sweepsDue) r.sweptAt = startedAt;
  return sweepsDue ? advanceSweeps(r, report, opts) : undefined;
}

async function reconcileCluster(r: Reconciling, cluster: Cluster, pass: Pass, opts?: CallOptions) {
  const listing = await listJobs(r, cluster, pass, opts);
  if (!listing) return;
  const toRecord: PendingRecord[] = [];
  const dueHeartbeats: DueHeartbeat[] = [];
  await reconcileJobs(
    r,
    listing,
    pass,
    { report: pass.report, waitingTokens: pass.waitingTokens, toRecord, dueHeartbeats },
    opts,
  );
  // Answers first (above), then the records, then heartbeats: heartbeats share the SendTask*
  // pacing, and a cold container's (every token due once: 10,000 take over a minute at 150/s) must
  // hold back neither a completion nor a record write. They stop before the invocation ends.
  await r.writeRecords(toRecord, pass.report, opts);
  await sendHeartbeats(r, dueHeartbeats, pass, opts);
}

/** The cluster's jobs, gates and pods; undefined (counted, logged) when the cluster is unreachable. */
async function listJobs(
  r: Reconciling,
  cluster: Cluster,
  pass: Pass,
  opts?: CallOptions,
): Promise<ClusterListing | undefined> {
  let apis: JobApi[];
  let gates: K8sObject[];
  let pods: K8sObject[] | undefined;
  let jobLists: K8sObject[][];
  try {
    apis = await cluster.jobApis();
    [pods, ...jobLists] = await Promise.all([
      listPods(r, cluster.name, cluster.gateway, opts),
      ...apis.map((api) => cluster.gateway.listManagedJobs(api, opts)),
    ]);
    // Gates only where Gantry's jobs are: one LIST per namespace of the listed jobs, never other
    // tenants' Workloads (with their pod templates) across the cluster.
    const namespaces = [...new Set(jobLists.flat().map((j) => j.metadata.namespace ?? 'default'))];
    gates = namespaces.length === 0 ? [] : await cluster.gateway.listAdmissionGates(opts, { namespaces });
  } catch (err) {
    // One unreachable cluster must not stop the others; its runs are looked at next tick
    // (and the state machine's heartbeat fallback covers a long outage).
    pass.listedAll = false;
    pass.report.errors++;
    r.log({ level: 'ERROR', msg: 'cluster unreachable', cluster: cluster.name, error: String(err) });
    return undefined;
  }
  // Between passes the watch needs only each job's watched form (wake.ts), not the listed object.
  const jobs = new Map(jobLists.flat().map((job) => [jobKey(job), watchedForm(job)]));
  for (const gone of vanishedSince(r.listed.get(cluster.name), jobs))
    await answerVanished(r, gone, tokensOf(gone), pass.report, opts);
  r.listed.set(cluster.name, { cluster: cluster.name, gateway: cluster.gateway, apis, jobs });
  const work = apis.flatMap((api, i) => (jobLists[i] ?? []).map((job) => ({ api, job })));
  const listing = {
    cluster,
    gateByOwner: indexByOwner(gates),
    podsOfRun: pods === undefined ? undefined : podsByRun(pods),
    work,
  };
  pass.report.jobs += work.length;
  for (const { job } of work) pass.live.add(job.metadata.labels?.[LABEL.runId] ?? '');
  return listing;
}

/** Each listed job interpreted and its tokens answered (reconcile-job.ts); counts its sweep's queued trials. */
async function reconcileJobs(
  r: Reconciling,
  listing: ClusterListing,
  pass: Pass,
  sinks: JobSinks,
  opts?: CallOptions,
) {
  const { cluster, gateByOwner, podsOfRun } = listing;
  await mapLimit(listing.work, 32, async ({ api, job }) => {
    try {
      const runId = job.metadata.labels?.[LABEL.runId] ?? '';
      // Only this attempt's pods: a pod of an earlier attempt may linger (Terminating on a lost node).
      const attempt = attemptOf(job);
      const runPods = podsOfRun?.get(runId)?.filter((p) => attemptOf(p) === attempt) ?? [];
      const at: JobAt = {
        cluster: cluster.name,
        workloadGraceSeconds: cluster.kueueWorkloadGraceSeconds,
        gateway: cluster.gateway,
        api,
        job,
        gates: gateByOwner.get(job.metadata.uid ?? '') ?? [],
        pods: podsOfRun === undefined ? undefined : runPods,
      };
      const view = await reconcileJob(r, at, sinks, opts);
      const sweepId = job.metadata.labels?.[LABEL.sweepId];
      if (sweepId && waitsForQuota(view)) pass.queuedNow.set(sweepId, (pass.queuedNow.get(sweepId) ?? 0) + 1);
    } catch (err) {
      pass.report.errors++;
      r.log({
        level: 'ERROR',
        msg: 'reconcile failed',
        runId: job.metadata.labels?.[LABEL.runId],
        error: String(err),
      });
    }
  });
}

/** The due heartbeats, longest since their phase first, until throttled or out of time. */
async function sendHeartbeats(r: Reconciling, dueHeartbeats: DueHeartbeat[], pass: Pass, opts?: CallOptions) {
  await mapLimit(r.inSendOrder(dueHeartbeats), 32, async (due) => {
    try {
      if (!(await r.heartbeat(due, pass.report, pass.heartbeats, opts))) pass.deferred++;
    } catch (err) {
      pass.report.errors++;
      r.log({ level: 'ERROR', msg: 'heartbeat failed', runId: due.runId, error: String(err) });
    }
  });
}

/** Forgets the runs whose jobs are gone, and (after a pass without errors) the tokens nobody waits on. */
function forgetGone(r: Reconciling, pass: Pass) {
  for (const runId of r.recorded.keys()) if (!pass.live.has(runId)) r.recorded.delete(runId);
  for (const runId of r.stallDue.keys()) if (!pass.live.has(runId)) r.stallDue.delete(runId);
  if (pass.report.errors === 0)
    for (const token of r.beaten.keys()) if (!pass.waitingTokens.has(token)) r.beaten.delete(token);
}

/**
 * Advances the sweeps whose last trial waiting for quota was admitted (sweep-queue.ts). Only a
 * pass that listed every cluster knows that no trial of a sweep waits any more.
 */
async function advanceDrainedSweeps(r: Reconciling, pass: Pass, opts?: CallOptions) {
  if (!pass.listedAll) return;
  const drained = drainedSweeps(r.queuedBefore, pass.queuedNow);
  r.queuedBefore = pass.queuedNow;
  const advanceSweep = r.deps.advanceSweep;
  if (!advanceSweep) return;
  await mapLimit(drained, 4, async (sweepId) => {
    try {
      await advanceSweep(sweepId, opts);
      pass.report.sweeps++;
    } catch (err) {
      pass.report.errors++;
      r.log({ level: 'ERROR', msg: 'sweep not advanced after admission', sweepId, error: String(err) });
    }
  });
}

/**
 * Gantry's pods on one cluster: one paginated LIST by label. A cluster whose RBAC does not let
 * Gantry list pods (an install from before pod health) is reconciled from the jobs alone; any
 * other failure makes the cluster unreachable for this tick, like a failed job LIST.
 */
async function listPods(
  r: Reconciling,
  cluster: string,
  gateway: ClusterGateway,
  opts?: CallOptions,
): Promise<K8sObject[] | undefined> {
  try {
    return await gateway.listPods(MANAGED_SELECTOR, opts);
  } catch (err) {
    if (!(err instanceof ClusterAccessDeniedError)) throw err;
    r.log({
      level: 'WARN',
      msg: 'pods not listed: health after admission is off',
      cluster,
      error: String(err),
    });
    return undefined;
  }
}

async function advanceSweeps(r: Reconciling, report: TickReport, opts?: CallOptions) {
  if (!r.deps.sweeps) return;
  try {
    const swept = await r.deps.sweeps.advanceActive(opts);
    report.sweeps = swept.sweeps;
    report.errors += swept.errors;
  } catch (err) {
    report.errors++;
    r.log({ level: 'ERROR', msg: 'sweeps not advanced', error: String(err) });
  }
}

/**
 * Between passes, a finished job's waits answered from its watch event (wake.ts `actionFor`
 * 'answer'): a Complete job succeeds whatever its pods and its Workload say, so the answer needs
 * no pass over every job. Counted in the next pass's report. False when an answer failed (logged;
 * the next pass answers it).
 */
async function answerFromWatch(
  r: Reconciling,
  c: Listed,
  api: JobApi,
  job: K8sObject,
  opts?: CallOptions,
): Promise<boolean> {
  const now = r.clock.now();
  const view = toRunPhase(job);
  const annotations = job.metadata.annotations ?? {};
  try {
    for (const [stage, key] of TOKEN_KEYS) {
      const token = annotations[key];
      const decision = decide(stage, view, { now });
      if (!token || decision.kind === 'wait') continue;
      await answer(
        r,
        { cluster: c.cluster, gateway: c.gateway, api, job, view, now },
        stage,
        key,
        token,
        decision,
        r.betweenPasses,
        opts,
      );
    }
    return true;
  } catch (err) {
    r.log({
      level: 'ERROR',
      msg: 'answer between passes failed; the next pass answers',
      runId: job.metadata.labels?.[LABEL.runId],
      error: String(err),
    });
    return false;
  }
}

/**
 * Between passes: wait up to `ms`, ended early ('changed') when a Gantry job changes in a way the
 * next pass acts on — watched from the last pass's LISTs (wake.ts). Before any pass, or on
 * clusters that cannot be watched, it waits the whole period.
 */
function waitForJobChange(r: Reconciling, ms: number, opts?: CallOptions): Promise<WakeReason> {
  return waitForChange(r.listed.values(), ms, {
    ...(opts?.signal ? { signal: opts.signal } : {}),
    answer: (c, api, job) => answerFromWatch(r, c, api, job, opts),
    vanished: (_c, _api, job) => answerVanished(r, job, tokensOf(job), r.betweenPasses, opts),
    onError: (cluster, err) => {
      // Every failure counts; a line at most once a minute per cluster, with how many it stands for.
      const nowMs = r.clock.now().getTime();
      const seen = r.watchFailed.get(cluster) ?? { loggedAt: Number.NEGATIVE_INFINITY, unlogged: 0 };
      seen.unlogged++;
      r.watchFailed.set(cluster, seen);
      if (nowMs - seen.loggedAt < WATCH_FAILURE_LOG_EVERY_MS) return;
      r.log({
        level: 'WARN',
        msg: 'jobs not watched between passes: answers wait for the next pass',
        cluster,
        failures: seen.unlogged,
        error: String(err),
      });
      seen.loggedAt = nowMs;
      seen.unlogged = 0;
    },
  });
}

/** Every gate of each owner: a job under Kueue with a gang runtime has a Workload and a PodGroup. */
function indexByOwner(gates: K8sObject[]): Map<string, K8sObject[]> {
  const byOwner = new Map<string, K8sObject[]>();
  for (const gate of gates) {
    for (const owner of gate.metadata.ownerReferences ?? []) {
      const list = byOwner.get(owner.uid);
      if (list === undefined) byOwner.set(owner.uid, [gate]);
      else list.push(gate);
    }
  }
  return byOwner;
}
