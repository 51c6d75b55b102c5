import type { Json } from './apiserver.ts';
import { formatQuantity, setSuspended } from './jobs.ts';
import {
  assignFlavor,
  findCondition,
  flavorOf,
  isTrue,
  kueueNeedsRuntimePatch,
  kueueReplicatedJobPatches,
  nominalQuota,
  podRequests,
  setCondition,
} from './kueue.ts';
import type { KueueEviction } from './kueue-eviction.ts';
import type { KueueObjects } from './kueue-objects.ts';
import { isObj, KUEUE, meta, obj, type SimCore, type SimJob } from './sim-core.ts';

/**
 * Kueue's scheduler: one pass over every ClusterQueue admits pending Workloads all-or-nothing in
 * priority-then-FIFO order against the nominal quota left, writes why the others wait, preempts
 * lower priorities when the ClusterQueue allows it, and starts the admitted jobs.
 */
export class KueueAdmission {
  private readonly c: SimCore;
  private readonly kueue: KueueObjects;
  private readonly eviction: KueueEviction;
  private readonly reconcileJob: (uid: string) => void;
  /** Order in which Workloads appeared: FIFO within a second (creationTimestamp's precision). */
  private readonly arrivals = new Map<string, number>();
  private readonly demands = new Map<
    string,
    {
      podSets: Array<{ name: string; count: number; per: Record<string, number> }>;
      total: Record<string, number>;
    }
  >();

  constructor(c: SimCore, kueue: KueueObjects, eviction: KueueEviction, reconcileJob: (uid: string) => void) {
    this.c = c;
    this.kueue = kueue;
    this.eviction = eviction;
    this.reconcileJob = reconcileJob;
  }

  /** A Workload was created: its place in FIFO order. */
  arrived(uid: string): void {
    this.arrivals.set(uid, this.c.seq++);
  }

  /** The Workload is gone. */
  forget(uid: string): void {
    this.demands.delete(uid);
    this.arrivals.delete(uid);
  }

