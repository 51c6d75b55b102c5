import type { RunRecord } from '../run/record.ts';
import type { StartEstimate } from './estimate.ts';
import type { PendingWorkloadItem } from './pending.ts';

/**
 * Where a pending run stands in its Kueue LocalQueue: from Kueue's visibility API when the cluster
 * serves it (Kueue's own order: priority, then creation, as its queueing strategy has it), else
 * from Gantry's own view (the team's pending runs in the same LocalQueue by priority and by when
 * their job was created). Pure: the use case (queue-position.ts) reads what these take.
 */

export interface QueuePositionView {
  runId: string;
  phase: RunRecord['phase'];
  /** Whether the run waits in a Kueue LocalQueue now. */
  queued: boolean;
  /** The LocalQueue (and namespace) it waits in. */
  queue?: string;
  namespace?: string;
  /** Where the position comes from: Kueue's visibility API, or Gantry's view of the team's runs. */
  source?: 'kueue' | 'gantry';
  /** 1 = next in line, in the LocalQueue. */
  position?: number;
  /** Workloads ahead of it in the LocalQueue. */
  ahead?: number;
  /** 1-based, in the ClusterQueue behind the LocalQueue (Kueue's view only: it sees every tenant). */
  positionInClusterQueue?: number;
  /** Gantry's view: the runs ahead of it (at most 20). */
  aheadRuns?: string[];
  /** One line for people: "#3 in line in demo-queue (2 ahead), from Kueue's visibility API". */
  message: string;
  /** Why the answer is Gantry's view, or what it cannot see. */
  note?: string;
  /** When the run may start (lib/queue/estimate.ts): a range, not a promise, with how it was computed. */
  estimate?: StartEstimate;
  asOf: string;
}

/** The run's current job (its last attempt's): the owner Kueue's Workload names. */
export function currentJobName(record: Pick<RunRecord, 'job' | 'attempts'>): string | undefined {
  return record.job?.name ?? record.attempts?.at(-1)?.jobName;
}

/** The LocalQueue the run's current attempt asked for (an elastic fallback may move it). */
export function currentQueue(record: Pick<RunRecord, 'spec' | 'attempts'>): string | undefined {
  return record.attempts?.at(-1)?.queue ?? record.spec.request.queue;
}

const line = (position: number, queue: string, source: string) =>
  `#${position} in line in queue ${queue} (${position - 1} ahead), from ${source}`;

/** The run's place in Kueue's list of the LocalQueue's pending workloads, if Kueue lists its job's Workload. */
export function positionFromKueue(
  record: RunRecord,
  items: readonly PendingWorkloadItem[],
  now: Date,
): QueuePositionView | undefined {
  const job = currentJobName(record);
  const queue = currentQueue(record) as string;
  const mine = items.find((i) => i.ownerName !== undefined && i.ownerName === job);
  if (!mine) return undefined;
  const position = mine.positionInLocalQueue + 1;
  return {
    runId: record.runId,
    phase: record.phase,
    queued: true,
    queue,
    namespace: record.spec.namespace,
    source: 'kueue',
    position,
    ahead: position - 1,
    positionInClusterQueue: mine.positionInClusterQueue + 1,
    message: `${line(position, queue, "Kueue's visibility API")}; #${mine.positionInClusterQueue + 1} in its ClusterQueue`,
    asOf: now.toISOString(),
  };
}

/** When the run's current job started waiting: its last move into Pending. */
export function pendingSince(record: Pick<RunRecord, 'transitions' | 'createdAt'>): string {
  for (let i = record.transitions.length - 1; i >= 0; i--) {
    const t = record.transitions[i];
    if (t?.phase === 'Pending') return t.at;
  }
  return record.createdAt;
}

/**
 * Gantry's order of pending runs in one LocalQueue: a higher known priority first, then the job
 * that started waiting first (Kueue's BestEffortFIFO/StrictFIFO order within a priority).
 * `priorityOf` gives a run's WorkloadPriorityClass value when it is known (undefined: 0, Kueue's default).
 */
export function gantryOrder(
  runs: readonly RunRecord[],
  priorityOf: (r: RunRecord) => number | undefined = () => undefined,
): RunRecord[] {
  return [...runs].sort((a, b) => {
    const p = (priorityOf(b) ?? 0) - (priorityOf(a) ?? 0);
    if (p !== 0) return p;
    const t = Date.parse(pendingSince(a)) - Date.parse(pendingSince(b));
    return t !== 0 ? t : a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0;
  });
}

/** Whether `r` runs in (or waits for) the same LocalQueue of the same cluster and namespace as `record`. */
export function sameQueue(record: RunRecord, r: RunRecord): boolean {
  return (
    r.spec.cluster === record.spec.cluster &&
    r.spec.namespace === record.spec.namespace &&
    currentQueue(r) === currentQueue(record)
  );
}

/**
 * The line `record` waits in, in Gantry's order: the Pending runs among `pending` in its LocalQueue
 * (not admitted), the run among them.
 */
export function gantryLine(
  record: RunRecord,
  pending: readonly RunRecord[],
  priorityOf?: (r: RunRecord) => number | undefined,
): RunRecord[] {
  const same = pending.filter(
    (r) =>
      r.phase === 'Pending' &&
      // Admitted (quota reserved, its pods starting): out of the queue, whatever the record's phase.
      r.admission?.state !== 'Admitted' &&
      sameQueue(record, r),
  );
  if (!same.some((r) => r.runId === record.runId)) same.push(record);
  // (The run itself is kept: the use case answers an admitted run before asking for a position.)
  return gantryOrder(same, priorityOf);
}

/**
 * The run's position among `pending` (the team's Pending runs, the run among them) that wait in the
 * same LocalQueue of the same cluster and namespace, in Gantry's order.
 */
export function positionFromGantry(
  record: RunRecord,
  pending: readonly RunRecord[],
  now: Date,
  note: string,
  priorityOf?: (r: RunRecord) => number | undefined,
): QueuePositionView {
  const queue = currentQueue(record) as string;
  const order = gantryLine(record, pending, priorityOf);
  const index = order.findIndex((r) => r.runId === record.runId);
  const position = index + 1;
  return {
    runId: record.runId,
    phase: record.phase,
    queued: true,
    queue,
    namespace: record.spec.namespace,
    source: 'gantry',
    position,
    ahead: index,
    aheadRuns: order.slice(Math.max(0, index - 20), index).map((r) => r.runId),
    message: line(position, queue, "Gantry's view of the team's pending runs"),
    note,
    asOf: now.toISOString(),
  };
}
