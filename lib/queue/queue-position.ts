import type { GantryConfig } from '../config.ts';
import { makeGetRun } from '../intake/runs.ts';
import type { Caller } from '../intake/tenancy.ts';
import type { CallOptions, Clock, ClusterGateway } from '../ports.ts';
import { jobGpus } from '../run/attempts.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { StateTable } from '../state/table.ts';
import {
  type AheadRun,
  type DurationHistory,
  durationHistory,
  estimateStart,
  type QueueingStrategy,
  type RunningJob,
  type StartEstimate,
} from './estimate.ts';
import type { PendingWorkloads } from './pending.ts';
import {
  currentJobName,
  currentQueue,
  gantryLine,
  positionFromGantry,
  positionFromKueue,
  type QueuePositionView,
  sameQueue,
} from './position.ts';

/** Pending runs of a team read for Gantry's view (one query page of its Pending index partition). */
export const PENDING_READ = 500;
/** Running runs of a team read for the start estimate (one query page of its Running index partition). */
export const RUNNING_READ = 500;

/** The team's newest Succeeded runs read for the history of each model's training time. */
export const HISTORY_READ = 200;
/** At most this many of one model's newest completed runs make its history. */
export const HISTORY_RUNS = 20;

/** Seconds the run's last attempt trained: from its last move into Running to the transition after. */
export function trainedSeconds(record: Pick<RunRecord, 'transitions'>): number | undefined {
  const t = record.transitions;
  for (let i = t.length - 1; i >= 0; i--) {
    if (t[i]?.phase !== 'Running') continue;
    const end = t[i + 1]?.at;
    if (end === undefined) return undefined;
    const s = (Date.parse(end) - Date.parse(t[i]?.at as string)) / 1000;
    return Number.isFinite(s) && s >= 0 ? s : undefined;
  }
  return undefined;
}

/** Each model's history (its newest completed runs' training times) from the team's Succeeded runs, newest first. */
export function modelHistories(succeeded: readonly RunRecord[]): Map<string, DurationHistory> {
  const byModel = new Map<string, number[]>();
  for (const r of succeeded) {
    const s = trainedSeconds(r);
    if (s === undefined) continue;
    const xs = byModel.get(r.spec.request.modelName) ?? [];
    if (xs.length < HISTORY_RUNS) xs.push(s);
    byModel.set(r.spec.request.modelName, xs);
  }
  const out = new Map<string, DurationHistory>();
  for (const [model, xs] of byModel) {
    const h = durationHistory(xs);
    if (h) out.set(model, h);
  }
  return out;
}

/** The GPUs of the run's current attempt (an elastic fallback may have asked for fewer nodes). */
export function attemptGpus(record: RunRecord): number {
  const numNodes = record.attempts?.at(-1)?.numNodes ?? record.spec.request.numNodes;
  return jobGpus({ numNodes, resourcesPerNode: record.spec.request.resourcesPerNode });
}

/** When the run last went Running (its current job's start), else undefined. */
function runningSince(record: RunRecord): string | undefined {
  for (let i = record.transitions.length - 1; i >= 0; i--) {
    if (record.transitions[i]?.phase === 'Running') return record.transitions[i]?.at;
  }
  return undefined;
}

/**
 * What the estimate's inputs count in, against the wall clock it answers in (both 1 on AWS). The
 * embedded default compresses time: the state machine enforces deadlines `deadlines` times faster
 * (GANTRY_STALL_TIME_SCALE) and the cluster simulator's trainings report ETAs in its own seconds,
 * `eta` of them a wall second (the cluster's `clockScale` in the configuration).
 */
export interface TimeScales {
  deadlines: number;
  eta: number;
}
const WALL: TimeScales = { deadlines: 1, eta: 1 };

/** A running (or admitted) run as the estimate sees it: its GPUs and what its progress says. */
export function runningJob(
  record: RunRecord,
  now: Date,
  history?: ReadonlyMap<string, DurationHistory>,
  scales: TimeScales = WALL,
): RunningJob {
  const since = record.phase === 'Running' ? runningSince(record) : undefined;
  const runningSeconds = since === undefined ? 0 : Math.max(0, (now.getTime() - Date.parse(since)) / 1000);
  const deadline = record.spec.request.runDeadlineSeconds / scales.deadlines;
  const job: RunningJob = {
    gpus: attemptGpus(record),
    runningSeconds,
    deadlineLeftSeconds: Math.max(0, deadline - runningSeconds),
  };
  // An ETA reported a while ago: what is left is less by the time since (never below 0).
  if (record.progress?.etaSeconds !== undefined) {
    const reported = record.progress.updatedAt ? Date.parse(record.progress.updatedAt) : Number.NaN;
    const age = Number.isFinite(reported) ? Math.max(0, (now.getTime() - reported) / 1000) : 0;
    job.etaSeconds = Math.max(0, record.progress.etaSeconds / scales.eta - age);
  }
  if (record.progress?.percent !== undefined) job.percent = record.progress.percent;
  const h = history?.get(record.spec.request.modelName);
  if (h) job.history = h;
  return job;
}