  /** One Kueue scheduling pass over every ClusterQueue. */
  admit(): void {
    const wlDef = this.kueue.workloadDef();
    const cqDef = this.c.def(KUEUE.group, 'clusterqueues');
    const lqDef = this.c.def(KUEUE.group, 'localqueues');
    if (!wlDef || !cqDef || !lqDef) return;

    const cqs = new Map<string, Json>();
    for (const cq of this.c.api.peekAll(cqDef)) cqs.set(String(meta(cq).name), cq);
    const usage = new Map<string, Record<string, number>>();
    const pendingBy = new Map<string, Json[]>();
    const admittedCount = new Map<string, number>();
    const lqCounts = new Map<string, { pending: number; admitted: number }>();
    for (const wl of this.c.api.peekAll(wlDef)) {
      const finished = isTrue(wl, 'Finished');
      const reserved = isTrue(wl, 'QuotaReserved');
      const ns = String(meta(wl).namespace);
      const lqName = String(obj(wl.spec).queueName ?? '');
      const lqKey = `${ns}/${lqName}`;
      if (finished) continue;
      if (reserved) {
        const cq = String(obj(obj(wl.status).admission).clusterQueue ?? '');
        const u = usage.get(cq) ?? {};
        for (const [r, v] of Object.entries(this.workloadRequests(wl))) u[r] = (u[r] ?? 0) + v;
        usage.set(cq, u);
        admittedCount.set(cq, (admittedCount.get(cq) ?? 0) + 1);
        const c = lqCounts.get(lqKey) ?? { pending: 0, admitted: 0 };
        c.admitted++;
        lqCounts.set(lqKey, c);
        continue;
      }
      if (obj(wl.spec).active === false) continue;
      const lq = this.c.api.peek(lqDef, ns, lqName);
      if (!lq) {
        this.setPending(wl, 'Inadmissible', `LocalQueue ${lqName} doesn't exist`, true);
        continue;
      }
      const cqName = String(obj(lq.spec).clusterQueue ?? '');
      if (!cqs.has(cqName)) {
        this.setPending(wl, 'Inadmissible', `ClusterQueue ${cqName} doesn't exist`, true);
        continue;
      }
      const list = pendingBy.get(cqName) ?? [];
      list.push(wl);
      pendingBy.set(cqName, list);
      const c = lqCounts.get(lqKey) ?? { pending: 0, admitted: 0 };
      c.pending++;
      lqCounts.set(lqKey, c);
    }

    for (const [cqName, cq] of cqs) {
      const nominal = nominalQuota(cq);
      const used = usage.get(cqName) ?? {};
      const pending = (pendingBy.get(cqName) ?? []).sort(
        (a, b) =>
          Number(obj(b.spec).priority ?? 0) - Number(obj(a.spec).priority ?? 0) ||
          String(meta(a).creationTimestamp).localeCompare(String(meta(b).creationTimestamp)) ||
          this.arrival(a) - this.arrival(b),
      );
      const strict = obj(cq.spec).queueingStrategy === 'StrictFIFO';
      // Like Kueue, only the workloads the scheduler looks at first get a fresh message each pass.
      let refreshBudget = 10;
      let admittedNow = 0;
      for (const wl of pending) {
        if (this.eviction.inBackoff(wl)) continue;
        // Admission needs the whole demand to fit what is free (one flavor per ClusterQueue).
        const total = this.demand(wl).total;
        const free = Object.entries(total).every(
          ([r, v]) => v === 0 || (r in nominal && v <= nominal[r]! - (used[r] ?? 0)),
        );
        const job = free ? this.kueue.ownerJob(wl) : undefined;
        if (free && !job?.neverAdmit) {
          this.reserve(wl, cqName, used);
          admittedNow++;
          continue;
        }
        const known = findCondition(wl, 'QuotaReserved')?.status === 'False';
        const lowerPriority = obj(obj(cq.spec).preemption).withinClusterQueue === 'LowerPriority';
        if (known && refreshBudget <= 0 && !lowerPriority) {
          if (strict) break;
          continue; // not looked at this pass: its message stays as it was
        }
        const fit = this.fits(wl, cq, nominal, used, job?.neverAdmit === true || free);
        if (fit.ok) continue;
        refreshBudget--;
        if (!fit.neverFits && lowerPriority && this.preemptFor(wl, cqName, nominal, used)) {
          this.setPending(wl, fit.reason, `${fit.message}. Pending the preemption of workload(s)`, true);
          continue;
        }
        this.setPending(wl, fit.reason, fit.message, refreshBudget >= 0);
        if (strict) break;
      }
      this.kueue.writeQueueStatus(
        cq,
        used,
        (pendingBy.get(cqName)?.length ?? 0) - admittedNow,
        (admittedCount.get(cqName) ?? 0) + admittedNow,
      );
    }
    this.kueue.writeLocalQueueStatus(lqCounts);
  }

  private arrival(wl: Json): number {
    return this.arrivals.get(String(meta(wl).uid)) ?? Number.MAX_SAFE_INTEGER;
  }

  /** Per pod set (name, count, one pod's requests) and in total; cached per Workload (podSets are immutable). */
  private demand(wl: Json): {
    podSets: Array<{ name: string; count: number; per: Record<string, number> }>;
    total: Record<string, number>;
  } {
    const uid = String(meta(wl).uid);
    let d = this.demands.get(uid);
    if (!d) {
      const podSets = ((obj(wl.spec).podSets as Json[] | undefined) ?? []).map((p) => ({
        name: String(p.name),
        count: Number(p.count ?? 1),
        per: podRequests(obj(p.template)),
      }));
      const total: Record<string, number> = {};
      for (const p of podSets)
        for (const [r, v] of Object.entries(p.per)) total[r] = (total[r] ?? 0) + v * p.count;
      d = { podSets, total };
      this.demands.set(uid, d);
    }
    return d;
  }

  private workloadRequests(wl: Json): Record<string, number> {
    return this.demand(wl).total;
  }

