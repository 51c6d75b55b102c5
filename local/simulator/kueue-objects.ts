import type { Json } from './apiserver.ts';
import { findRuntime, formatQuantity, podSetsOf, setSuspended, TRAINER_GROUP } from './jobs.ts';
import { flavorOf, kueueManages, nominalQuota, setCondition, workloadName } from './kueue.ts';
import type { ResourceDef } from './registry.ts';
import { isObj, KUEUE, meta, obj, type SimCore, type SimJob } from './sim-core.ts';

/**
 * Kueue's API objects as its controllers write them: the seeded ResourceFlavor, ClusterQueues,
 * LocalQueues and WorkloadPriorityClasses, a queued job's Workload and its status, the queues'
 * status counts, and Kueue's runtime patch on a TrainJob. Admission (kueue-admission.ts) and
 * eviction (kueue-eviction.ts) decide; this file writes.
 */
export class KueueObjects {
  private readonly c: SimCore;

  constructor(c: SimCore) {
    this.c = c;
  }

  /** Queues, flavors and priority classes from the options (Kueue mode). */
  seed(): void {
    if (this.c.o.gang !== 'kueue') return;
    const rf = this.c.def(KUEUE.group, 'resourceflavors');
    const cqDef = this.c.def(KUEUE.group, 'clusterqueues');
    const wpc = this.c.def(KUEUE.group, 'workloadpriorityclasses');
    if (!rf || !cqDef) return;
    this.c.api.seed(rf, {
      apiVersion: `${KUEUE.group}/${rf.storageVersion}`,
      kind: 'ResourceFlavor',
      metadata: { name: KUEUE.flavor },
      spec: {
        ...(this.c.o.flavor.nodeLabels ? { nodeLabels: { ...this.c.o.flavor.nodeLabels } } : {}),
        ...(this.c.o.flavor.tolerations ? { tolerations: this.c.o.flavor.tolerations } : {}),
      },
    });
    const seen = new Set<string>();
    for (const q of this.c.o.queues) {
      if (seen.has(q.clusterQueue)) continue;
      seen.add(q.clusterQueue);
      const resources = Object.keys(q.quota);
      this.c.api.seed(cqDef, {
        apiVersion: `${KUEUE.group}/${cqDef.storageVersion}`,
        kind: 'ClusterQueue',
        metadata: { name: q.clusterQueue },
        spec: {
          namespaceSelector: {},
          queueingStrategy: q.queueingStrategy ?? 'BestEffortFIFO',
          preemption: { withinClusterQueue: q.preemption ?? 'Never' },
          resourceGroups: [
            {
              coveredResources: resources,
              flavors: [
                {
                  name: KUEUE.flavor,
                  resources: resources.map((r) => ({ name: r, nominalQuota: q.quota[r] })),
                },
              ],
            },
          ],
        },
      });
    }
    if (wpc) {
      for (const [name, value] of Object.entries(this.c.o.priorityClasses)) {
        this.c.api.seed(wpc, {
          apiVersion: `${KUEUE.group}/${wpc.storageVersion}`,
          kind: 'WorkloadPriorityClass',
          metadata: { name },
          value,
        });
      }
    }
    const nsDef = this.c.def('', 'namespaces')!;
    for (const n of this.c.api.peekAll(nsDef)) this.ensureLocalQueues(String(meta(n).name));
  }

  ensureLocalQueues(ns: string): void {
    const lq = this.c.def(KUEUE.group, 'localqueues');
    if (!lq) return;
    for (const q of this.c.o.queues) {
      const wanted = q.namespaces ? q.namespaces.includes(ns) : !ns.startsWith('kube-');
      if (!wanted || this.c.api.peek(lq, ns, q.name)) continue;
      this.c.api.seed(lq, {
        apiVersion: `${KUEUE.group}/${lq.storageVersion}`,
        kind: 'LocalQueue',
        metadata: { name: q.name, namespace: ns },
        spec: { clusterQueue: q.clusterQueue },
      });
    }
  }

  workloadDef(): ResourceDef | undefined {
    return this.c.def(KUEUE.group, 'workloads');
  }

  workloadOf(j: SimJob): Json | undefined {
    if (j.gate !== 'kueue') return undefined;
    const def = this.workloadDef();
    if (!def) return undefined;
    return this.c.api.peek(def, j.ns, workloadName(j.def.kind, j.def.group, j.name, j.uid));
  }