/** A run waiting ahead: its GPUs, its deadline and, when known, how long its model's completed runs trained. */
export function aheadRun(
  record: RunRecord,
  history?: ReadonlyMap<string, DurationHistory>,
  scales: TimeScales = WALL,
): AheadRun {
  const h = history?.get(record.spec.request.modelName);
  return {
    gpus: attemptGpus(record),
    deadlineSeconds: record.spec.request.runDeadlineSeconds / scales.deadlines,
    ...(h ? { history: h } : {}),
  };
}

export interface QueuePositionDeps {
  records: RunRecords;
  config: GantryConfig;
  table: Pick<StateTable, 'query'>;
  gateway: (
    cluster: string,
  ) => Promise<
    Pick<ClusterGateway, 'pendingWorkloads' | 'queueGpuQuota'> &
      Partial<Pick<ClusterGateway, 'listAdmissionGates'>>
  >;
  clock: Clock;
  /**
   * Estimate durations nothing reports from the training times of the model's completed runs
   * (default true); false: from deadlines only (the replay bench's before).
   */
  history?: boolean;
  /** The ClusterQueues' queueing strategy the estimate assumes (default BestEffortFIFO, Kueue's default). */
  queueingStrategy?: QueueingStrategy;
  /** How many times faster than the wall the state machine enforces deadlines (default 1, AWS). */
  deadlineTimeScale?: number;
}

/**
 * `GET /v1/runs/{id}/queue`: a pending run's place in its Kueue LocalQueue — from Kueue's
 * visibility API where the cluster serves it, else from Gantry's own view of the team's pending
 * runs (and the answer says which, and why).
 */