  /** Kueue's flavor assignment against the ClusterQueue, with its messages. */
  private fits(
    wl: Json,
    cq: Json,
    nominal: Record<string, number>,
    used: Record<string, number>,
    neverAdmit: boolean,
  ) {
    return assignFlavor(this.demand(wl).podSets, nominal, used, {
      flavor: flavorOf(cq),
      neverAdmit,
      granular: this.c.o.kueueGranularReasons,
    });
  }

  private setPending(wl: Json, reason: string, message: string, refresh: boolean): void {
    const cur = findCondition(wl, 'QuotaReserved');
    if (cur && cur.status === 'False' && cur.reason === reason && cur.message === message) return;
    // Like Kueue, only the workloads the scheduler looks at (the heads) get a fresh message.
    if (cur && cur.status === 'False' && !refresh) return;
    this.kueue.mutateWorkloadStatus(wl, (st) => {
      st.conditions = setCondition(
        st.conditions,
        { type: 'QuotaReserved', status: 'False', reason, message, observedGeneration: meta(wl).generation },
        this.c.now,
      );
    });
  }

  private reserve(wl: Json, cqName: string, used: Record<string, number>): void {
    const req = this.workloadRequests(wl);
    for (const [r, v] of Object.entries(req)) used[r] = (used[r] ?? 0) + v;
    const cq = this.c.api.peek(this.c.def(KUEUE.group, 'clusterqueues')!, undefined, cqName)!;
    const flavor = flavorOf(cq);
    const podSets = (obj(wl.spec).podSets as Json[] | undefined) ?? [];
    const gen = meta(wl).generation;
    this.kueue.mutateWorkloadStatus(wl, (st) => {
      st.admission = {
        clusterQueue: cqName,
        podSetAssignments: podSets.map((ps) => {
          const count = Number(ps.count ?? 1);
          const per = podRequests(obj(ps.template));
          const flavors: Json = {};
          const usageOut: Json = {};
          for (const [r, v] of Object.entries(per)) {
            if (v === 0) continue;
            flavors[r] = flavor;
            usageOut[r] = formatQuantity(r, v * count);
          }
          return { name: ps.name, flavors, resourceUsage: usageOut, count };
        }),
      };
      let conds = setCondition(
        st.conditions,
        {
          type: 'QuotaReserved',
          status: 'True',
          reason: 'QuotaReserved',
          message: `Quota reserved in ClusterQueue ${cqName}`,
          observedGeneration: gen,
        },
        this.c.now,
      );
      conds = setCondition(
        conds,
        {
          type: 'Admitted',
          status: 'True',
          reason: 'Admitted',
          message: 'The workload is admitted',
          observedGeneration: gen,
        },
        this.c.now,
      );
      conds = this.kueue.podsNotReadyYet(conds, gen);
      conds = conds.map((c) =>
        (c.type === 'Evicted' || c.type === 'Preempted') && c.status === 'True'
          ? {
              ...c,
              status: 'False',
              reason: 'QuotaReserved',
              message: `Previously: ${String(c.message)}`,
              lastTransitionTime: this.c.now,
            }
          : c,
      );
      st.conditions = conds;
    });
    this.c.stats.admitted++;
    const j = this.kueue.ownerJob(wl);
    if (!j) return;
    if (this.c.o.waitForPodsReady) this.eviction.armPodsReadyTimeout(wl);
    if (!this.startAdmittedJob(j, wl, cqName)) return;
    j.suspended = false;
    this.reconcileJob(j.uid);
  }

