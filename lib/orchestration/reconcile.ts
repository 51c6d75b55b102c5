import { mapLimit } from '../concurrency.ts';
import { AwsUnavailableError, ClusterAccessDeniedError, NotFoundError } from '../errors.ts';
import {
  type JobNote,
  jobEvent,
  noteForDecision,
  orphanNote,
  preemptionNote,
  stallNote,
} from '../observability/events.ts';
import type { CallOptions, Clock, ClusterGateway, JobApi, WorkflowEngine } from '../ports.ts';
import { PREEMPTED } from '../run/phases.ts';
import { openStall, type RecordChange } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import { attemptOf } from '../trainjob/disruption.ts';
import { ANNOTATION, LABEL, MANAGED_SELECTOR } from '../trainjob/labels.ts';
import {
  DEFAULT_POD_HEALTH,
  type PodHealth,
  type PodHealthOptions,
  podHealth,
  podsByRun,
  withPodHealth,
} from '../trainjob/pod-health.ts';
import { type JobView, toRunPhase } from '../trainjob/status.ts';
import type { K8sObject } from '../trainjob/types.ts';
import { decide, decideMissingWorkload, decideStall, failureCause, type Stage } from './decide.ts';
import { refFromJob } from './job-ref.ts';
import { type Pacer, UNPACED } from './pacing.ts';
import { withDisruptionEvidence } from './pod-events.ts';

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
  log?: (line: Record<string, unknown>) => void;
}

export interface TickReport {
  jobs: number;
  answered: number;
  failed: number;
  heartbeats: number;
  orphansDeleted: number;
  cancelled: number;
  recordsUpdated: number;
  /** Runs found stalled this tick (their `stallAfterSeconds` passed without a report): RunsStalled. */
  stalled: number;
  sweeps: number;
  errors: number;
}

/** A report with every count at zero. */
export function emptyReport(): TickReport {
  return {
    jobs: 0,
    answered: 0,
    failed: 0,
    heartbeats: 0,
    orphansDeleted: 0,
    cancelled: 0,
    recordsUpdated: 0,
    stalled: 0,
    sweeps: 0,
    errors: 0,
  };
}

/** Half the `HeartbeatSeconds` (600) of the state machine's two waits: a missed tick or two still keeps them alive. */
export const HEARTBEAT_EVERY_SECONDS = 300;

/** How soon a stalled run that asks for a restart is looked at again when its job has no completion token yet. */
const RESTART_RECHECK_MS = 10_000;

/** A waiting token whose heartbeat is due this tick, with what clearing it from its job needs. */
interface DueHeartbeat {
  token: string;
  /** The job annotation that holds the token. */
  key: string;
  stage: Stage;
  gateway: ClusterGateway;
  api: JobApi;
  job: K8sObject;
  runId: string | undefined;
  /** The tick's time (ms): the token counts as beaten then. */
  at: number;
}

/** A record change the tick will write (after its job pass, batched). */
interface PendingRecord {
  runId: string;
  change: RecordChange;
  /** What `recorded` remembers once written; absent for a stall check alone. */
  digest?: string;
  /** The job runs: check the run for a stall on the record read (and restart it when it asks). */
  stall?: StallContext;
  /** A preemption: called when the write moved the record from Running back to Pending (a Kubernetes Event). */
  onPreempted?: () => Promise<void>;
}

/** A running job whose run's record the tick reads: what acting on a stall needs. */
interface StallContext {
  cluster: string;
  gateway: ClusterGateway;
  api: JobApi;
  job: K8sObject;
  /** The waiting completion token, if any: failed (InfrastructureFailureError) on restartOnStall. */
  token?: string;
}

const TOKEN_KEYS: Array<[Stage, string]> = [
  ['admission', ANNOTATION.admissionToken],
  ['completion', ANNOTATION.completionToken],
];

/**
 * One reconciler tick: per cluster, one LIST per job kind, one of admission gates (Kueue
 * Workloads / PodGroups) and one of Gantry's pods (health after admission: image pulls, config
 * errors, crash loops, unschedulable gangs) — never one call per run — then answer, fail or heartbeat each waiting
 * token, write progress into run records, and delete jobs whose execution has ended.
 * Idempotent: every decision is recomputed from the cluster each tick, and a token that was
 * already answered is simply stale (SendTask* reports it and the annotation is cleared).
 */
