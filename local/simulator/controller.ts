import type { Json, WatchEvent } from './apiserver.ts';
import { rfc3339 } from './clock.ts';
import { type Disruption, disruptJob } from './disruption.ts';
import { InferenceServiceSim, ISVC_GROUP } from './inference-services.ts';
import { JobLifecycle } from './job-lifecycle.ts';
import { JobStatus } from './job-status.ts';
import { isJobDef, TRAINER_GROUP } from './jobs.ts';
import { isTrue } from './kueue.ts';
import { KueueAdmission } from './kueue-admission.ts';
import { type AdminEvictionReason, KueueEviction } from './kueue-eviction.ts';
import { KueueObjects } from './kueue-objects.ts';
import { PodGroups } from './podgroups.ts';
import {
  type ControllerOptions,
  type ControllerStats,
  KUEUE,
  meta,
  obj,
  SimCore,
  type SimJob,
} from './sim-core.ts';
import { Training } from './training.ts';

export type { Disruption } from './disruption.ts';
export { EVICTION_REQUEUE_SECONDS } from './kueue-eviction.ts';
export {
  type ControllerOptions,
  type ControllerStats,
  KUEUE,
  type QueueConfig,
  SIM_ANNOTATIONS,
} from './sim-core.ts';

/**
 * The simulated controllers, driven by simulated time: Kueue (Workloads, quota per
 * ClusterQueue, all-or-nothing admission in priority-then-FIFO order, optional preemption of
 * lower priorities), the coscheduling plugin (PodGroups against a cluster capacity), the
 * Kubeflow Trainer (TrainJob conditions, jobsStatus, trainerStatus, deadlines) and the Training
 * Operator (v1 conditions). Work happens in a discrete-event loop: every tick processes the
 * events due up to the clock's "now" in time order — job created, pods ready, progress report,
 * failure, completion, deadline — and re-runs admission right after anything that frees or
 * claims capacity, so the order of events is the same at any speed.
 */

export class Controllers {
  private readonly c: SimCore;
  private readonly status: JobStatus;
  private readonly training: Training;
  private readonly kueue: KueueObjects;
  private readonly eviction: KueueEviction;
  private readonly admission: KueueAdmission;
  private readonly podGroups: PodGroups;
  private readonly jobs: JobLifecycle;
  private readonly isvcs: InferenceServiceSim;
  private readonly reconcileQueued = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private readonly unsubscribe: () => void;

  constructor(o: ControllerOptions) {
    const c = new SimCore(o);
    this.c = c;
    const reconcileJob = (uid: string) => this.jobs.reconcileJob(uid);
    this.status = new JobStatus(c);
    this.training = new Training(
      c,
      this.status,
      (j, ok, why) => this.jobs.finish(j, ok, why),
      () => this.tick(),
    );
    this.kueue = new KueueObjects(c);
    this.eviction = new KueueEviction(c, this.kueue, reconcileJob);
    this.admission = new KueueAdmission(c, this.kueue, this.eviction, reconcileJob);
    this.podGroups = new PodGroups(c, this.status, reconcileJob);
    this.jobs = new JobLifecycle(c, this.status, this.training, this.kueue, this.podGroups);
    this.isvcs = new InferenceServiceSim(c);
    this.unsubscribe = o.api.onEvent((e) => this.observe(e));
  }

  /** Stop observing the store (a simulator started without controllers). */
  detach(): void {
    this.unsubscribe();
  }

  // -------------------------------------------------------------------------------------------
  // setup

  /** Queues, flavors and priority classes from the options (Kueue mode). */
  seed(): void {
    this.kueue.seed();
  }