  ensureWorkload(j: SimJob): void {
    const def = this.workloadDef();
    if (!def || this.workloadOf(j) || !kueueManages(this.c.o.kueueIntegrations, j.def)) return;
    const job = this.c.api.peek(j.def, j.ns, j.name);
    if (!job) return;
    if (j.def.kind === 'TrainJob' && !findRuntime(this.c.api, job)) {
      const ref = obj(obj(job.spec).runtimeRef);
      this.c.event(
        j,
        'Warning',
        'TrainJobResourcesCreationFailed',
        `TrainJob resources reconciliation failed: ${String(ref.kind ?? 'ClusterTrainingRuntime')}.${TRAINER_GROUP} ${JSON.stringify(String(ref.name ?? ''))} not found`,
      );
      return;
    }
    const podSets = podSetsOf(this.c.api, j.def, job);
    const labels = obj(meta(job).labels);
    const spec: Json = {
      active: true,
      queueName: labels[KUEUE.queueLabel],
      podSets: podSets.map((ps) => ({ name: ps.name, count: ps.count, template: ps.template })),
    };
    const pc = labels[KUEUE.priorityLabel];
    if (typeof pc === 'string') {
      const value = this.priorityValue(pc);
      spec.priorityClassRef = { group: KUEUE.group, kind: 'WorkloadPriorityClass', name: pc };
      spec.priority = value ?? 0;
    } else spec.priority = 0;
    try {
      this.c.api.create(
        def,
        def.storageVersion,
        j.ns,
        {
          apiVersion: `${KUEUE.group}/${def.storageVersion}`,
          kind: 'Workload',
          metadata: {
            name: workloadName(j.def.kind, j.def.group, j.name, j.uid),
            namespace: j.ns,
            labels: { [KUEUE.jobUidLabel]: j.uid },
            ownerReferences: [
              {
                apiVersion: `${j.def.group}/${j.def.storageVersion}`,
                kind: j.def.kind,
                name: j.name,
                uid: j.uid,
                controller: true,
                blockOwnerDeletion: true,
              },
            ],
          },
          spec,
        },
        { system: true, fieldValidation: 'Ignore' },
      );
    } catch (e) {
      this.c.o.log(
        `simulator: creating the Workload of ${j.ns}/${j.name} failed: ${e instanceof Error ? e.message : String(e)}`,
      );
      return;
    }
    this.c.markDirty();
  }

  private priorityValue(name: string): number | undefined {
    const def = this.c.def(KUEUE.group, 'workloadpriorityclasses');
    const wpc = def ? this.c.api.peek(def, undefined, name) : undefined;
    if (wpc && typeof wpc.value === 'number') return wpc.value;
    return this.c.o.priorityClasses[name];
  }

  mutateWorkloadStatus(wl: Json, fn: (status: Json) => void): Json | undefined {
    const def = this.workloadDef()!;
    return this.c.api.mutate(
      def,
      String(meta(wl).namespace),
      String(meta(wl).name),
      (o) => {
        const st = obj(o.status);
        fn(st);
        o.status = st;
      },
      'status',
    );
  }

  finishWorkload(j: SimJob, ok: boolean, message: string): void {
    const wl = this.workloadOf(j);
    if (!wl) return;
    this.mutateWorkloadStatus(wl, (st) => {
      st.conditions = setCondition(
        st.conditions,
        {
          type: 'Finished',
          status: 'True',
          reason: ok ? 'Succeeded' : 'Failed',
          message,
          observedGeneration: meta(wl).generation,
        },
        this.c.now,
      );
    });
  }

  ownerJob(wl: Json): SimJob | undefined {
    const refs = meta(wl).ownerReferences;
    if (!Array.isArray(refs)) return undefined;
    for (const r of refs) {
      const j = this.c.jobs.get(String(obj(r).uid));
      if (j) return j;
    }
    return undefined;
  }

  /** With waitForPodsReady, Kueue marks an (re)admitted or requeued Workload `PodsReady=False WaitForStart`. */
  podsNotReadyYet(conds: unknown, gen: unknown): Json[] {
    const list = (Array.isArray(conds) ? conds : []) as Json[];
    if (!this.c.o.waitForPodsReady) return list;
    return setCondition(
      list,
      {
        type: 'PodsReady',
        status: 'False',
        reason: 'WaitForStart',
        message: 'Not all pods are ready or succeeded',
        observedGeneration: gen,
      },
      this.c.now,
    );
  }