export function makeReconciler(deps: ReconcilerDeps) {
  const graceMs = (deps.orphanGraceSeconds ?? 300) * 1000;
  const healthOptions: PodHealthOptions = { ...DEFAULT_POD_HEALTH, ...deps.podHealth };
  const log = deps.log ?? (() => undefined);
  /**
   * What was last written to each run's record, while this reconciler lives (a warm Lambda
   * keeps it between ticks). Only an optimisation: an unchanged job costs no store call, and a
   * cold start writes each record once more, which changes nothing.
   */
  const recorded = new Map<string, string>();
  /**
   * When this reconciler last heartbeated each waiting token (ms). Only ever set after a heartbeat
   * was delivered, so it can make a token's heartbeat late by at most one interval, never skip it:
   * a cold start (an empty map) heartbeats every token once, then only those that are due.
   */
  const beaten = new Map<string, number>();
  const answers = deps.pacing?.answers ?? UNPACED;
  const describe = deps.pacing?.describe ?? UNPACED;
  const heartbeatEveryMs = (deps.heartbeatEverySeconds ?? HEARTBEAT_EVERY_SECONDS) * 1000;
  /**
   * Stall detection (decideStall): per running job, the time (ms) its record must next be read,
   * learnt from the last read; Infinity when the run has no detection. A job not in the map is read
   * at its next tick (a cold start reads every running job's record once, as it writes them anyway);
   * a job that is not due costs the store nothing.
   */
  const stallDue = new Map<string, number>();
  const stallScale = deps.stallTimeScale ?? 1;
  /** Clusters whose RBAC refused an Event: no more tries there while this reconciler lives. */
  const eventsRefused = new Set<string>();
  let eventSeq = 0;

  /**
   * A Kubernetes Event on the job for what Gantry decided (lib/observability/events.ts). Best
   * effort: a failure is logged and never fails the tick or the decision it is about.
   */
  async function note(
    cluster: string,
    gateway: ClusterGateway,
    job: K8sObject,
    what: JobNote | undefined,
    opts?: CallOptions,
  ) {
    if (!what || !gateway.createEvent || eventsRefused.has(cluster)) return;
    const now = deps.clock.now();
    const suffix = `${now.getTime().toString(16)}${(eventSeq++ & 0xffff).toString(16).padStart(4, '0')}`;
    try {
      await gateway.createEvent(jobEvent(job, what, now, suffix), opts);
    } catch (err) {
      if (err instanceof ClusterAccessDeniedError) eventsRefused.add(cluster);
      log({
        level: 'WARN',
        msg: 'job event not created',
        cluster,
        runId: job.metadata.labels?.[LABEL.runId],
        reason: what.reason,
        error: String(err),
      });
    }
  }
  // Each token has its own phase in the heartbeat interval (a hash of the token) and is due once
  // per interval, at the first tick past its phase: N waiting tokens cost about N × tick/interval
  // heartbeats a tick, spread evenly, and two heartbeats of a token are at most an interval and a
  // tick apart.
  const windowOf = (token: string, ms: number) =>
    Math.floor((ms + heartbeatEveryMs * share(token)) / heartbeatEveryMs);
  const heartbeatDue = (token: string, nowMs: number): boolean => {
    const last = beaten.get(token);
    return last === undefined || windowOf(token, nowMs) > windowOf(token, last);
  };

  async function tick(opts?: CallOptions): Promise<TickReport> {
    const report = emptyReport();
    // Sweeps advance beside the job pass, on what the run records said at the last tick: a slow
    // job pass (many jobs, a slow cluster) must not starve the sweeps, nor they it.
    const sweeping = advanceSweeps(report, opts);
    const live = new Set<string>();
    const waitingTokens = new Set<string>();
    // Set when Step Functions throttles a heartbeat: the rest of this tick's heartbeats wait for the
    // next tick (they stay due); answers still go out.
    const throttle = { heartbeats: false };
    // Clusters in parallel: a slow or unreachable cluster does not delay the others' answers.
    await Promise.all(
      deps.clusters().map(async (cluster) => {
        let apis: JobApi[];
        let gates: K8sObject[];
        let pods: K8sObject[] | undefined;
        let jobLists: K8sObject[][];
        try {
          apis = await cluster.jobApis();
          [gates, pods, ...jobLists] = await Promise.all([
            cluster.gateway.listAdmissionGates(opts),
            listPods(cluster.name, cluster.gateway, opts),
            ...apis.map((api) => cluster.gateway.listManagedJobs(api, opts)),
          ]);
        } catch (err) {
          // One unreachable cluster must not stop the others; its runs are looked at next tick
          // (and the state machine's heartbeat fallback covers a long outage).
          report.errors++;
          log({ level: 'ERROR', msg: 'cluster unreachable', cluster: cluster.name, error: String(err) });
          return;
        }
        const gateByOwner = indexByOwner(gates);
        const podsOfRun = pods === undefined ? undefined : podsByRun(pods);
        const work = apis.flatMap((api, i) => (jobLists[i] ?? []).map((job) => ({ api, job })));
        const toRecord: PendingRecord[] = [];
        const dueHeartbeats: DueHeartbeat[] = [];
        report.jobs += work.length;
        for (const { job } of work) live.add(job.metadata.labels?.[LABEL.runId] ?? '');
        await mapLimit(work, 32, async ({ api, job }) => {
          try {
            const runId = job.metadata.labels?.[LABEL.runId] ?? '';
            // Only this attempt's pods: a pod of an earlier attempt may linger (Terminating on a lost node).
            const attempt = attemptOf(job);
            const runPods = podsOfRun?.get(runId)?.filter((p) => attemptOf(p) === attempt) ?? [];
            await reconcileJob(
              cluster.name,
              cluster.kueueWorkloadGraceSeconds,
              cluster.gateway,
              api,
              job,
              gateByOwner.get(job.metadata.uid ?? ''),
              podsOfRun === undefined ? undefined : runPods,
              report,
              waitingTokens,
              toRecord,
              dueHeartbeats,
              opts,
            );
          } catch (err) {
            report.errors++;
            log({
              level: 'ERROR',
              msg: 'reconcile failed',
              runId: job.metadata.labels?.[LABEL.runId],
              error: String(err),
            });
          }
        });
        // Heartbeats after every answer of the cluster: they share the SendTask* pacing, and a
        // cold start (every token due once) must not hold back a completion behind thousands.
        await mapLimit(dueHeartbeats, 32, async (due) => {
          try {
            await heartbeat(due, report, throttle, opts);
          } catch (err) {
            report.errors++;
            log({ level: 'ERROR', msg: 'heartbeat failed', runId: due.runId, error: String(err) });
          }
        });
        await writeRecords(toRecord, report, opts);
      }),
    );
    for (const runId of recorded.keys()) if (!live.has(runId)) recorded.delete(runId);
    for (const runId of stallDue.keys()) if (!live.has(runId)) stallDue.delete(runId);
    if (report.errors === 0)
      for (const token of beaten.keys()) if (!waitingTokens.has(token)) beaten.delete(token);
    await sweeping;
    return report;
  }

  /**
   * Gantry's pods on one cluster: one paginated LIST by label. A cluster whose RBAC does not let
   * Gantry list pods (an install from before pod health) is reconciled from the jobs alone; any
   * other failure makes the cluster unreachable for this tick, like a failed job LIST.
   */
  async function listPods(
    cluster: string,
    gateway: ClusterGateway,
    opts?: CallOptions,
  ): Promise<K8sObject[] | undefined> {
    try {
      return await gateway.listPods(MANAGED_SELECTOR, opts);
    } catch (err) {
      if (!(err instanceof ClusterAccessDeniedError)) throw err;
      log({
        level: 'WARN',
        msg: 'pods not listed: health after admission is off',
        cluster,
        error: String(err),
      });
      return undefined;
    }
  }

  async function advanceSweeps(report: TickReport, opts?: CallOptions) {
    if (!deps.sweeps) return;
    try {
      const swept = await deps.sweeps.advanceActive(opts);
      report.sweeps = swept.sweeps;
      report.errors += swept.errors;
    } catch (err) {
      report.errors++;
      log({ level: 'ERROR', msg: 'sweeps not advanced', error: String(err) });
    }
  }

  async function reconcileJob(
    cluster: string,
    workloadGraceSeconds: number | undefined,
    gateway: ClusterGateway,
    api: JobApi,
    job: K8sObject,
    gate: K8sObject | undefined,
    pods: unknown[] | undefined,
    report: TickReport,
    waitingTokens: Set<string>,
    toRecord: PendingRecord[],
    dueHeartbeats: DueHeartbeat[],
    opts?: CallOptions,
  ) {
    const now = deps.clock.now();
    const runId = job.metadata.labels?.[LABEL.runId];
    const health = pods === undefined ? undefined : podHealth(pods, now, healthOptions);
    const view = await withDisruptionEvidence(
      gateway,
      withPodHealth(toRunPhase(job, gate), health, job),
      pods,
      job,
      opts,
    );
    const missing =
      workloadGraceSeconds === undefined
        ? undefined
        : decideMissingWorkload(job, view, { cluster, now, graceSeconds: workloadGraceSeconds });
    const annotations = job.metadata.annotations ?? {};
    let waiting = false;
    for (const [stage, key] of TOKEN_KEYS) {
      const token = annotations[key];
      if (!token) continue;
      waiting = true;
      waitingTokens.add(token);
      const decision =
        missing ??
        decide(stage, view, {
          now,
          ...(deps.admittedSuspendedGraceSeconds !== undefined
            ? { admittedSuspendedGraceSeconds: deps.admittedSuspendedGraceSeconds }
            : {}),
        });
      let delivered: boolean;
      if (decision.kind === 'succeed') {
        await answers.take();
        delivered = await deps.workflow.sendTaskSuccess(
          token,
          refFromJob(cluster, api, job, view, now),
          opts,
        );
        report.answered++;
      } else if (decision.kind === 'fail') {
        await answers.take();
        delivered = await deps.workflow.sendTaskFailure(token, decision.error, failureCause(decision), opts);
        report.failed++;
      } else {
        // Still waiting: nothing to answer, and a heartbeat only when this token's is due — sent
        // once the cluster's answers are out (`heartbeat`).
        if (heartbeatDue(token, now.getTime()))
          dueHeartbeats.push({ token, key, stage, gateway, api, job, runId, at: now.getTime() });
        continue;
      }
      beaten.delete(token);
      if (delivered)
        await note(cluster, gateway, job, noteForDecision(stage, decision, runId ?? job.metadata.name), opts);
      // Answered now, or stale: either way nobody waits on this token any more.
      await gateway.annotateJob(
        api,
        job.metadata.namespace ?? 'default',
        job.metadata.name,
        { [key]: null },
        opts,
      );
      if (!delivered) log({ level: 'INFO', msg: 'cleared a stale task token', runId, stage });
    }
    if (runId) {
      const progress = progressChange(runId, job.metadata.name, view, health);
      if (progress?.change.reason === PREEMPTED) {
        progress.onPreempted = () => note(cluster, gateway, job, preemptionNote(runId, view.message), opts);
      }
      // A running job's record is read when its stall check is due (and on any write).
      if (view.phase !== 'Running') stallDue.delete(runId);
      const due = view.phase === 'Running' && (stallDue.get(runId) ?? 0) <= now.getTime();
      if (progress || due) {
        const token = job.metadata.annotations?.[ANNOTATION.completionToken];
        toRecord.push({
          ...(progress ?? { runId, change: {} }),
          ...(view.phase === 'Running'
            ? { stall: { cluster, gateway, api, job, ...(token ? { token } : {}) } }
            : {}),
        });
      }
    }
    if (!waiting && runId) await removeIfOrphan(cluster, gateway, api, job, runId, now, report, opts);
  }

  /**
   * One due heartbeat. Delivered: the token is beaten for its window. Not delivered (the wait is
   * over: an answer from another writer, an execution stopped): the stale token is cleared from the
   * job. Throttled: the rest of the tick's heartbeats wait for the next tick (they stay due).
   */
  async function heartbeat(
    due: DueHeartbeat,
    report: TickReport,
    throttle: { heartbeats: boolean },
    opts?: CallOptions,
  ) {
    if (throttle.heartbeats) return;
    await answers.take();
    let delivered: boolean;
    try {
      delivered = await deps.workflow.sendTaskHeartbeat(due.token, opts);
    } catch (err) {
      if (!(err instanceof AwsUnavailableError)) throw err;
      if (!throttle.heartbeats) {
        report.errors++;
        log({ level: 'WARN', msg: 'heartbeats paused until the next tick', error: String(err) });
      }
      throttle.heartbeats = true;
      return;
    }
    report.heartbeats++;
    if (delivered) {
      beaten.set(due.token, due.at);
      return;
    }
    beaten.delete(due.token);
    const { job } = due;
    await due.gateway.annotateJob(
      due.api,
      job.metadata.namespace ?? 'default',
      job.metadata.name,
      { [due.key]: null },
      opts,
    );
    log({ level: 'INFO', msg: 'cleared a stale task token', runId: due.runId, stage: due.stage });
  }

  /**
   * What the run's record should learn from this tick (phase Running, a preemption, the admission
   * or pod note, progress, metrics), or undefined when nothing new: unchanged since this
   * reconciler last wrote it (`recorded`), so a steady tick costs the store nothing.
   */
  function progressChange(
    runId: string,
    jobName: string,
    view: JobView,
    health: PodHealth | undefined,
  ): PendingRecord | undefined {
    const change: RecordChange = { ...preemption(view) };
    if (view.phase === 'Running') change.phase = 'Running';
    const problem = health?.problem;
    // Shown also when it fails the run: the note is in the view before the state machine ends it.
    if (problem && (view.phase === 'Running' || view.reason === problem.reason)) {
      // What the pods say (image pull, config, crash loop, scheduling), with the pod's message.
      change.admission = {
        state: view.admission.state,
        reason: problem.reason,
        message: problem.message,
      };
    } else if (view.phase === 'Pending' && (view.admission.reason || view.admission.message)) {
      change.admission = {
        state: view.admission.state,
        ...(view.admission.reason ? { reason: view.admission.reason } : {}),
        ...(view.admission.message ? { message: view.admission.message } : {}),
      };
    }
    if (view.progress) change.progress = view.progress;
    if (view.metrics) change.metrics = view.metrics;
    if (Object.keys(change).length === 0) return undefined;
    // Per job: a run's next attempt (a new job) may say what its last attempt said (Running).
    const digest = `${jobName} ${JSON.stringify(change)}`;
    if (recorded.get(runId) === digest) return undefined;
    return { runId, change, digest };
  }

  /**
   * Write what changed into the run records: one batched read for all of them (100 per request,
   * so a cold tick reads ⌈changes/100⌉ times, not once per run), then a conditional write only
   * for records the change really changes.
   */
  async function writeRecords(pending: PendingRecord[], report: TickReport, opts?: CallOptions) {
    if (pending.length === 0) return;
    let reads: Awaited<ReturnType<RunRecords['getMany']>>;
    try {
      reads = await deps.records.getMany(
        pending.map((p) => p.runId),
        opts,
      );
    } catch (err) {
      report.errors++;
      log({ level: 'ERROR', msg: 'run records not read', runs: pending.length, error: String(err) });
      return;
    }
    await mapLimit(pending, 16, async ({ runId, change, digest, onPreempted, stall }) => {
      const read = reads.get(runId);
      if (!read) {
        // A job without a record (made outside Gantry's intake): nothing to write or to watch.
        if (stall) stallDue.set(runId, Number.POSITIVE_INFINITY);
        return;
      }
      try {
        const now = deps.clock.now();
        const found = stall ? decideStall(read.value, now, stallScale) : undefined;
        const opening = found?.kind === 'stalled' && found.fresh ? found : undefined;
        const full: RecordChange = opening
          ? { ...change, stall: { since: opening.since, lastProgressAt: opening.lastProgressAt } }
          : change;
        const { record, changed } = await deps.records.updateFrom(read, full, opts);
        if (changed) report.recordsUpdated++;
        if (digest !== undefined) recorded.set(runId, digest);
        if (changed && read.value.phase === 'Running' && record.phase === 'Pending') await onPreempted?.();
        if (stall)
          await actOnStall(runId, record, opening !== undefined && changed, stall, now, report, opts);
      } catch (err) {
        report.errors++;
        log({ level: 'ERROR', msg: 'run record not written', runId, error: String(err) });
      }
    });
  }

  /**
   * After a running job's record was read (and written): when its stall is next due, and — for a
   * stall this write opened — a Kubernetes Event and RunsStalled; with restartOnStall, the run's
   * completion wait fails with InfrastructureFailureError (reason Stalled), as any stalled tick
   * finding the token still there does.
   */
  async function actOnStall(
    runId: string,
    record: Parameters<typeof decideStall>[0],
    opened: boolean,
    stall: StallContext,
    now: Date,
    report: TickReport,
    opts?: CallOptions,
  ) {
    const d = decideStall(record, now, stallScale);
    stallDue.set(runId, d.kind === 'off' ? Number.POSITIVE_INFINITY : d.dueAt);
    if (d.kind !== 'stalled') return;
    const fresh = opened && openStall(record)?.since === d.since;
    if (fresh) {
      report.stalled++;
      log({ level: 'WARN', msg: 'run stalled', runId, lastProgressAt: d.lastProgressAt, seconds: d.seconds });
    }
    const restart = d.restart && stall.token !== undefined;
    // Asked to restart, but the completion wait has not stored its token yet (it is between the two
    // waits): look again soon rather than a whole threshold later.
    if (d.restart && !restart)
      stallDue.set(runId, Math.min(d.dueAt, now.getTime() + RESTART_RECHECK_MS / stallScale));
    if (fresh || restart)
      await note(stall.cluster, stall.gateway, stall.job, stallNote(runId, d, restart), opts);
    if (!restart) return;
    const token = stall.token as string;
    try {
      await answers.take();
      const delivered = await deps.workflow.sendTaskFailure(
        token,
        'InfrastructureFailureError',
        JSON.stringify({ reason: 'Stalled', message: d.message }),
        opts,
      );
      report.failed++;
      beaten.delete(token);
      await stall.gateway.annotateJob(
        stall.api,
        stall.job.metadata.namespace ?? 'default',
        stall.job.metadata.name,
        { [ANNOTATION.completionToken]: null },
        opts,
      );
      log({
        level: 'INFO',
        msg: delivered ? 'restarting a stalled run' : 'cleared a stale task token',
        runId,
      });
    } catch (err) {
      // Tried again next tick (the stall stays open and the token on the job).
      stallDue.set(runId, 0);
      throw err;
    }
  }

  async function removeIfOrphan(
    cluster: string,
    gateway: ClusterGateway,
    api: JobApi,
    job: K8sObject,
    runId: string,
    now: Date,
    report: TickReport,
    opts?: CallOptions,
  ) {
    const created = Date.parse(job.metadata.creationTimestamp ?? '');
    if (Number.isFinite(created) && now.getTime() - created < graceMs) return;
    await describe.take();
    const status = await deps.workflow.status(runId, opts);
    if (status === 'RUNNING') return;
    if (status === 'ABORTED') {
      // The record first: if writing it fails, the job stays and the next tick tries both again
      // (deleting first left a run Running for good when the write failed, and let a reader see
      // the job gone before the run was Cancelled). A job without a record is still deleted.
      await deps.records.update(runId, { phase: 'Cancelled', reason: 'Cancelled' }, opts).catch((err) => {
        if (!(err instanceof NotFoundError)) throw err;
      });
      report.cancelled++;
    }
    // Once: a job already being deleted (background propagation) is listed again until it is gone.
    if (!job.metadata.deletionTimestamp) await note(cluster, gateway, job, orphanNote(runId, status), opts);
    await gateway.deleteJob(api, job.metadata.namespace ?? 'default', job.metadata.name, opts);
    report.orphansDeleted++;
    log({ level: 'INFO', msg: 'deleted a job whose execution ended', runId, execution: status ?? 'none' });
  }

  return { tick };
}

/**
 * A running job that Kueue evicted goes back to Pending with reason Preempted (the one backward
 * move the record allows); the state machine keeps waiting for completion while Kueue re-queues it.
 */
function preemption(view: JobView): RecordChange {
  if (view.phase !== 'Pending' || view.reason !== PREEMPTED) return {};
  return { phase: 'Pending', reason: PREEMPTED, ...(view.message ? { message: view.message } : {}) };
}

function indexByOwner(gates: K8sObject[]): Map<string, K8sObject> {
  const byOwner = new Map<string, K8sObject>();
  for (const gate of gates) {
    for (const owner of gate.metadata.ownerReferences ?? []) byOwner.set(owner.uid, gate);
  }
  return byOwner;
}

/** A fixed share in [0, 1) per token (FNV-1a of the token): its phase in the heartbeat interval. */
function share(token: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < token.length; i++) h = Math.imul(h ^ token.charCodeAt(i), 0x01000193);
  return (h >>> 0) / 2 ** 32;
}
