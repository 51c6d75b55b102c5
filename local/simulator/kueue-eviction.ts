import type { Json } from './apiserver.ts';
import { rfc3339 } from './clock.ts';
import { setSuspended } from './jobs.ts';
import {
  findCondition,
  isTrue,
  kueueNeedsRuntimePatch,
  REQUEUING_BACKOFF_BASE_SECONDS,
  REQUEUING_BACKOFF_MAX_SECONDS,
  requeueBackoffSeconds,
  setCondition,
  WAIT_FOR_PODS_READY_TIMEOUT_SECONDS,
} from './kueue.ts';
import type { KueueObjects } from './kueue-objects.ts';
import { meta, obj, type SimCore } from './sim-core.ts';

/** Seconds an evicted Workload waits before Kueue requeues it (the default pod termination grace period). */
export const EVICTION_REQUEUE_SECONDS = 30;

/**
 * The eviction reasons an admin call may ask for (Kueue v0.19.2's `WorkloadEvictedBy…`), each with
 * the message Kueue writes (workload_controller.go, tas/node_controller.go). `PodsReadyTimeout` goes
 * through waitForPodsReady's own path (requeueState count and backoff).
 */
export const ADMIN_EVICTION_MESSAGES = {
  Preempted: 'Preempted to accommodate a higher priority workload (simulator admin call)',
  AdmissionCheck: 'Evicted due to AdmissionCheck in Retry state: "sim-check" (capacity was lost; retry)',
  ClusterQueueStopped: 'The ClusterQueue is stopped',
  LocalQueueStopped: 'The LocalQueue is stopped',
  NodeFailures:
    'Workload eviction triggered due to multiple TAS assigned node failures, including: sim-node-1, sim-node-2',
  PodsReadyTimeout: undefined,
} as const;
export type AdminEvictionReason = keyof typeof ADMIN_EVICTION_MESSAGES;

export function isAdminEvictionReason(reason: string): reason is AdminEvictionReason {
  return Object.hasOwn(ADMIN_EVICTION_MESSAGES, reason);
}

/**
 * How Kueue takes admission back: eviction (preemption, PodsReadyTimeout, deactivation) with the
 * job re-suspended, the reservation withdrawn once its pods are gone, the requeuing backoff of
 * waitForPodsReady and deactivation past its requeuing limit.
 */
export class KueueEviction {
  private readonly c: SimCore;
  private readonly kueue: KueueObjects;
  private readonly reconcileJob: (uid: string) => void;
  /** Workload uid → when its requeuing backoff ends, in simulated time (status.requeueState.requeueAt is a stamp). */
  private readonly requeueAtVt = new Map<string, number>();
  /** Workload uid → when waitForPodsReady last armed its timeout (its latest admission), simulated time. */
  private readonly admittedAtVt = new Map<string, number>();

  constructor(c: SimCore, kueue: KueueObjects, reconcileJob: (uid: string) => void) {
    this.c = c;
    this.kueue = kueue;
    this.reconcileJob = reconcileJob;
  }

  /** The Workload is gone: forget its timers' bookkeeping. */
  forget(uid: string): void {
    this.requeueAtVt.delete(uid);
    this.admittedAtVt.delete(uid);
  }

  /**
   * Evict a workload as Kueue v0.19 does. First `Evicted=True` (and `Preempted=True` for a
   * preemption) while QuotaReserved/Admitted stay True and the quota stays taken; the job is
   * re-suspended (Kueue's runtime patch emptied). Once the job's pods are gone (their termination
   * grace period, 30 s by default) the reservation is withdrawn: QuotaReserved=False, Admitted=False
   * and `Requeued` (True after a preemption, False with the eviction reason otherwise) — then the
   * Workload queues again, after `status.requeueState.requeueAt` when a backoff was set.
   */
  evict(wl: Json, reason: string, message: string, prepare?: (st: Json) => void): void {
    const gen = meta(wl).generation;
    const ns = String(meta(wl).namespace);
    const name = String(meta(wl).name);
    const uid = String(meta(wl).uid);
    const hadReservation = isTrue(wl, 'QuotaReserved');
    this.kueue.mutateWorkloadStatus(wl, (st) => {
      prepare?.(st);
      let conds = setCondition(
        st.conditions,
        { type: 'Evicted', status: 'True', reason, message, observedGeneration: gen },
        this.c.now,
      );
      if (reason === 'Preempted')
        conds = setCondition(
          conds,
          { type: 'Preempted', status: 'True', reason: 'InClusterQueue', message, observedGeneration: gen },
          this.c.now,
        );
      st.conditions = conds;
    });
    const j = this.kueue.ownerJob(wl);
    if (j) {
      if (
        j.def.kind === 'TrainJob' &&
        kueueNeedsRuntimePatch(this.c.o.kueueVersion) &&
        this.kueue.hasKueuePatch(j)
      )
        this.kueue.setKueuePatch(j, undefined, true);
      else this.c.api.mutate(j.def, j.ns, j.name, (o) => setSuspended(j.def, o, true));
      j.suspended = true;
      this.reconcileJob(j.uid);
    }
    if (hadReservation)
      this.c.scheduleAt(this.c.vt + EVICTION_REQUEUE_SECONDS * 1000, () =>
        this.releaseEvicted(ns, name, uid),
      );
    this.c.markDirty();
  }