  /** Write Kueue's runtime patch (Trainer's webhook stamps `time` when it changes) and suspend or unsuspend. */
  setKueuePatch(j: SimJob, replicatedJobs: Json[] | undefined, suspend: boolean): void {
    this.c.api.mutate(j.def, j.ns, j.name, (o) => {
      const spec = obj(o.spec);
      const patches = (spec.runtimePatches as Json[] | undefined) ?? [];
      spec.runtimePatches = patches.map((p) => {
        if (!isObj(p) || p.manager !== KUEUE.manager) return p;
        const specPatch: Json = replicatedJobs ? { replicatedJobs } : {};
        const next: Json = { ...p, trainingRuntimeSpec: { template: { spec: specPatch } } };
        const { time: _a, ...a } = p;
        const { time: _b, ...b } = next;
        if (JSON.stringify(a) !== JSON.stringify(b)) next.time = this.c.now;
        return next;
      });
      o.spec = spec;
      setSuspended(j.def, o, suspend);
    });
  }

  hasKueuePatch(j: SimJob): boolean {
    const job = this.c.api.peek(j.def, j.ns, j.name);
    const patches = (obj(job?.spec).runtimePatches as Json[] | undefined) ?? [];
    return patches.some((p) => isObj(p) && p.manager === KUEUE.manager);
  }

  writeQueueStatus(cq: Json, used: Record<string, number>, pending: number, admitted: number): void {
    const cqDef = this.c.def(KUEUE.group, 'clusterqueues')!;
    const flavor = flavorOf(cq);
    const resources = Object.keys(nominalQuota(cq)).map((r) => ({
      name: r,
      total: formatQuantity(r, Math.max(0, used[r] ?? 0)),
      borrowed: '0',
    }));
    this.c.api.mutate(
      cqDef,
      undefined,
      String(meta(cq).name),
      (o) => {
        const st = obj(o.status);
        st.pendingWorkloads = Math.max(0, pending);
        st.reservingWorkloads = admitted;
        st.admittedWorkloads = admitted;
        st.flavorsReservation = [{ name: flavor, resources }];
        st.flavorsUsage = [{ name: flavor, resources }];
        st.conditions = setCondition(
          st.conditions,
          {
            type: 'Active',
            status: 'True',
            reason: 'Ready',
            message: 'Can admit new workloads',
            observedGeneration: meta(o).generation,
          },
          this.c.now,
        );
        o.status = st;
      },
      'status',
    );
  }

  writeLocalQueueStatus(counts: Map<string, { pending: number; admitted: number }>): void {
    const lqDef = this.c.def(KUEUE.group, 'localqueues')!;
    for (const lq of this.c.api.peekAll(lqDef)) {
      const key = `${String(meta(lq).namespace)}/${String(meta(lq).name)}`;
      const c = counts.get(key) ?? { pending: 0, admitted: 0 };
      const st = obj(lq.status);
      if (
        st.pendingWorkloads === c.pending &&
        st.admittedWorkloads === c.admitted &&
        Array.isArray(st.conditions)
      )
        continue;
      this.c.api.mutate(
        lqDef,
        String(meta(lq).namespace),
        String(meta(lq).name),
        (o) => {
          const s = obj(o.status);
          s.pendingWorkloads = c.pending;
          s.reservingWorkloads = c.admitted;
          s.admittedWorkloads = c.admitted;
          s.conditions = setCondition(
            s.conditions,
            {
              type: 'Active',
              status: 'True',
              reason: 'Ready',
              message: 'Can submit new workloads to localQueue',
              observedGeneration: meta(o).generation,
            },
            this.c.now,
          );
          o.status = s;
        },
        'status',
      );
    }
  }

  /** With waitForPodsReady, the job's pods are ready: its Workload gets `PodsReady=True Started`. */
  podsReady(j: SimJob): void {
    const wl = this.c.o.waitForPodsReady ? this.workloadOf(j) : undefined;
    if (wl) {
      this.mutateWorkloadStatus(wl, (st) => {
        st.conditions = setCondition(
          st.conditions,
          {
            type: 'PodsReady',
            status: 'True',
            reason: 'Started',
            message: 'All pods reached readiness and the workload is running',
            observedGeneration: meta(wl).generation,
          },
          this.c.now,
        );
      });
    }
  }
}
