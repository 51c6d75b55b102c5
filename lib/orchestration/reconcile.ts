import { mapLimit } from '../concurrency.ts';
import { ClusterAccessDeniedError } from '../errors.ts';
import { noteForDecision, preemptionNote } from '../observability/events.ts';
import type { CallOptions, Clock, ClusterGateway, JobApi, WorkflowEngine } from '../ports.ts';
import { PREEMPTED } from '../run/phases.ts';
import type { RunRecords } from '../run/records.ts';
import { attemptOf } from '../trainjob/disruption.ts';
import { ANNOTATION, LABEL, MANAGED_SELECTOR } from '../trainjob/labels.ts';
import {
  DEFAULT_POD_HEALTH,
  type PodHealthOptions,
  podHealth,
  podsByRun,
  withPodHealth,
} from '../trainjob/pod-health.ts';
import { type JobView, toRunPhase } from '../trainjob/status.ts';
import type { K8sObject } from '../trainjob/types.ts';
import { type Decision, decide, decideMissingWorkload, failureCause, type Stage } from './decide.ts';
import { type DueHeartbeat, HEARTBEAT_EVERY_SECONDS, makeHeartbeats } from './heartbeats.ts';
import { makeJobNotes } from './job-notes.ts';
import { refFromJob } from './job-ref.ts';
import { makeOrphanRemoval, type OrphanDeps } from './orphans.ts';
import { type Pacer, UNPACED } from './pacing.ts';
import { withDisruptionEvidence } from './pod-events.ts';
import { makeRecordWrites, type PendingRecord } from './record-writes.ts';
import { makeStallActions } from './stall-actions.ts';
import { drainedSweeps, waitsForQuota } from './sweep-queue.ts';
import { emptyReport, type TickReport } from './tick-report.ts';
import { jobKey, type Listed, type WakeReason, waitForChange } from './wake.ts';