  /** Evict an admitted Workload for `reason` with Kueue's message (an admin call standing for Kueue's cause). */
  evictFor(wl: Json, reason: AdminEvictionReason): void {
    if (reason === 'PodsReadyTimeout') this.podsReadyTimeout(wl);
    else this.evict(wl, reason, ADMIN_EVICTION_MESSAGES[reason]);
  }

  /** The evicted job is no longer active: withdraw the reservation (Kueue's jobframework, step 6). */
  private releaseEvicted(ns: string, name: string, uid: string): void {
    const wl = this.c.api.peek(this.kueue.workloadDef()!, ns, name);
    if (!wl || String(meta(wl).uid) !== uid || !isTrue(wl, 'QuotaReserved') || isTrue(wl, 'Finished')) return;
    const ev = findCondition(wl, 'Evicted');
    if (ev?.status !== 'True') return;
    const gen = meta(wl).generation;
    const evReason = String(ev.reason);
    const evMessage = String(ev.message ?? '');
    this.kueue.mutateWorkloadStatus(wl, (st) => {
      delete st.admission;
      let conds = setCondition(
        st.conditions,
        {
          type: 'Requeued',
          status: evReason === 'Preempted' ? 'True' : 'False',
          reason: evReason,
          message: evMessage,
          observedGeneration: gen,
        },
        this.c.now,
      );
      conds = setCondition(
        conds,
        {
          type: 'QuotaReserved',
          status: 'False',
          reason: this.c.o.kueueGranularReasons ? 'PendingEvaluation' : 'Pending',
          message: evMessage,
          observedGeneration: gen,
        },
        this.c.now,
      );
      conds = setCondition(
        conds,
        {
          type: 'Admitted',
          status: 'False',
          reason: 'NoReservation',
          message: 'The workload has no reservation',
          observedGeneration: gen,
        },
        this.c.now,
      );
      conds = this.kueue.podsNotReadyYet(conds, gen);
      st.conditions = conds;
    });
    const requeueAt = this.requeueAtVt.get(uid);
    if (requeueAt !== undefined && evReason === 'PodsReadyTimeout') {
      this.c.scheduleAt(Math.max(requeueAt, this.c.vt), () => this.finishBackoff(ns, name, uid));
    }
    this.c.markDirty();
  }

  /** The requeuing backoff is over: `Requeued=True BackoffFinished`, requeueAt cleared. */
  private finishBackoff(ns: string, name: string, uid: string): void {
    const wl = this.c.api.peek(this.kueue.workloadDef()!, ns, name);
    if (!wl || String(meta(wl).uid) !== uid || obj(wl.spec).active === false) return;
    this.requeueAtVt.delete(uid);
    this.kueue.mutateWorkloadStatus(wl, (st) => {
      const rs = obj(st.requeueState);
      delete rs.requeueAt;
      st.requeueState = rs;
      st.conditions = setCondition(
        st.conditions,
        {
          type: 'Requeued',
          status: 'True',
          reason: 'BackoffFinished',
          message: 'The workload backoff was finished',
          observedGeneration: meta(wl).generation,
        },
        this.c.now,
      );
    });
    this.c.markDirty();
  }

  /** Whether a pending workload still waits out its requeuing backoff. */
  inBackoff(wl: Json): boolean {
    const at = this.requeueAtVt.get(String(meta(wl).uid));
    return at !== undefined && at > this.c.vt;
  }