export function makeGetQueuePosition(deps: QueuePositionDeps) {
  const getRun = makeGetRun(deps);
  /** The scales of a run's cluster: its ETAs in the cluster's clock, its deadlines in the state machine's. */
  const scalesOf = (record: RunRecord): TimeScales => ({
    deadlines: deps.deadlineTimeScale ?? 1,
    eta: deps.config.clusters.find((c) => c.name === record.spec.cluster)?.clockScale ?? 1,
  });

  async function fromKueue(record: RunRecord, queue: string, opts?: CallOptions): Promise<PendingWorkloads> {
    try {
      const gateway = await deps.gateway(record.spec.cluster);
      if (!gateway.pendingWorkloads) return { served: false, reason: 'this cluster gateway cannot read it' };
      return await gateway.pendingWorkloads(record.spec.namespace, queue, opts);
    } catch (err) {
      // The cluster unreachable: Gantry's view still answers.
      return { served: false, reason: `the cluster did not answer (${(err as Error).message})` };
    }
  }

  async function teamIn(
    team: string,
    phase: 'Pending' | 'Running',
    opts?: CallOptions,
  ): Promise<RunRecord[]> {
    const page = await deps.table.query<RunRecord>(
      'byPhase',
      `${team}#run#${phase}`,
      { limit: phase === 'Pending' ? PENDING_READ : RUNNING_READ, descending: false },
      opts,
    );
    return page.items;
  }
  const teamPending = (team: string, opts?: CallOptions) => teamIn(team, 'Pending', opts);

  /** The team's models' training-time histories (one query page of its Succeeded runs, newest first). */
  async function histories(team: string, opts?: CallOptions): Promise<Map<string, DurationHistory>> {
    if (deps.history === false) return new Map();
    const page = await deps.table.query<RunRecord>(
      'byPhase',
      `${team}#run#Succeeded`,
      { limit: HISTORY_READ, descending: true },
      opts,
    );
    return modelHistories(page.items);
  }

  /**
   * Gantry's view's priorities: the `spec.priority` Kueue gave each Workload in the run's namespace
   * (the value of the WorkloadPriorityClass the run names; 0 without one), by the job that owns it.
   * One LIST of the namespace's Workloads, with the RBAC the reconciler already has; a run whose
   * Workload is not listed (not created yet, not readable) counts as Kueue's default, 0.
   */
  async function priorities(record: RunRecord, opts?: CallOptions): Promise<Map<string, number>> {
    const byJob = new Map<string, number>();
    try {
      const gateway = await deps.gateway(record.spec.cluster);
      const gates = (await gateway.listAdmissionGates?.(opts, { namespaces: [record.spec.namespace] })) ?? [];
      for (const g of gates) {
        const priority = (g.spec as { priority?: unknown } | undefined)?.priority;
        if (g.kind !== 'Workload' || typeof priority !== 'number') continue;
        for (const o of g.metadata.ownerReferences ?? []) byJob.set(o.name, priority);
      }
    } catch {
      // Not readable: every run counts as priority 0, by when it started waiting.
    }
    return byJob;
  }

  /**
   * The start estimate: the team's runs holding the LocalQueue's GPUs (Running, or Pending and
   * admitted), and the runs ahead (`ahead`, in line order).
   */
  async function estimate(
    record: RunRecord,
    queue: string,
    pending: readonly RunRecord[],
    ahead: readonly AheadRun[],
    now: Date,
    history: ReadonlyMap<string, DurationHistory>,
    opts?: CallOptions,
  ): Promise<StartEstimate | undefined> {
    const running = await teamIn(record.spec.request.team, 'Running', opts);
    const holding = [
      ...running.filter((r) => sameQueue(record, r)),
      ...pending.filter((r) => r.admission?.state === 'Admitted' && sameQueue(record, r)),
    ];
    let quotaGpus: number | undefined;
    try {
      const gateway = await deps.gateway(record.spec.cluster);
      quotaGpus = await gateway.queueGpuQuota?.(record.spec.namespace, queue, opts);
    } catch {
      // Not readable (not allowed, the cluster down): the estimate assumes one and says so.
      quotaGpus = undefined;
    }
    const found = estimateStart({
      ...(quotaGpus !== undefined ? { quotaGpus } : {}),
      running: holding.map((r) => runningJob(r, now, history, scalesOf(r))),
      ahead,
      gpus: attemptGpus(record),
      ...(deps.queueingStrategy ? { strategy: deps.queueingStrategy } : {}),
    });
    if (!found) return undefined;
    return { ...found, basis: `${found.basis}; only the team's Gantry runs in ${queue} are seen running` };
  }

  return async (
    input: { caller: Caller; runId: unknown },
    opts?: CallOptions,
  ): Promise<QueuePositionView> => {
    const record = await getRun(input, opts);
    const now = deps.clock.now();
    const base = { runId: record.runId, phase: record.phase, asOf: now.toISOString() };
    if (record.phase !== 'Pending') {
      return { ...base, queued: false, message: `the run is ${record.phase}: it is not waiting in a queue` };
    }
    if (record.admission?.state === 'Admitted') {
      return { ...base, queued: false, message: 'Kueue admitted the run: its pods are starting' };
    }
    const queue = currentQueue(record);
    if (queue === undefined) {
      return {
        ...base,
        queued: false,
        message: 'the run names no Kueue queue: its gang scheduler has no queue position to report',
      };
    }
    const kueue = await fromKueue(record, queue, opts);
    const pending = await teamPending(record.spec.request.team, opts);
    const history = await histories(record.spec.request.team, opts);
    const withEstimate = async (view: QueuePositionView, ahead: AheadRun[]): Promise<QueuePositionView> => {
      const e = await estimate(record, queue, pending, ahead, now, history, opts);
      return e ? { ...view, estimate: e } : view;
    };
    if (kueue.served) {
      const found = positionFromKueue(record, kueue.items, now);
      if (found) {
        // The workloads ahead in Kueue's order: the team's runs by their job, the others of unknown size.
        const byJob = new Map(pending.map((r) => [currentJobName(r), r]));
        const mine = (found.position ?? 1) - 1;
        const ahead = kueue.items
          .filter((i) => i.positionInLocalQueue < mine)
          .sort((a, b) => a.positionInLocalQueue - b.positionInLocalQueue)
          .map((i) => {
            const r = i.ownerName === undefined ? undefined : byJob.get(i.ownerName);
            return r ? aheadRun(r, history, scalesOf(r)) : {};
          });
        return withEstimate(found, ahead);
      }
    }
    const why = kueue.served
      ? `Kueue (${kueue.apiVersion}) does not list the run's job as pending in ${queue} yet (its Workload is being created or admitted)`
      : kueue.reason;
    const byJob = await priorities(record, opts);
    const priorityOf = (r: RunRecord) => byJob.get(currentJobName(r) ?? '');
    const line = gantryLine(record, pending, priorityOf);
    const index = line.findIndex((r) => r.runId === record.runId);
    return withEstimate(
      positionFromGantry(
        record,
        pending,
        now,
        `${why}; this counts only the team's Gantry runs in ${queue}, by their Workload's priority (${byJob.size > 0 ? 'read from Kueue' : 'none read: all 0'}), then by when their job was created — other workloads in the LocalQueue and its ClusterQueue are not seen`,
        priorityOf,
      ),
      line.slice(0, index).map((r) => aheadRun(r, history, scalesOf(r))),
    );
  };
}

export type GetQueuePosition = ReturnType<typeof makeGetQueuePosition>;
