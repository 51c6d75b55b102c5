import type { Json } from './apiserver.ts';
import type { JobStatus } from './job-status.ts';
import { formatQuantity, type PodSet, parseQuantity, podSetsOf } from './jobs.ts';
import type { ResourceDef } from './registry.ts';
import { obj, type SimCore, type SimJob } from './sim-core.ts';

/**
 * The coscheduling plugin's side of a gang (scheduler-plugins): one PodGroup per job, admitted
 * whole in creation order when its minResources fit the cluster capacity that is left, and the
 * PodGroup's phase as the job's pods wait, run and finish.
 */
export class PodGroups {
  private readonly c: SimCore;
  private readonly status: JobStatus;
  private readonly reconcileJob: (uid: string) => void;

  constructor(c: SimCore, status: JobStatus, reconcileJob: (uid: string) => void) {
    this.c = c;
    this.status = status;
    this.reconcileJob = reconcileJob;
  }

  private podGroupDef(): ResourceDef | undefined {
    return this.c.def('scheduling.x-k8s.io', 'podgroups');
  }

  ensurePodGroup(j: SimJob): void {
    const def = this.podGroupDef();
    const job = this.c.api.peek(j.def, j.ns, j.name);
    if (!def || !job || this.c.api.peek(def, j.ns, j.name)) return;
    const podSets: PodSet[] = podSetsOf(this.c.api, j.def, job);
    const minMember = podSets.reduce((n, p) => n + p.count, 0);
    const minResources: Json = {};
    const total: Record<string, number> = {};
    for (const p of podSets)
      for (const [r, v] of Object.entries(p.requests)) total[r] = (total[r] ?? 0) + v * p.count;
    for (const [r, v] of Object.entries(total)) minResources[r] = formatQuantity(r, v);
    const spec: Json = { minMember, minResources };
    if (j.def.kind === 'TrainJob') spec.scheduleTimeoutSeconds = 60;
    this.c.api.create(
      def,
      def.storageVersion,
      j.ns,
      {
        apiVersion: `scheduling.x-k8s.io/${def.storageVersion}`,
        kind: 'PodGroup',
        metadata: {
          name: j.name,
          namespace: j.ns,
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
    this.setPodGroupPhase(j, 'Pending');
    this.c.markDirty();
  }

  /**
   * A job that is not suspended but whose PodGroup waits for room: its pods exist and the
   * coscheduling plugin's PreFilter keeps them unschedulable (`resource gap`). The PodGroup goes
   * `Scheduling` (0 running) as the real PodGroup controller moves it once minMember pods exist,
   * placed or not (scheduler-plugins pkg/controllers/podgroup_controller.go).
   */
  gatedPods(j: SimJob, job: Json): void {
    if (this.c.pods.of(this.c.owner(j)).length > 0) {
      this.podGroupScheduling(j);
      return;
    }
    const total: Record<string, number> = {};
    for (const ps of podSetsOf(this.c.api, j.def, job)) {
      for (const [r, v] of Object.entries(ps.requests)) total[r] = (total[r] ?? 0) + v * ps.count;
    }
    const gap = Object.keys(total)
      .sort()
      .map((r) => `${r}:${formatQuantity(r, total[r]!)}`)
      .join(' ');
    this.c.pods.create(
      this.c.owner(j),
      job,
      'Unschedulable',
      `0/1 nodes are available: resource gap: map[${gap}].`,
    );
    this.podGroupScheduling(j);
    if (j.def.kind === 'TrainJob') {
      this.c.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.jobsStatus = this.status.jobsStatus(j, o, 'pending');
          o.status = st;
        },
        'status',
      );
    }
  }

  /** A waiting gang's PodGroup, Pending until its pods exist, then Scheduling (see gatedPods). */
  private podGroupScheduling(j: SimJob): void {
    const def = this.podGroupDef();
    const pg = def && j.podGroup ? this.c.api.peek(def, j.ns, j.name) : undefined;
    if (pg && obj(pg.status).phase === 'Pending') this.setPodGroupPhase(j, 'Scheduling');
  }

  setPodGroupPhase(j: SimJob, phase: 'Pending' | 'Scheduling' | 'Running' | 'Finished' | 'Failed'): void {
    if (!j.podGroup) return;
    const def = this.podGroupDef();
    const pg = def ? this.c.api.peek(def, j.ns, j.name) : undefined;
    if (!def || !pg) return;
    const min = Number(obj(pg.spec).minMember ?? 1);
    this.c.api.mutate(
      def,
      j.ns,
      j.name,
      (o) => {
        const st = obj(o.status);
        st.phase = phase;
        st.running = phase === 'Running' ? min : 0;
        st.succeeded = phase === 'Finished' ? min : 0;
        st.failed = phase === 'Failed' ? 1 : 0;
        st.scheduleStartTime ??= this.c.now;
        o.status = st;
      },
      'status',
    );
  }

  private capacity(): Record<string, number> | undefined {
    const src = this.c.o.capacity;
    if (src) return Object.fromEntries(Object.entries(src).map(([k, v]) => [k, parseQuantity(v)]));
    if (this.c.o.queues.length === 0) return undefined;
    const out: Record<string, number> = {};
    for (const q of this.c.o.queues)
      for (const [k, v] of Object.entries(q.quota)) out[k] = (out[k] ?? 0) + parseQuantity(v);
    return out;
  }

  admitPodGroups(): void {
    const def = this.podGroupDef();
    if (!def) return;
    const cap = this.capacity();
    const used: Record<string, number> = {};
    const waiting: SimJob[] = [];
    for (const j of this.c.jobs.values()) {
      if (j.gate !== 'podgroup' || j.state === 'finished') continue;
      const pg = this.c.api.peek(def, j.ns, j.name);
      if (!pg) continue;
      const res = obj(obj(pg.spec).minResources);
      if (j.gateOpen) {
        for (const [r, v] of Object.entries(res)) used[r] = (used[r] ?? 0) + parseQuantity(v);
      } else waiting.push(j);
    }
    waiting.sort((a, b) => a.createdAt - b.createdAt);
    for (const j of waiting) {
      if (j.neverAdmit) continue;
      const pg = this.c.api.peek(def, j.ns, j.name)!;
      const res = Object.fromEntries(
        Object.entries(obj(obj(pg.spec).minResources)).map(([k, v]) => [k, parseQuantity(v)]),
      );
      // Resources the capacity does not list are not constrained.
      const ok =
        !cap ||
        Object.entries(res).every(([r, v]) => v === 0 || !(r in cap) || (used[r] ?? 0) + v <= cap[r]!);
      if (!ok) continue;
      for (const [r, v] of Object.entries(res)) used[r] = (used[r] ?? 0) + v;
      j.gateOpen = true;
      this.c.stats.admitted++;
      this.setPodGroupPhase(j, 'Scheduling');
      this.reconcileJob(j.uid);
    }
  }
}