  /** waitForPodsReady: check the admitted workload's PodsReady once its timeout has passed. */
  armPodsReadyTimeout(wl: Json): void {
    const cfg = this.c.o.waitForPodsReady;
    if (!cfg) return;
    const ns = String(meta(wl).namespace);
    const name = String(meta(wl).name);
    const uid = String(meta(wl).uid);
    const admittedAt = this.c.vt;
    this.admittedAtVt.set(uid, admittedAt);
    const timeout = (cfg.timeoutSeconds ?? WAIT_FOR_PODS_READY_TIMEOUT_SECONDS) * 1000;
    this.c.scheduleAt(admittedAt + timeout, () => {
      const cur = this.c.api.peek(this.kueue.workloadDef()!, ns, name);
      if (!cur || String(meta(cur).uid) !== uid) return;
      const admitted = findCondition(cur, 'Admitted');
      if (admitted?.status !== 'True' || isTrue(cur, 'Finished') || isTrue(cur, 'Evicted')) return;
      if (this.admittedAtVt.get(uid) !== admittedAt) return; // readmitted since
      if (isTrue(cur, 'PodsReady') || obj(cur.spec).active === false) return;
      this.podsReadyTimeout(cur);
    });
  }

  /**
   * Kueue's reconcileNotReadyTimeout: past `backoffLimitCount` requeues the Workload is deactivated
   * (DeactivationTarget → spec.active=false → Evicted `DeactivatedDueToRequeuingLimitExceeded`);
   * otherwise it is evicted `PodsReadyTimeout` with requeueState {count+1, requeueAt + backoff}.
   */
  private podsReadyTimeout(wl: Json): void {
    const strategy = this.c.o.waitForPodsReady?.requeuingStrategy ?? {};
    const count = Number(obj(obj(wl.status).requeueState).count ?? 0);
    const limit = strategy.backoffLimitCount;
    if (limit !== undefined && count + 1 > limit) {
      this.deactivate(wl, 'RequeuingLimitExceeded', 'exceeding the maximum number of re-queuing retries');
      return;
    }
    const backoff = requeueBackoffSeconds(
      count + 1,
      strategy.backoffBaseSeconds ?? REQUEUING_BACKOFF_BASE_SECONDS,
      strategy.backoffMaxSeconds ?? REQUEUING_BACKOFF_MAX_SECONDS,
    );
    this.evict(
      wl,
      'PodsReadyTimeout',
      `Exceeded the PodsReady timeout ${String(meta(wl).namespace)}/${String(meta(wl).name)}`,
      (st) => {
        // The backoff elapses in simulated time (requeueAtVt); the status says when, as Kueue writes it.
        this.requeueAtVt.set(String(meta(wl).uid), this.c.vt + backoff * 1000);
        st.requeueState = { count: count + 1, requeueAt: rfc3339(Date.parse(this.c.now) + backoff * 1000) };
      },
    );
  }

  /**
   * Deactivate a Workload (spec.active=false) and evict it with Kueue's reason: `Deactivated`, or
   * `DeactivatedDueTo<cause>` when Kueue itself deactivated it (DeactivationTarget), with the message
   * `The workload is deactivated[ due to <why>]`; requeueState is cleared. It is never admitted again.
   */
  deactivate(wl: Json, cause?: string, why?: string): void {
    const ns = String(meta(wl).namespace);
    const name = String(meta(wl).name);
    const def = this.kueue.workloadDef()!;
    if (cause)
      this.kueue.mutateWorkloadStatus(wl, (st) => {
        st.conditions = setCondition(
          st.conditions,
          {
            type: 'DeactivationTarget',
            status: 'True',
            reason: cause,
            message: why ?? '',
            observedGeneration: meta(wl).generation,
          },
          this.c.now,
        );
      });
    this.c.api.mutate(def, ns, name, (o) => {
      o.spec = { ...obj(o.spec), active: false };
    });
    const cur = this.c.api.peek(def, ns, name)!;
    this.evict(
      cur,
      cause ? `DeactivatedDueTo${cause}` : 'Deactivated',
      `The workload is deactivated${why ? ` due to ${why}` : ''}`,
      (st) => {
        delete st.requeueState;
        if (Array.isArray(st.conditions))
          st.conditions = (st.conditions as Json[]).filter((c) => c.type !== 'DeactivationTarget');
      },
    );
  }
}