  /**
   * Kueue starts an admitted job. A TrainJob under Kueue >= 0.17 starts only through Kueue's own
   * runtime patch (`kueue.x-k8s.io/manager`): Kueue fills its replicated-job patches (pod set
   * labels, queue labels, the Workload annotation, the flavor's node selector and tolerations) and
   * unsuspends in the same update. Without that patch (Trainer 2.1, whose TrainJob has no
   * runtimePatches) it fails with `kueue runtime patch not found` and the job stays suspended
   * while the Workload stays Admitted (kueue#11931). False when the job was not started.
   */
  private startAdmittedJob(j: SimJob, wl: Json, cqName: string): boolean {
    if (j.def.kind !== 'TrainJob' || !kueueNeedsRuntimePatch(this.c.o.kueueVersion)) {
      this.c.api.mutate(j.def, j.ns, j.name, (o) => setSuspended(j.def, o, false));
      return true;
    }
    const job = this.c.api.peek(j.def, j.ns, j.name);
    const patches = (obj(job?.spec).runtimePatches as Json[] | undefined) ?? [];
    if (!patches.some((p) => isObj(p) && p.manager === KUEUE.manager)) {
      this.c.o.log(
        `simulator: Kueue cannot start ${j.ns}/${j.name}: kueue runtime patch not found (Kueue ${this.c.o.kueueVersion} with Trainer ${this.c.o.trainerVersion})`,
      );
      return false;
    }
    const replicatedJobs = kueueReplicatedJobPatches(
      ((obj(wl.spec).podSets as Json[] | undefined) ?? []).map((ps) => String(ps.name)),
      {
        workload: String(meta(wl).name),
        localQueue: String(obj(wl.spec).queueName ?? ''),
        clusterQueue: cqName,
        flavor: this.c.o.flavor,
      },
    );
    this.kueue.setKueuePatch(j, replicatedJobs, false);
    return true;
  }

  /** Evict lower-priority admitted workloads of the ClusterQueue until `wl` fits; true when any were evicted. */
  private preemptFor(
    wl: Json,
    cqName: string,
    nominal: Record<string, number>,
    used: Record<string, number>,
  ): boolean {
    const prio = Number(obj(wl.spec).priority ?? 0);
    const wlDef = this.kueue.workloadDef()!;
    const inCq = this.c.api
      .peekAll(wlDef)
      .filter(
        (w) =>
          isTrue(w, 'QuotaReserved') &&
          !isTrue(w, 'Finished') &&
          String(obj(obj(w.status).admission).clusterQueue) === cqName,
      );
    // Workloads already being evicted still hold their quota until their pods are gone: the
    // preemptor waits for them (Kueue's WaitingForPreemptedWorkloads) instead of choosing more victims.
    const need0 = this.workloadRequests(wl);
    const afterInflight = { ...used };
    for (const w of inCq.filter((x) => isTrue(x, 'Evicted')))
      for (const [r, v] of Object.entries(this.workloadRequests(w)))
        afterInflight[r] = (afterInflight[r] ?? 0) - v;
    if (Object.entries(need0).every(([r, v]) => v <= (nominal[r] ?? 0) - (afterInflight[r] ?? 0))) {
      return inCq.some((x) => isTrue(x, 'Evicted'));
    }
    const candidates = inCq
      .filter((w) => !isTrue(w, 'Evicted') && Number(obj(w.spec).priority ?? 0) < prio)
      .sort(
        (a, b) =>
          Number(obj(a.spec).priority ?? 0) - Number(obj(b.spec).priority ?? 0) ||
          String(meta(b).creationTimestamp).localeCompare(String(meta(a).creationTimestamp)),
      );
    const need = this.workloadRequests(wl);
    const free = (u: Record<string, number>) =>
      Object.entries(need).every(([r, v]) => v <= (nominal[r] ?? 0) - (u[r] ?? 0));
    const sim = { ...afterInflight };
    const victims: Json[] = [];
    for (const c of candidates) {
      if (free(sim)) break;
      victims.push(c);
      for (const [r, v] of Object.entries(this.workloadRequests(c))) sim[r] = (sim[r] ?? 0) - v;
    }
    if (!free(sim) || victims.length === 0) return false;
    for (const v of victims) {
      this.eviction.evict(
        v,
        'Preempted',
        `Preempted to accommodate a workload (UID: ${String(meta(wl).uid)}, JobUID: ${String(obj(meta(wl).labels)[KUEUE.jobUidLabel] ?? '')}) due to prioritization in the ClusterQueue`,
      );
    }
    return true;
  }
}