export { HEARTBEAT_EVERY_SECONDS } from './heartbeats.ts';
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
  /** Each cluster's jobs as the last pass listed them: what `waitForChange` compares the watch with. */
  const listed = new Map<string, Listed>();
  /** Answers given from the watch since the last pass started (answerFromWatch). */
  let betweenPasses = emptyReport();
  /** When a pass last advanced the sweeps (ms; `sweepsEverySeconds`). */
  let sweptAt = Number.NEGATIVE_INFINITY;
  const sweepsEveryMs = (deps.sweepsEverySeconds ?? 0) * 1000;
  /** Per sweep, its trial jobs the last pass that listed every cluster saw waiting for quota. */
  let queuedBefore = new Map<string, number>();
  /** Clusters whose job watch failed: logged once per reconciler. */
  const watchFailed = new Set<string>();
  const note = makeJobNotes({ clock: deps.clock, log });
  const { heartbeatDue, heartbeat } = makeHeartbeats({
    workflow: deps.workflow,
    answers,
    log,
    everyMs: heartbeatEveryMs,
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
    describe,
    log,
    note,
    graceMs,
    ...(deps.archiveLogs ? { archiveLogs: deps.archiveLogs } : {}),
  });

  async function tick(opts?: CallOptions): Promise<TickReport> {
    // What was answered between passes counts in this pass's report.
    const report = betweenPasses;
    betweenPasses = emptyReport();
    // Sweeps advance beside the job pass, on what the run records said at the last tick: a slow
    // job pass (many jobs, a slow cluster) must not starve the sweeps, nor they it.
    const startedAt = deps.clock.now().getTime();
    const sweepsDue = startedAt - sweptAt >= sweepsEveryMs;
    if (sweepsDue) sweptAt = startedAt;
    const sweeping = sweepsDue ? advanceSweeps(report, opts) : undefined;
    const live = new Set<string>();
    const waitingTokens = new Set<string>();
    const queuedNow = new Map<string, number>();
    let listedAll = true;
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
          listedAll = false;
          report.errors++;
          log({ level: 'ERROR', msg: 'cluster unreachable', cluster: cluster.name, error: String(err) });
          return;
        }
        listed.set(cluster.name, {
          cluster: cluster.name,
          gateway: cluster.gateway,
          apis,
          jobs: new Map(jobLists.flat().map((job) => [jobKey(job), job])),
        });
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
            const view = await reconcileJob(
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
            const sweepId = job.metadata.labels?.[LABEL.sweepId];
            if (sweepId && waitsForQuota(view)) queuedNow.set(sweepId, (queuedNow.get(sweepId) ?? 0) + 1);
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
    // Only a pass that listed every cluster knows that no trial of a sweep waits any more.
    if (listedAll) {
      const drained = drainedSweeps(queuedBefore, queuedNow);
      queuedBefore = queuedNow;
      await advanceDrained(drained, report, opts);
    }
    return report;
  }

  /** Advances the sweeps whose last trial waiting for quota was admitted (sweep-queue.ts). */
  async function advanceDrained(sweepIds: string[], report: TickReport, opts?: CallOptions) {
    const advanceSweep = deps.advanceSweep;
    if (!advanceSweep) return;
    await mapLimit(sweepIds, 4, async (sweepId) => {
      try {
        await advanceSweep(sweepId, opts);
        report.sweeps++;
      } catch (err) {
        report.errors++;
        log({ level: 'ERROR', msg: 'sweep not advanced after admission', sweepId, error: String(err) });
      }
    });
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
  ): Promise<JobView> {
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
      if (decision.kind === 'wait') {
        // Still waiting: nothing to answer, and a heartbeat only when this token's is due — sent
        // once the cluster's answers are out (`heartbeat`).
        if (heartbeatDue(token, now.getTime()))
          dueHeartbeats.push({ token, key, stage, gateway, api, job, runId, at: now.getTime() });
        continue;
      }
      await answer({ cluster, gateway, api, job, view, now }, stage, key, token, decision, report, opts);
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
    return view;
  }

  /** Answers one waiting token of a job with a decision other than 'wait', then clears the token. */
  async function answer(
    at: { cluster: string; gateway: ClusterGateway; api: JobApi; job: K8sObject; view: JobView; now: Date },
    stage: Stage,
    key: string,
    token: string,
    decision: Exclude<Decision, { kind: 'wait' }>,
    report: TickReport,
    opts?: CallOptions,
  ) {
    const { cluster, gateway, api, job } = at;
    const runId = job.metadata.labels?.[LABEL.runId];
    await answers.take();
    let delivered: boolean;
    if (decision.kind === 'succeed') {
      delivered = await deps.workflow.sendTaskSuccess(
        token,
        refFromJob(cluster, api, job, at.view, at.now),
        opts,
      );
      report.answered++;
    } else {
      delivered = await deps.workflow.sendTaskFailure(token, decision.error, failureCause(decision), opts);
      report.failed++;
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

  /**
   * Between passes, a finished job's waits answered from its watch event (wake.ts `actionFor`
   * 'answer'): a Complete job succeeds whatever its pods and its Workload say, so the answer needs
   * no pass over every job. Counted in the next pass's report. False when an answer failed (logged;
   * the next pass answers it).
   */
  async function answerFromWatch(
    c: Listed,
    api: JobApi,
    job: K8sObject,
    opts?: CallOptions,
  ): Promise<boolean> {
    const now = deps.clock.now();
    const view = toRunPhase(job);
    const annotations = job.metadata.annotations ?? {};
    try {
      for (const [stage, key] of TOKEN_KEYS) {
        const token = annotations[key];
        const decision = decide(stage, view, { now });
        if (!token || decision.kind === 'wait') continue;
        await answer(
          { cluster: c.cluster, gateway: c.gateway, api, job, view, now },
          stage,
          key,
          token,
          decision,
          betweenPasses,
          opts,
        );
      }
      return true;
    } catch (err) {
      log({
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
  function waitForJobChange(ms: number, opts?: CallOptions): Promise<WakeReason> {
    return waitForChange(listed.values(), ms, {
      ...(opts?.signal ? { signal: opts.signal } : {}),
      answer: (c, api, job) => answerFromWatch(c, api, job, opts),
      onError: (cluster, err) => {
        if (watchFailed.has(cluster)) return;
        watchFailed.add(cluster);
        log({
          level: 'WARN',
          msg: 'jobs not watched between passes: answers wait for the next pass',
          cluster,
          error: String(err),
        });
      },
    });
  }

  return { tick, waitForJobChange };
}

function indexByOwner(gates: K8sObject[]): Map<string, K8sObject> {
  const byOwner = new Map<string, K8sObject>();
  for (const gate of gates) {
    for (const owner of gate.metadata.ownerReferences ?? []) byOwner.set(owner.uid, gate);
  }
  return byOwner;
}