  start(tickMs: number): void {
    this.timer = setInterval(() => this.tick(), tickMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.c.inflight]);
  }

  /** Wait for in-flight uploads (tests). */
  async drain(): Promise<void> {
    while (this.c.inflight.size > 0) await Promise.allSettled([...this.c.inflight]);
  }

  snapshot(): ControllerStats {
    let running = 0;
    let pending = 0;
    for (const j of this.c.jobs.values()) {
      if (j.state === 'running' || j.state === 'finishing') running++;
      else if (j.state === 'waiting') pending++;
    }
    return { ...this.c.stats, running, pending, simTime: rfc3339(this.c.vt) };
  }

  // -------------------------------------------------------------------------------------------
  // observing the store

  /** Run `fn` at the current simulated time, in order with everything else (admin calls use this). */
  enqueue(fn: () => void, at = this.c.o.clock.now()): void {
    this.c.enqueue(fn, at);
  }

  private observe(e: WatchEvent): void {
    const { def, object, type } = e;
    const m = meta(object);
    if (isJobDef(def)) {
      const uid = String(m.uid);
      if (type === 'ADDED') this.c.enqueue(() => this.jobs.onJobCreated(def, object));
      else if (type === 'DELETED') this.c.enqueue(() => this.jobs.onJobDeleted(uid));
      else if (!this.reconcileQueued.has(uid)) {
        this.reconcileQueued.add(uid);
        this.c.enqueue(() => {
          this.reconcileQueued.delete(uid);
          this.jobs.reconcileJob(uid);
        });
      }
      return;
    }
    if (def.group === KUEUE.group) {
      if (def.plural === 'workloads' && type === 'ADDED') this.admission.arrived(String(m.uid));
      if (def.plural === 'workloads' && type === 'DELETED') {
        this.admission.forget(String(m.uid));
        this.eviction.forget(String(m.uid));
        this.c.enqueue(() => this.c.markDirty());
      }
      if (
        def.plural === 'clusterqueues' ||
        def.plural === 'localqueues' ||
        def.plural === 'workloadpriorityclasses'
      ) {
        if (type !== 'MODIFIED' || !this.ticking) this.c.enqueue(() => this.c.markDirty());
      }
      return;
    }
    if (def.group === ISVC_GROUP && def.plural === 'inferenceservices') {
      this.isvcs.observe(e);
      return;
    }
    if (def.group === 'scheduling.x-k8s.io' && type === 'DELETED') {
      this.c.enqueue(() => this.c.markDirty());
      return;
    }
    if (def.builtin === 'namespaces' && type === 'ADDED' && this.c.o.gang === 'kueue') {
      const ns = String(m.name);
      this.c.enqueue(() => this.kueue.ensureLocalQueues(ns));
      return;
    }
    if (
      def.group === TRAINER_GROUP &&
      (def.plural === 'clustertrainingruntimes' || def.plural === 'trainingruntimes') &&
      type === 'ADDED'
    ) {
      this.c.enqueue(() => {
        for (const j of this.c.jobs.values()) if (j.state === 'waiting') this.jobs.ensureGate(j);
        this.c.markDirty();
      });
    }
  }

  // -------------------------------------------------------------------------------------------
  // the event loop

  /** Process everything due up to the clock's now (called by the timer; tests may call it). */
  tick(): void {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const target = this.c.o.clock.now();
      for (let guard = 0; guard < 1_000_000; guard++) {
        const q = this.c.queue[this.c.queueHead];
        const t = this.nextTimed();
        const timer = this.c.timers[0];
        const qAt = q ? Math.max(q.at, this.c.vt) : Number.POSITIVE_INFINITY;
        const tAt = t ? Math.max(t.at, this.c.vt) : Number.POSITIVE_INFINITY;
        const xAt = timer ? Math.max(timer.at, this.c.vt) : Number.POSITIVE_INFINITY;
        const at = Math.min(qAt, tAt, xAt);
        if (at > target) break;
        this.c.vt = at;
        if (xAt <= qAt && xAt <= tAt && timer) {
          this.c.timers.shift();
          timer.fn();
        } else if (qAt <= tAt && q) {
          this.c.queueHead++;
          if (this.c.queueHead > 1024 && this.c.queueHead * 2 > this.c.queue.length) {
            this.c.queue = this.c.queue.slice(this.c.queueHead);
            this.c.queueHead = 0;
          }
          q.fn();
        } else if (t) {
          this.jobs.advanceJob(t.job);
        }
        // One scheduling pass after everything that happens at the same instant.
        if (this.c.dirty && !this.moreAt(at)) {
          this.c.dirty = false;
          this.admit();
        }
      }
      this.c.vt = Math.max(this.c.vt, target);
      if (this.c.dirty) {
        this.c.dirty = false;
        this.admit();
      }
    } catch (e) {
      this.c.o.log(`simulator controller error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    } finally {
      this.ticking = false;
    }
  }

  /** Whether another queued change or timer is due at exactly `at` (still to be processed). */
  private moreAt(at: number): boolean {
    const q = this.c.queue[this.c.queueHead];
    if (q && Math.max(q.at, this.c.vt) <= at) return true;
    const timer = this.c.timers[0];
    return timer !== undefined && Math.max(timer.at, this.c.vt) <= at;
  }

  private nextTimed(): { at: number; job: SimJob } | undefined {
    let best: { at: number; job: SimJob } | undefined;
    for (const j of this.c.jobs.values()) {
      const at = this.jobs.nextEvent(j);
      if (at !== undefined && (!best || at < best.at)) best = { at, job: j };
    }
    return best;
  }

  /** One scheduling pass: Kueue's over every ClusterQueue, or the coscheduling plugin's. */
  private admit(): void {
    if (this.c.o.gang === 'coscheduling') {
      this.podGroups.admitPodGroups();
      return;
    }
    if (this.c.o.gang !== 'kueue') return;
    this.admission.admit();
  }

  /**
   * What the simulated training script in a pod's container has printed (training.ts); a pod of
   * no simulated job has printed nothing. `last`: the run before a crash (CrashLoopBackOff).
   */
  podLog(pod: Json, container: string, last: boolean): string[] {
    return this.training.podLog(pod, container, last);
  }

  // -------------------------------------------------------------------------------------------
  // admin calls

  /** Evict a workload as Kueue does (kueue-eviction.ts). */
  evict(wl: Json, reason: string, message: string, prepare?: (st: Json) => void): void {
    this.eviction.evict(wl, reason, message, prepare);
  }

  /** Deactivate a Workload (kueue-eviction.ts). */
  deactivate(wl: Json, cause?: string, why?: string): void {
    this.eviction.deactivate(wl, cause, why);
  }

  /** Admin: deactivate a job's Workload, as a person setting `spec.active=false` would. */
  deactivateJob(ns: string, name: string, plural?: string): boolean {
    for (const j of this.c.jobs.values()) {
      if (j.ns !== ns || j.name !== name || (plural && j.def.plural !== plural)) continue;
      const wl = this.kueue.workloadOf(j);
      if (!wl || isTrue(wl, 'Finished') || obj(wl.spec).active === false) return false;
      this.eviction.deactivate(wl);
      return true;
    }
    return false;
  }

  /** Admin: disrupt a running TrainJob's pods so that the job fails (disruption.ts). */
  disruptJob(ns: string, name: string, cause: Disruption, plural?: string): boolean {
    return disruptJob(this.c, (j, ok, why) => this.jobs.finish(j, ok, why), ns, name, cause, plural);
  }

  /**
   * Admin: preempt a job (evict its Workload, or fail its PodGroup-gated run back to pending).
   * `reason`: another Kueue eviction reason instead of Preempted (Kueue-gated jobs only).
   */
  preemptJob(ns: string, name: string, plural?: string, reason: AdminEvictionReason = 'Preempted'): boolean {
    for (const j of this.c.jobs.values()) {
      if (j.ns !== ns || j.name !== name || (plural && j.def.plural !== plural)) continue;
      const wl = this.kueue.workloadOf(j);
      if (wl && isTrue(wl, 'QuotaReserved') && !isTrue(wl, 'Finished')) {
        this.eviction.evictFor(wl, reason);
        return true;
      }
      if (reason !== 'Preempted') return false;
      if (j.gate === 'podgroup' && j.gateOpen && j.state !== 'finished') {
        j.gateOpen = false;
        j.state = 'waiting';
        j.runStart = undefined;
        j.ready = false;
        this.podGroups.setPodGroupPhase(j, 'Pending');
        this.c.markDirty();
        return true;
      }
      return false;
    }
    return false;
  }
}
