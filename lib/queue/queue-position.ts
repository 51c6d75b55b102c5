import type { GantryConfig } from '../config.ts';
import { makeGetRun } from '../intake/runs.ts';
import type { Caller } from '../intake/tenancy.ts';
import type { CallOptions, Clock, ClusterGateway } from '../ports.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { StateTable } from '../state/table.ts';
import type { PendingWorkloads } from './pending.ts';
import { currentQueue, positionFromGantry, positionFromKueue, type QueuePositionView } from './position.ts';

/** Pending runs of a team read for Gantry's view (one query page of its Pending index partition). */
export const PENDING_READ = 500;

export interface QueuePositionDeps {
  records: RunRecords;
  config: GantryConfig;
  table: Pick<StateTable, 'query'>;
  gateway: (cluster: string) => Promise<Pick<ClusterGateway, 'pendingWorkloads'>>;
  clock: Clock;
}

/**
 * `GET /v1/runs/{id}/queue`: a pending run's place in its Kueue LocalQueue — from Kueue's
 * visibility API where the cluster serves it, else from Gantry's own view of the team's pending
 * runs (and the answer says which, and why).
 */
export function makeGetQueuePosition(deps: QueuePositionDeps) {
  const getRun = makeGetRun(deps);

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

  async function teamPending(team: string, opts?: CallOptions): Promise<RunRecord[]> {
    const page = await deps.table.query<RunRecord>(
      'byPhase',
      `${team}#run#Pending`,
      { limit: PENDING_READ, descending: false },
      opts,
    );
    return page.items;
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
    if (kueue.served) {
      const found = positionFromKueue(record, kueue.items, now);
      if (found) return found;
    }
    const why = kueue.served
      ? `Kueue (${kueue.apiVersion}) does not list the run's job as pending in ${queue} yet (its Workload is being created or admitted)`
      : kueue.reason;
    const pending = await teamPending(record.spec.request.team, opts);
    return positionFromGantry(
      record,
      pending,
      now,
      `${why}; this counts only the team's Gantry runs in ${queue}, by when their job was created — other workloads in the LocalQueue and its ClusterQueue are not seen`,
    );
  };
}

export type GetQueuePosition = ReturnType<typeof makeGetQueuePosition>;
