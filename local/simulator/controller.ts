import type { S3Client } from '@aws-sdk/client-s3';
import type { ApiServer, Json, WatchEvent } from './apiserver.ts';
import { rfc3339, type SimClock } from './clock.ts';
import type { Gang } from './crds.ts';
import {
  activeDeadlineSeconds,
  findRuntime,
  formatQuantity,
  isJobDef,
  isSuspended,
  LEGACY_KINDS,
  type PodSet,
  parseQuantity,
  podSetsOf,
  replicatedJobs,
  setSuspended,
  TRAINER_GROUP,
  trainerContainer,
} from './jobs.ts';
import {
  assignFlavor,
  type FlavorConfig,
  findCondition,
  flavorOf,
  isTrue,
  type KueueVersion,
  kueueManages,
  kueueNeedsRuntimePatch,
  kueueReplicatedJobPatches,
  nominalQuota,
  podRequests,
  REQUEUING_BACKOFF_BASE_SECONDS,
  REQUEUING_BACKOFF_MAX_SECONDS,
  requeueBackoffSeconds,
  setCondition,
  WAIT_FOR_PODS_READY_TIMEOUT_SECONDS,
  type WaitForPodsReady,
  workloadName,
} from './kueue.ts';
import { trainingLog } from './logs.ts';
import {
  finalAccuracy,
  finalLoss,
  type Hyperparameters,
  metricsAt,
  parseHyperparameters,
} from './objective.ts';
import { parseS3Uri, readCheckpoint, writeCheckpoint, writeMetricObject, writeOutput } from './output.ts';
import {
  crashLoopBackoffSeconds,
  jobsStatusFromPods,
  POD_FAILURE_MESSAGE_ANNOTATION,
  type PodOwner,
  type PodScenario,
  Pods,
  podScenarioOf,
} from './pods.ts';
import type { ResourceDef } from './registry.ts';
import type { TrainerVersion } from './stubs.ts';

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

const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const obj = (v: unknown): Json => (isObj(v) ? v : {});
const meta = (o: Json): Json => obj(o.metadata);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** What `disruptJob` does to a running job (see there). */
export type Disruption = 'node-lost' | 'preempted' | 'evicted';

/**
 * What holds a disrupted pod Terminating in the simulator: on a lost node the kubelet never confirms
 * the deletion; elsewhere the container has its grace period to stop.
 */
const DISRUPTION_FINALIZER = {
  nodeLost: 'sim.gantry.dev/node-unreachable',
  grace: 'sim.gantry.dev/termination-grace',
} as const;

/** terminationGracePeriodSeconds' default (30 s). */
const TERMINATION_GRACE_MS = 30_000;

export const SIM_ANNOTATIONS = {
  /** Simulated seconds of training once the gang runs (default 60). */
  duration: 'sim.gantry.dev/duration-seconds',
  /** Fail when progress reaches this percentage. */
  failAtPercent: 'sim.gantry.dev/fail-at-percent',
  failReason: 'sim.gantry.dev/fail-reason',
  failMessage: 'sim.gantry.dev/fail-message',
  /** The gang is never admitted (Kueue keeps it pending, the PodGroup stays Pending). */
  neverAdmit: 'sim.gantry.dev/never-admit',
  /** Seconds between admission and pods ready (image pulls, scheduling). */
  slowStart: 'sim.gantry.dev/slow-start-seconds',
  /** Size of the model file written to the output location (default 1024). */
  outputBytes: 'sim.gantry.dev/output-bytes',
  /** Write nothing to the output location. */
  noOutput: 'sim.gantry.dev/no-output',
} as const;

export const KUEUE = {
  queueLabel: 'kueue.x-k8s.io/queue-name',
  priorityLabel: 'kueue.x-k8s.io/priority-class',
  jobUidLabel: 'kueue.x-k8s.io/job-uid',
  group: 'kueue.x-k8s.io',
  flavor: 'default-flavor',
  manager: 'kueue.x-k8s.io/manager',
} as const;

/** Seconds an evicted Workload waits before Kueue requeues it (the default pod termination grace period). */
export const EVICTION_REQUEUE_SECONDS = 30;

export interface QueueConfig {
  /** LocalQueue name: the value of the job's `kueue.x-k8s.io/queue-name` label. */
  name: string;
  /** ClusterQueue it feeds (created with `quota` as nominal quota of flavor `default-flavor`). */
  clusterQueue: string;
  /** e.g. `{ 'nvidia.com/gpu': 8, cpu: 64, memory: '256Gi' }`. */
  quota: Record<string, number | string>;
  /** Namespaces that get this LocalQueue; default every namespace except kube-* (including ones created later). */
  namespaces?: string[];
  /** ClusterQueue `preemption.withinClusterQueue` (default Never, as Kueue defaults it). */
  preemption?: 'Never' | 'LowerPriority';
  queueingStrategy?: 'BestEffortFIFO' | 'StrictFIFO';
}

export interface ControllerOptions {
  api: ApiServer;
  clock: SimClock;
  trainerVersion: TrainerVersion | 'none';
  gang: Gang;
  queues: QueueConfig[];
  priorityClasses: Record<string, number>;
  /** Cluster capacity for coscheduling (default: the sum of the queues' quotas; none = unlimited). */
  capacity?: Record<string, number | string> | undefined;
  s3?: S3Client | undefined;
  defaultDurationSeconds: number;
  /** A job's pod scenario beyond its `sim.gantry.dev/pod-failure` annotation (SimulatorOptions.podFailure). */
  podFailure?: ((job: Json) => PodScenario | undefined) | undefined;
  /** Kueue's UnadmittedWorkloadsObservability gate: granular QuotaReserved reasons instead of `Pending`. */
  kueueGranularReasons: boolean;
  /** Write status.trainerStatus (Trainer v2.2+ with the TrainJobStatus gate). */
  trainerStatus: boolean;
  /** The training code writes metric objects under its GANTRY_METRICS_URI (needs `s3`). */
  metricChannel: boolean;
  /** The simulated training code saves its progress under GANTRY_CHECKPOINT_URI and resumes from it. */
  checkpoints: boolean;
  /** Kueue release line: from 0.17 a TrainJob starts only through Kueue's runtime patch (Trainer v2.2+). */
  kueueVersion: KueueVersion;
  /** Kueue's waitForPodsReady; undefined = off (Kueue 0.16's default; 0.19 defaults it on). */
  waitForPodsReady: WaitForPodsReady | undefined;
  /** Node labels and tolerations of the ResourceFlavor `default-flavor` (none by default). */
  flavor: FlavorConfig;
  /** Kueue's enabled `integrations.frameworks`: a queued job of another kind gets no Workload. */
  kueueIntegrations: readonly string[];
  log: (msg: string) => void;
}

type GateKind = 'kueue' | 'podgroup' | 'none';

interface SimJob {
  uid: string;
  def: ResourceDef;
  ns: string;
  name: string;
  gate: GateKind;
  createdAt: number;
  durationMs: number;
  slowStartMs: number;
  failAtPct: number | undefined;
  failReason: string | undefined;
  failMessage: string | undefined;
  neverAdmit: boolean;
  noOutput: boolean;
  outputBytes: number;
  hp: Hyperparameters;
  accuracy: number;
  outputUri: string | undefined;
  metricsUri: string | undefined;
  checkpointUri: string | undefined;
  /** Progress (0–1) of the checkpoint the training code resumed from (a later attempt of its run). */
  resumedFrom: number;
  state: 'waiting' | 'running' | 'finishing' | 'finished';
  /** Sim ms the current run's pods were created (admission or resume). */
  runStart: number | undefined;
  ready: boolean;
  nextProgressAt: number | undefined;
  deadlineBase: number;
  deadlineSeconds: number | undefined;
  upload: 'none' | 'started' | 'done' | 'failed';
  uploadError: string | undefined;
  /** The PodGroup is admitted (coscheduling). */
  gateOpen: boolean;
  everSuspended: boolean;
  /** spec.suspend (runPolicy.suspend) as last seen: kept here so the event loop need not read the store. */
  suspended: boolean;
  /** How the job's pods fail to start (`sim.gantry.dev/pod-failure`): they never become ready. */
  podScenario: PodScenario | undefined;
  podMessage: string | undefined;
  /** CrashLoopBackOff: sim ms of the next container restart. */
  nextCrashAt: number | undefined;
  /** Progress (0–1) and cause when the run finished: what its pods' logs end with. */
  ended?: {
    progress: number;
    why: 'Succeeded' | 'Injected' | 'DeadlineExceeded' | 'UploadFailed' | 'Disrupted';
  };
}

export interface ControllerStats {
  admitted: number;
  running: number;
  peakRunning: number;
  /** The most jobs that existed at once without having finished (pending, running or finishing). */
  peakUnfinished: number;
  pending: number;
  completed: number;
  failed: number;
  /** Sim time of the last processed event. */
  simTime: string;
}

function annotation(job: Json, key: string): string | undefined {
  const v = obj(meta(job).annotations)[key];
  return typeof v === 'string' ? v : undefined;
}

function numAnnotation(job: Json, key: string): number | undefined {
  const v = annotation(job, key);
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

export class Controllers {
  private readonly api: ApiServer;
  private readonly clock: SimClock;
  private readonly jobs = new Map<string, SimJob>();
  /** Changes observed in the store, in arrival order (their times never decrease). */
  private queue: Array<{ at: number; fn: () => void }> = [];
  private queueHead = 0;
  private readonly reconcileQueued = new Set<string>();
  /** Future work at a simulated time (e.g. an evicted Workload becoming admissible again). */
  private readonly timers: Array<{ at: number; fn: () => void }> = [];
  private seq = 0;
  /** Virtual time of the event being processed (ms). */
  private vt: number;
  private dirty = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly stats = { admitted: 0, peakRunning: 0, peakUnfinished: 0, completed: 0, failed: 0 };
  /** Order in which Workloads appeared: FIFO within a second (creationTimestamp's precision). */
  private readonly arrivals = new Map<string, number>();
  /** Workload uid → when its requeuing backoff ends, in simulated time (status.requeueState.requeueAt is a stamp). */
  private readonly requeueAtVt = new Map<string, number>();
  /** Workload uid → when waitForPodsReady last armed its timeout (its latest admission), simulated time. */
  private readonly admittedAtVt = new Map<string, number>();
  private readonly demands = new Map<
    string,
    {
      podSets: Array<{ name: string; count: number; per: Record<string, number> }>;
      total: Record<string, number>;
    }
  >();
  private ticking = false;

  private readonly o: ControllerOptions;

  private readonly unsubscribe: () => void;
  private readonly pods: Pods;

  constructor(o: ControllerOptions) {
    this.o = o;
    this.api = o.api;
    this.clock = o.clock;
    this.vt = o.clock.now();
    this.pods = new Pods(o.api, () => this.now);
    this.unsubscribe = this.api.onEvent((e) => this.observe(e));
  }

  /** Stop observing the store (a simulator started without controllers). */
  detach(): void {
    this.unsubscribe();
  }

  private def(group: string, plural: string): ResourceDef | undefined {
    return this.api.registry.get(group, plural);
  }

  /** The timestamp objects get now: wall clock unless the simulator stamps simulated time (clock.ts). */
  private get now(): string {
    // Simulated stamps are the event's own time (the loop may be catching up on a backlog).
    return rfc3339(this.o.clock.timestamps === 'simulated' ? this.vt : this.o.clock.stamp());
  }

  // -------------------------------------------------------------------------------------------
  // setup

  /** Queues, flavors and priority classes from the options (Kueue mode). */
  seed(): void {
    if (this.o.gang !== 'kueue') return;
    const rf = this.def(KUEUE.group, 'resourceflavors');
    const cqDef = this.def(KUEUE.group, 'clusterqueues');
    const wpc = this.def(KUEUE.group, 'workloadpriorityclasses');
    if (!rf || !cqDef) return;
    this.api.seed(rf, {
      apiVersion: `${KUEUE.group}/${rf.storageVersion}`,
      kind: 'ResourceFlavor',
      metadata: { name: KUEUE.flavor },
      spec: {
        ...(this.o.flavor.nodeLabels ? { nodeLabels: { ...this.o.flavor.nodeLabels } } : {}),
        ...(this.o.flavor.tolerations ? { tolerations: this.o.flavor.tolerations } : {}),
      },
    });
    const seen = new Set<string>();
    for (const q of this.o.queues) {
      if (seen.has(q.clusterQueue)) continue;
      seen.add(q.clusterQueue);
      const resources = Object.keys(q.quota);
      this.api.seed(cqDef, {
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
      for (const [name, value] of Object.entries(this.o.priorityClasses)) {
        this.api.seed(wpc, {
          apiVersion: `${KUEUE.group}/${wpc.storageVersion}`,
          kind: 'WorkloadPriorityClass',
          metadata: { name },
          value,
        });
      }
    }
    const nsDef = this.def('', 'namespaces')!;
    for (const n of this.api.peekAll(nsDef)) this.ensureLocalQueues(String(meta(n).name));
  }

  private ensureLocalQueues(ns: string): void {
    const lq = this.def(KUEUE.group, 'localqueues');
    if (!lq) return;
    for (const q of this.o.queues) {
      const wanted = q.namespaces ? q.namespaces.includes(ns) : !ns.startsWith('kube-');
      if (!wanted || this.api.peek(lq, ns, q.name)) continue;
      this.api.seed(lq, {
        apiVersion: `${KUEUE.group}/${lq.storageVersion}`,
        kind: 'LocalQueue',
        metadata: { name: q.name, namespace: ns },
        spec: { clusterQueue: q.clusterQueue },
      });
    }
  }

  start(tickMs: number): void {
    this.timer = setInterval(() => this.tick(), tickMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.inflight]);
  }

  /** Wait for in-flight uploads (tests). */
  async drain(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  snapshot(): ControllerStats {
    let running = 0;
    let pending = 0;
    for (const j of this.jobs.values()) {
      if (j.state === 'running' || j.state === 'finishing') running++;
      else if (j.state === 'waiting') pending++;
    }
    return { ...this.stats, running, pending, simTime: rfc3339(this.vt) };
  }

  // -------------------------------------------------------------------------------------------
  // observing the store

  /** Run `fn` at the current simulated time, in order with everything else (admin calls use this). */
  enqueue(fn: () => void, at = this.clock.now()): void {
    const last = this.queue[this.queue.length - 1];
    this.queue.push({ at: last && last.at > at ? last.at : at, fn });
  }

  private observe(e: WatchEvent): void {
    const { def, object, type } = e;
    const m = meta(object);
    if (isJobDef(def)) {
      const uid = String(m.uid);
      if (type === 'ADDED') this.enqueue(() => this.onJobCreated(def, object));
      else if (type === 'DELETED') this.enqueue(() => this.onJobDeleted(uid));
      else if (!this.reconcileQueued.has(uid)) {
        this.reconcileQueued.add(uid);
        this.enqueue(() => {
          this.reconcileQueued.delete(uid);
          this.reconcileJob(uid);
        });
      }
      return;
    }
    if (def.group === KUEUE.group) {
      if (def.plural === 'workloads' && type === 'ADDED') this.arrivals.set(String(m.uid), this.seq++);
      if (def.plural === 'workloads' && type === 'DELETED') {
        this.demands.delete(String(m.uid));
        this.arrivals.delete(String(m.uid));
        this.requeueAtVt.delete(String(m.uid));
        this.admittedAtVt.delete(String(m.uid));
        this.enqueue(() => this.markDirty());
      }
      if (
        def.plural === 'clusterqueues' ||
        def.plural === 'localqueues' ||
        def.plural === 'workloadpriorityclasses'
      ) {
        if (type !== 'MODIFIED' || !this.ticking) this.enqueue(() => this.markDirty());
      }
      return;
    }
    if (def.group === 'scheduling.x-k8s.io' && type === 'DELETED') {
      this.enqueue(() => this.markDirty());
      return;
    }
    if (def.builtin === 'namespaces' && type === 'ADDED' && this.o.gang === 'kueue') {
      const ns = String(m.name);
      this.enqueue(() => this.ensureLocalQueues(ns));
      return;
    }
    if (
      def.group === TRAINER_GROUP &&
      (def.plural === 'clustertrainingruntimes' || def.plural === 'trainingruntimes') &&
      type === 'ADDED'
    ) {
      this.enqueue(() => {
        for (const j of this.jobs.values()) if (j.state === 'waiting') this.ensureGate(j);
        this.markDirty();
      });
    }
  }

  private markDirty(): void {
    this.dirty = true;
  }

  private scheduleAt(at: number, fn: () => void): void {
    const i = this.timers.findIndex((t) => t.at > at);
    if (i < 0) this.timers.push({ at, fn });
    else this.timers.splice(i, 0, { at, fn });
  }

  // -------------------------------------------------------------------------------------------
  // the event loop

  /** Process everything due up to the clock's now (called by the timer; tests may call it). */
  tick(): void {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const target = this.clock.now();
      for (let guard = 0; guard < 1_000_000; guard++) {
        const q = this.queue[this.queueHead];
        const t = this.nextTimed();
        const timer = this.timers[0];
        const qAt = q ? Math.max(q.at, this.vt) : Number.POSITIVE_INFINITY;
        const tAt = t ? Math.max(t.at, this.vt) : Number.POSITIVE_INFINITY;
        const xAt = timer ? Math.max(timer.at, this.vt) : Number.POSITIVE_INFINITY;
        const at = Math.min(qAt, tAt, xAt);
        if (at > target) break;
        this.vt = at;
        if (xAt <= qAt && xAt <= tAt && timer) {
          this.timers.shift();
          timer.fn();
        } else if (qAt <= tAt && q) {
          this.queueHead++;
          if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
            this.queue = this.queue.slice(this.queueHead);
            this.queueHead = 0;
          }
          q.fn();
        } else if (t) {
          this.advanceJob(t.job);
        }
        // One scheduling pass after everything that happens at the same instant.
        if (this.dirty && !this.moreAt(at)) {
          this.dirty = false;
          this.admit();
        }
      }
      this.vt = Math.max(this.vt, target);
      if (this.dirty) {
        this.dirty = false;
        this.admit();
      }
    } catch (e) {
      this.o.log(`simulator controller error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    } finally {
      this.ticking = false;
    }
  }

  /** Whether another queued change or timer is due at exactly `at` (still to be processed). */
  private moreAt(at: number): boolean {
    const q = this.queue[this.queueHead];
    if (q && Math.max(q.at, this.vt) <= at) return true;
    const timer = this.timers[0];
    return timer !== undefined && Math.max(timer.at, this.vt) <= at;
  }

  private nextTimed(): { at: number; job: SimJob } | undefined {
    let best: { at: number; job: SimJob } | undefined;
    for (const j of this.jobs.values()) {
      const at = this.nextEvent(j);
      if (at !== undefined && (!best || at < best.at)) best = { at, job: j };
    }
    return best;
  }

  private readyAt(j: SimJob): number {
    return (j.runStart ?? 0) + j.slowStartMs;
  }

  private endAt(j: SimJob): number {
    return this.readyAt(j) + j.durationMs * (1 - j.resumedFrom);
  }

  private failAt(j: SimJob): number | undefined {
    return j.failAtPct === undefined
      ? undefined
      : this.readyAt(j) + j.durationMs * Math.max(0, j.failAtPct / 100 - j.resumedFrom);
  }

  private deadlineAt(j: SimJob): number | undefined {
    if (j.deadlineSeconds === undefined) return undefined;
    if (j.def.kind !== 'TrainJob' && j.state === 'waiting') return undefined;
    return j.deadlineBase + j.deadlineSeconds * 1000;
  }

  private uploadAt(j: SimJob): number | undefined {
    if (j.upload !== 'none' || j.failAtPct !== undefined || !this.wantsOutput(j)) return undefined;
    return Math.max(this.readyAt(j), this.endAt(j) - j.durationMs * 0.1);
  }

  private nextEvent(j: SimJob): number | undefined {
    if (j.state === 'finished') return undefined;
    const suspended = this.isJobSuspended(j);
    const candidates: Array<number | undefined> = [];
    if (j.def.kind === 'TrainJob' && !suspended) candidates.push(this.deadlineAt(j));
    if (j.state === 'running') {
      if (j.def.kind !== 'TrainJob') candidates.push(this.deadlineAt(j));
      if (j.podScenario !== undefined) candidates.push(j.nextCrashAt);
      else if (!j.ready) candidates.push(this.readyAt(j));
      else {
        candidates.push(j.nextProgressAt, this.uploadAt(j), this.failAt(j));
        if (j.failAtPct === undefined) candidates.push(this.endAt(j));
      }
    }
    let best: number | undefined;
    for (const c of candidates) if (c !== undefined && (best === undefined || c < best)) best = c;
    return best;
  }

  private isJobSuspended(j: SimJob): boolean {
    return j.suspended;
  }

  /** Handle whatever is due for `j` at vt. */
  private advanceJob(j: SimJob): void {
    const t = this.vt;
    const deadline = this.deadlineAt(j);
    if (deadline !== undefined && deadline <= t && (j.def.kind !== 'TrainJob' || !this.isJobSuspended(j))) {
      this.finish(j, false, 'DeadlineExceeded');
      return;
    }
    if (j.state !== 'running') return;
    if (j.podScenario !== undefined) {
      if (j.nextCrashAt !== undefined && j.nextCrashAt <= t) {
        const restarts = this.pods.crash(this.owner(j), j.podMessage);
        j.nextCrashAt = t + crashLoopBackoffSeconds(restarts) * 1000;
      }
      return;
    }
    if (!j.ready && this.readyAt(j) <= t) {
      j.ready = true;
      this.onPodsReady(j);
      return;
    }
    const fail = this.failAt(j);
    if (fail !== undefined && fail <= t) {
      this.finish(j, false, 'Injected');
      return;
    }
    const up = this.uploadAt(j);
    if (up !== undefined && up <= t) {
      this.startUpload(j);
      return;
    }
    if (j.failAtPct === undefined && this.endAt(j) <= t) {
      if ((this.wantsOutput(j) || this.reportsMetrics(j)) && j.upload !== 'done' && j.upload !== 'failed') {
        if (j.upload === 'none') this.startUpload(j);
        j.state = 'finishing';
        return;
      }
      this.finish(j, j.upload !== 'failed', j.upload === 'failed' ? 'UploadFailed' : 'Succeeded');
      return;
    }
    if (j.nextProgressAt !== undefined && j.nextProgressAt <= t) this.reportProgress(j);
  }

  // -------------------------------------------------------------------------------------------
  // jobs

  private onJobCreated(def: ResourceDef, created: Json): void {
    const m = meta(created);
    const uid = String(m.uid);
    const job = this.api.peek(def, String(m.namespace), String(m.name));
    if (!job || meta(job).uid !== uid || this.jobs.has(uid)) return;
    const labels = obj(m.labels);
    // Kueue runs no controller for a disabled framework: the queue label is just a label then.
    const queued =
      typeof labels[KUEUE.queueLabel] === 'string' && kueueManages(this.o.kueueIntegrations, def);
    const gate: GateKind =
      this.o.gang === 'kueue'
        ? queued
          ? 'kueue'
          : 'none'
        : this.o.gang === 'coscheduling'
          ? 'podgroup'
          : 'none';
    const container = trainerContainer(this.api, def, job);
    const hp = parseHyperparameters(container.args, container.env);
    // The simulated training code crashes at this progress: the job's annotation, or the env the
    // run request gave its trainer (SIM_FAIL_AT_PERCENT), so a request through the API can ask for it.
    const envFail = Number(container.env.SIM_FAIL_AT_PERCENT ?? Number.NaN);
    const failPct =
      numAnnotation(job, SIM_ANNOTATIONS.failAtPercent) ??
      (Number.isFinite(envFail) && envFail >= 0 ? envFail : undefined);
    const createdAt = this.vt;
    const j: SimJob = {
      uid,
      def,
      ns: String(m.namespace),
      name: String(m.name),
      gate,
      createdAt,
      durationMs: (numAnnotation(job, SIM_ANNOTATIONS.duration) ?? this.o.defaultDurationSeconds) * 1000,
      slowStartMs: (numAnnotation(job, SIM_ANNOTATIONS.slowStart) ?? 0) * 1000,
      failAtPct: failPct === undefined ? undefined : Math.min(100, failPct),
      failReason: annotation(job, SIM_ANNOTATIONS.failReason),
      failMessage: annotation(job, SIM_ANNOTATIONS.failMessage),
      neverAdmit:
        annotation(job, SIM_ANNOTATIONS.neverAdmit) !== undefined &&
        annotation(job, SIM_ANNOTATIONS.neverAdmit) !== 'false',
      noOutput:
        annotation(job, SIM_ANNOTATIONS.noOutput) !== undefined &&
        annotation(job, SIM_ANNOTATIONS.noOutput) !== 'false',
      outputBytes: Math.floor(numAnnotation(job, SIM_ANNOTATIONS.outputBytes) ?? 1024),
      hp,
      accuracy: finalAccuracy(hp),
      outputUri: container.env.GANTRY_OUTPUT_URI,
      metricsUri: container.env.GANTRY_METRICS_URI,
      checkpointUri: container.env.GANTRY_CHECKPOINT_URI,
      resumedFrom: 0,
      state: 'waiting',
      runStart: undefined,
      ready: false,
      nextProgressAt: undefined,
      deadlineBase: this.vt,
      deadlineSeconds:
        this.o.trainerVersion === '2.1' && def.kind === 'TrainJob'
          ? undefined
          : activeDeadlineSeconds(def, job),
      upload: 'none',
      uploadError: undefined,
      gateOpen: gate !== 'podgroup',
      everSuspended: false,
      suspended: isSuspended(def, job),
      podScenario: podScenarioOf(job) ?? this.o.podFailure?.(job),
      podMessage: annotation(job, POD_FAILURE_MESSAGE_ANNOTATION),
      nextCrashAt: undefined,
    };
    this.jobs.set(uid, j);
    this.resumeFromCheckpoint(j);
    this.updatePeak();
    this.initialStatus(j, job);
    this.ensureGate(j);
    this.reconcileJob(uid);
  }

  private onJobDeleted(uid: string): void {
    const j = this.jobs.get(uid);
    if (!j) return;
    // Pods left Terminating on a lost node go once their job is gone (the node object is deleted by
    // then, and the pod garbage collector force-deletes pods bound to a node that does not exist).
    this.pods.release(this.owner(j), DISRUPTION_FINALIZER.nodeLost);
    this.jobs.delete(uid);
    this.pods.forget(uid);
    this.markDirty();
  }

  /** Start or stop the job's run to match its spec and its gang gate. */
  private reconcileJob(uid: string): void {
    const j = this.jobs.get(uid);
    if (!j || j.state === 'finished') return;
    const job = this.api.peek(j.def, j.ns, j.name);
    if (!job || meta(job).uid !== uid) return;
    if (isTrue(job, 'Complete') || isTrue(job, 'Failed') || isTrue(job, 'Succeeded')) {
      j.state = 'finished';
      return;
    }
    let suspended = isSuspended(j.def, job);
    if (
      j.gate === 'kueue' &&
      !suspended &&
      j.state === 'waiting' &&
      !isTrue(this.workloadOf(j) ?? {}, 'QuotaReserved')
    ) {
      // Kueue stops a queued job that runs without admission (e.g. created past its webhook).
      this.api.mutate(j.def, j.ns, j.name, (o) => setSuspended(j.def, o, true));
      suspended = true;
    }
    j.suspended = suspended;
    const canRun = !suspended && j.gateOpen && !(j.neverAdmit && j.gate === 'none');
    if (!suspended && !j.gateOpen && j.state === 'waiting') this.gatedPods(j, job);
    if (canRun && j.state === 'waiting') this.startRun(j, job);
    else if (suspended && (j.state === 'running' || j.state === 'finishing')) this.stopRun(j);
    else if (suspended && j.state === 'waiting' && !this.hasSuspendedCondition(j, job))
      this.writeSuspended(j, true);
  }

  private hasSuspendedCondition(j: SimJob, job: Json): boolean {
    return j.def.kind === 'TrainJob' ? isTrue(job, 'Suspended') : isTrue(job, 'Suspended');
  }

  private startRun(j: SimJob, job: Json): void {
    j.state = 'running';
    j.runStart = this.vt;
    j.ready = false;
    j.upload = 'none';
    j.nextProgressAt = undefined;
    if (j.def.kind === 'TrainJob' && (isTrue(job, 'Suspended') || j.everSuspended)) j.deadlineBase = this.vt;
    if (j.def.kind !== 'TrainJob') j.deadlineBase = this.vt;
    // Pods the gang scheduler held back (a PodGroup that waited) are placed now: they start afresh here.
    this.pods.remove(this.owner(j), false);
    this.pods.create(this.owner(j), job, j.podScenario, j.podMessage);
    if (j.podScenario === 'CrashLoopBackOff') j.nextCrashAt = this.vt + crashLoopBackoffSeconds(1) * 1000;
    this.writeRunning(j, job);
    this.updatePeak();
    if (j.slowStartMs === 0 && j.podScenario === undefined) {
      j.ready = true;
      this.onPodsReady(j);
    }
  }

  private stopRun(j: SimJob): void {
    j.state = 'waiting';
    j.runStart = undefined;
    j.ready = false;
    j.nextProgressAt = undefined;
    j.nextCrashAt = undefined;
    // Suspended: the Job controller deletes the pods (evicted ones carry DisruptionTarget first).
    this.pods.remove(this.owner(j), true);
    this.writeSuspended(j, true);
    this.markDirty();
  }

  private updatePeak(): void {
    let running = 0;
    let unfinished = 0;
    for (const x of this.jobs.values()) {
      if (x.state === 'running' || x.state === 'finishing') running++;
      if (x.state !== 'finished') unfinished++;
    }
    if (running > this.stats.peakRunning) this.stats.peakRunning = running;
    if (unfinished > this.stats.peakUnfinished) this.stats.peakUnfinished = unfinished;
  }

  private progressInterval(j: SimJob): number {
    return Math.max(j.durationMs / 10, 5000);
  }

  /**
   * A job that is not suspended but whose PodGroup waits for room: its pods exist and the
   * coscheduling plugin's PreFilter keeps them unschedulable (`resource gap`). The PodGroup goes
   * `Scheduling` (0 running) as the real PodGroup controller moves it once minMember pods exist,
   * placed or not (scheduler-plugins pkg/controllers/podgroup_controller.go).
   */
  private gatedPods(j: SimJob, job: Json): void {
    if (this.pods.of(this.owner(j)).length > 0) {
      this.podGroupScheduling(j);
      return;
    }
    const total: Record<string, number> = {};
    for (const ps of podSetsOf(this.api, j.def, job)) {
      for (const [r, v] of Object.entries(ps.requests)) total[r] = (total[r] ?? 0) + v * ps.count;
    }
    const gap = Object.keys(total)
      .sort()
      .map((r) => `${r}:${formatQuantity(r, total[r]!)}`)
      .join(' ');
    this.pods.create(
      this.owner(j),
      job,
      'Unschedulable',
      `0/1 nodes are available: resource gap: map[${gap}].`,
    );
    this.podGroupScheduling(j);
    if (j.def.kind === 'TrainJob') {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.jobsStatus = this.jobsStatus(j, o, 'pending');
          o.status = st;
        },
        'status',
      );
    }
  }

  /**
   * What the simulated training script in a pod's container has printed (local/simulator/logs.ts):
   * derived from the run's progress, so the log grows as the run goes; a pod of no simulated job
   * has printed nothing. `last`: the run before a crash (CrashLoopBackOff).
   */
  podLog(pod: Json, container: string, last: boolean): string[] {
    const owner = arr(meta(pod).ownerReferences).map(obj)[0];
    const j = owner ? this.jobs.get(String(owner.uid)) : undefined;
    if (!j) return [];
    const labels = obj(meta(pod).labels) as Record<string, string>;
    const pods = this.pods.of(this.owner(j));
    let rank: number;
    let worldSize: number;
    if (j.def.kind === 'TrainJob') {
      const set = labels['jobset.sigs.k8s.io/replicatedjob-name'];
      rank = Number(labels['batch.kubernetes.io/job-completion-index'] ?? 0);
      worldSize = pods.filter(
        (p) => obj(meta(p).labels)['jobset.sigs.k8s.io/replicatedjob-name'] === set,
      ).length;
    } else {
      const type = String(labels['training.kubeflow.org/replica-type'] ?? '').toLowerCase();
      const index = Number(labels['training.kubeflow.org/replica-index'] ?? 0);
      const leads = pods.some((p) =>
        ['master', 'launcher'].includes(
          String(obj(meta(p).labels)['training.kubeflow.org/replica-type'] ?? '').toLowerCase(),
        ),
      );
      rank = type === 'worker' && leads ? index + 1 : index;
      worldSize = pods.length;
    }
    const c = arr(obj(pod.spec).containers)
      .map(obj)
      .find((x) => x.name === container);
    const phase = String(obj(pod.status).phase ?? '');
    const base = {
      pod: String(meta(pod).name),
      ...(j.resumedFrom > 0 ? { resumedFrom: j.resumedFrom } : {}),
      rank,
      worldSize: Math.max(worldSize, rank + 1),
      image: String(c?.image ?? ''),
      hp: j.hp,
      accuracy: j.accuracy,
    };
    if (last)
      return trainingLog({
        ...base,
        progress: 0,
        outcome: 'crashed',
        ...(j.podMessage ? { failMessage: j.podMessage } : {}),
      });
    if (phase === 'Succeeded' || phase === 'Failed') {
      const ok = phase === 'Succeeded';
      const why = j.ended?.why;
      const failMessage =
        why === 'DeadlineExceeded'
          ? 'stopped: the job exceeded its active deadline'
          : why === 'UploadFailed'
            ? `uploading the model failed: ${j.uploadError ?? 'the output could not be written'}`
            : j.failMessage;
      return trainingLog({
        ...base,
        progress: ok ? 1 : (j.ended?.progress ?? 0),
        outcome: ok ? 'succeeded' : 'failed',
        ...(failMessage ? { failMessage } : {}),
      });
    }
    return trainingLog({ ...base, progress: this.progressOf(j), outcome: 'running' });
  }

  private owner(j: SimJob): PodOwner {
    return { def: j.def, ns: j.ns, name: j.name, uid: j.uid };
  }

  private onPodsReady(j: SimJob): void {
    const job = this.api.peek(j.def, j.ns, j.name);
    if (!job) return;
    this.pods.set(this.owner(j), 'running');
    if (j.def.kind === 'TrainJob') {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.jobsStatus = this.jobsStatus(j, o, 'running');
          if (this.o.trainerStatus) st.trainerStatus = this.trainerStatus(j, 0);
          o.status = st;
        },
        'status',
      );
    } else {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.conditions = this.legacyCondition(
            st.conditions,
            'Running',
            'True',
            `${j.def.kind}Running`,
            `${j.def.kind} ${j.ns}/${j.name} is running.`,
          );
          st.replicaStatuses = this.replicaStatuses(j, o, 'active');
          o.status = st;
        },
        'status',
      );
    }
    if (
      (this.o.trainerStatus && j.def.kind === 'TrainJob') ||
      this.reportsMetrics(j) ||
      this.checkpointLocation(j)
    ) {
      j.nextProgressAt = this.vt + this.progressInterval(j);
      void this.writeMetricLine(j, 0);
    }
    const wl = this.o.waitForPodsReady ? this.workloadOf(j) : undefined;
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
          this.now,
        );
      });
    }
    this.setPodGroupPhase(j, 'Running');
  }

  private progressOf(j: SimJob): number {
    if (!j.ready || j.runStart === undefined) return j.resumedFrom;
    return Math.min(1, Math.max(0, j.resumedFrom + (this.vt - this.readyAt(j)) / j.durationMs));
  }

  /** Whether the job's training code saves and resumes checkpoints (GANTRY_CHECKPOINT_URI). */
  private checkpointLocation(j: SimJob) {
    if (!this.o.checkpoints || !this.o.s3 || j.checkpointUri === undefined) return undefined;
    return parseS3Uri(j.checkpointUri);
  }

  /**
   * What training code that follows the checkpoint contract does when it starts: look for the
   * newest checkpoint of its run and continue from there (a later attempt trains only the rest).
   */
  private resumeFromCheckpoint(j: SimJob): void {
    const loc = this.checkpointLocation(j);
    const s3 = this.o.s3;
    if (!loc || !s3) return;
    const read = readCheckpoint(s3, loc).then(
      (p) => {
        if (p <= 0 || !this.jobs.has(j.uid) || j.state === 'finished') return;
        this.enqueue(() => {
          j.resumedFrom = p;
          this.markDirty();
        });
        setImmediate(() => this.tick());
      },
      (e: unknown) => this.o.log(`simulator: checkpoint of ${j.ns}/${j.name} not read: ${String(e)}`),
    );
    const tracked = read.finally(() => this.inflight.delete(tracked));
    this.inflight.add(tracked);
  }

  /** Save the progress as the training code's checkpoint (each progress report). */
  private saveCheckpoint(j: SimJob, p: number): void {
    const loc = this.checkpointLocation(j);
    const s3 = this.o.s3;
    if (!loc || !s3) return;
    const write = writeCheckpoint(s3, loc, p).catch((e: unknown) =>
      this.o.log(`simulator: checkpoint of ${j.ns}/${j.name} not saved: ${String(e)}`),
    );
    const tracked = write.finally(() => this.inflight.delete(tracked));
    this.inflight.add(tracked);
  }

  private trainerStatus(j: SimJob, p: number): Json {
    const m = p >= 1 ? { loss: finalLoss(j.accuracy), accuracy: j.accuracy } : metricsAt(p, j.accuracy);
    return {
      progressPercentage: Math.floor(p * 100),
      estimatedRemainingSeconds: Math.max(0, Math.round(((1 - p) * j.durationMs) / 1000)),
      metrics: [
        { name: 'loss', value: m.loss.toFixed(4) },
        { name: 'accuracy', value: m.accuracy.toFixed(4) },
      ],
      lastUpdatedTime: this.now,
    };
  }

  /** Whether the job's training code reports through Gantry's metric channel. */
  private reportsMetrics(j: SimJob): boolean {
    return (
      this.o.metricChannel &&
      this.o.s3 !== undefined &&
      j.metricsUri !== undefined &&
      parseS3Uri(j.metricsUri) !== undefined
    );
  }

  /**
   * What training code does on the metric channel: one JSON Lines object per report
   * (`progress-<percent>.jsonl`, rewritten when a requeued run reports the same percent again).
   * The write is tracked so `stop()` waits for it; a failed write is logged and lost, as a
   * training script that cannot reach S3 loses a report.
   */
  private writeMetricLine(j: SimJob, p: number): Promise<void> {
    const loc = parseS3Uri(j.metricsUri ?? '');
    if (!loc || !this.o.s3 || !this.reportsMetrics(j)) return Promise.resolve();
    const pct = Math.floor(p * 100);
    const m = p >= 1 ? { loss: finalLoss(j.accuracy), accuracy: j.accuracy } : metricsAt(p, j.accuracy);
    const line = {
      time: this.now,
      step: pct,
      progressPercentage: pct,
      estimatedRemainingSeconds: Math.max(0, Math.round(((1 - p) * j.durationMs) / 1000)),
      metrics: { loss: Number(m.loss.toFixed(6)), accuracy: Number(m.accuracy.toFixed(6)) },
    };
    const name = `progress-${String(pct).padStart(3, '0')}.jsonl`;
    const write = writeMetricObject(this.o.s3, loc, name, [line]).catch((e: unknown) => {
      const why = e instanceof Error ? e.message : String(e);
      this.o.log(`simulator: metric report of ${j.ns}/${j.name} failed: ${why}`);
    });
    const tracked = write.finally(() => this.inflight.delete(tracked));
    this.inflight.add(tracked);
    return tracked;
  }

  private reportProgress(j: SimJob): void {
    const p = this.progressOf(j);
    j.nextProgressAt = p >= 1 ? undefined : this.vt + this.progressInterval(j);
    if (p < 1) void this.writeMetricLine(j, p);
    if (p > 0 && p < 1) this.saveCheckpoint(j, p);
    if (j.def.kind !== 'TrainJob' || !this.o.trainerStatus) return;
    this.api.mutate(
      j.def,
      j.ns,
      j.name,
      (o) => {
        const st = obj(o.status);
        st.trainerStatus = this.trainerStatus(j, p);
        o.status = st;
      },
      'status',
    );
  }

  private wantsOutput(j: SimJob): boolean {
    return (
      !j.noOutput &&
      j.outputUri !== undefined &&
      this.o.s3 !== undefined &&
      parseS3Uri(j.outputUri) !== undefined
    );
  }

  private startUpload(j: SimJob): void {
    const loc = this.wantsOutput(j) ? parseS3Uri(j.outputUri ?? '') : undefined;
    const s3 = this.o.s3;
    if (!s3 || (!loc && !this.reportsMetrics(j))) {
      j.upload = 'done';
      return;
    }
    j.upload = 'started';
    const metrics = {
      accuracy: Number(j.accuracy.toFixed(6)),
      loss: Number(finalLoss(j.accuracy).toFixed(6)),
      hyperparameters: j.hp,
      job: {
        apiVersion: `${j.def.group}/${j.def.storageVersion}`,
        kind: j.def.kind,
        namespace: j.ns,
        name: j.name,
        uid: j.uid,
      },
      durationSeconds: j.durationMs / 1000,
      simulated: true,
    };
    // The last report goes out before the output, as training code reports its final metrics
    // before it saves the model and exits.
    const p = this.writeMetricLine(j, 1)
      .then(() => (loc ? writeOutput(s3, loc, j.outputBytes, j.uid, metrics) : undefined))
      .then(
        () => {
          j.upload = 'done';
        },
        (e: unknown) => {
          j.upload = 'failed';
          j.uploadError = e instanceof Error ? e.message : String(e);
          this.o.log(`simulator: output upload for ${j.ns}/${j.name} failed: ${j.uploadError}`);
        },
      );
    const tracked = p.finally(() => {
      this.inflight.delete(tracked);
      if (j.state === 'finishing') {
        this.enqueue(() => {
          if (j.state !== 'finishing' || !this.jobs.has(j.uid)) return;
          this.finish(j, j.upload === 'done', j.upload === 'done' ? 'Succeeded' : 'UploadFailed');
        });
        setImmediate(() => this.tick());
      }
    });
    this.inflight.add(tracked);
  }

  private finish(
    j: SimJob,
    ok: boolean,
    why: 'Succeeded' | 'Injected' | 'DeadlineExceeded' | 'UploadFailed' | 'Disrupted',
  ): void {
    j.ended = { progress: this.progressOf(j), why };
    j.state = 'finished';
    j.nextProgressAt = undefined;
    j.nextCrashAt = undefined;
    // Finished pods stay (Succeeded / Failed) until the job is deleted, as on a real cluster.
    this.pods.set(this.owner(j), ok ? 'succeeded' : 'failed');
    if (ok) this.stats.completed++;
    else this.stats.failed++;
    const kind = j.def.kind;
    if (kind === 'TrainJob') {
      let reason = 'AllJobsCompleted';
      let message = 'jobset completed successfully';
      if (!ok) {
        if (why === 'DeadlineExceeded') {
          reason = 'DeadlineExceeded';
          message = 'TrainJob exceeded its active deadline';
        } else {
          reason = j.failReason ?? 'FailedJobs';
          // A failed upload is a failed training container: JobSet's generic failure (the cause is in an Event).
          message = j.failMessage ?? 'jobset failed due to one or more job failures';
        }
      }
      const p = this.progressOf(j);
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.conditions = setCondition(
            st.conditions,
            { type: ok ? 'Complete' : 'Failed', status: 'True', reason, message },
            this.now,
          );
          st.jobsStatus = this.jobsStatus(j, o, ok ? 'succeeded' : 'failed');
          if (this.o.trainerStatus && j.ready) st.trainerStatus = this.trainerStatus(j, ok ? 1 : p);
          o.status = st;
        },
        'status',
      );
      this.finishWorkload(j, ok, message);
    } else {
      const reason = ok ? `${kind}Succeeded` : (j.failReason ?? `${kind}Failed`);
      const firstType =
        LEGACY_KINDS[kind]!.first.find(
          (t) => t in obj(obj(this.api.peek(j.def, j.ns, j.name)?.spec)[LEGACY_KINDS[kind]!.specs]),
        ) ?? 'Master';
      const message = ok
        ? `${kind} ${j.ns}/${j.name} successfully completed.`
        : why === 'DeadlineExceeded'
          ? `${kind} ${j.name} has failed because it was active longer than specified deadline`
          : (j.failMessage ??
            `${kind} ${j.ns}/${j.name} has failed because 1 ${firstType} replica(s) failed.`);
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          let conds = Array.isArray(st.conditions)
            ? (st.conditions as Json[]).map((c) => (c.type === 'Running' ? { ...c, status: 'False' } : c))
            : [];
          conds = conds.filter((c) => c.type !== (ok ? 'Succeeded' : 'Failed'));
          conds.push({
            type: ok ? 'Succeeded' : 'Failed',
            status: 'True',
            reason,
            message,
            lastUpdateTime: this.now,
            lastTransitionTime: this.now,
          });
          st.conditions = conds;
          st.replicaStatuses = this.replicaStatuses(j, o, ok ? 'succeeded' : 'failed');
          st.completionTime = this.now;
          o.status = st;
        },
        'status',
      );
      this.finishWorkload(j, ok, message);
    }
    if (!ok && j.uploadError)
      this.event(j, 'Warning', 'UploadFailed', `writing the output failed: ${j.uploadError}`);
    this.setPodGroupPhase(j, ok ? 'Finished' : 'Failed');
    this.markDirty();
  }

  private event(j: SimJob, type: string, reason: string, message: string): void {
    const ev = this.def('', 'events');
    if (!ev) return;
    try {
      this.api.create(
        ev,
        'v1',
        j.ns,
        {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: {
            name: `${j.name}.${(this.vt * 1000 + (this.seq++ % 1000)).toString(16)}`,
            namespace: j.ns,
          },
          involvedObject: {
            apiVersion: `${j.def.group}/${j.def.storageVersion}`,
            kind: j.def.kind,
            name: j.name,
            namespace: j.ns,
            uid: j.uid,
          },
          reason,
          message,
          type,
          source: { component: j.def.kind === 'TrainJob' ? 'trainjob-controller' : 'training-operator' },
          firstTimestamp: this.now,
          lastTimestamp: this.now,
          count: 1,
        },
        { system: true },
      );
    } catch {
      /* events are best effort, as in client-go's recorder */
    }
  }

  // -------------------------------------------------------------------------------------------
  // job status writers (the Trainer's and the Training Operator's part)

  private jobsStatus(
    j: SimJob,
    job: Json,
    phase: 'suspended' | 'pending' | 'running' | 'succeeded' | 'failed',
  ): Json[] {
    // Counted from the pods (pods.ts), as JobSet counts its child Jobs; `phase` only says whether
    // the TrainJob is suspended.
    const rjs = replicatedJobs(job, findRuntime(this.api, job));
    return jobsStatusFromPods(
      rjs.map((rj) => rj.name),
      this.pods.of(this.owner(j)),
      phase === 'suspended',
    );
  }

  private replicaStatuses(j: SimJob, job: Json, phase: 'active' | 'succeeded' | 'failed' | 'none'): Json {
    const info = LEGACY_KINDS[j.def.kind]!;
    const specs = obj(obj(job.spec)[info.specs]);
    const out: Json = {};
    // Counted from the pods (the operator counts Running pods as active), one entry per replica type.
    const pods = phase === 'none' ? [] : this.pods.of(this.owner(j));
    for (const type of Object.keys(specs)) {
      const mine = pods.filter(
        (p) => obj(meta(p).labels)['training.kubeflow.org/replica-type'] === type.toLowerCase(),
      );
      const count = (ph: string) => mine.filter((p) => obj(p.status).phase === ph).length;
      const st: Json = {};
      if (count('Running') > 0) st.active = count('Running');
      if (count('Succeeded') > 0) st.succeeded = count('Succeeded');
      if (count('Failed') > 0) st.failed = count('Failed');
      out[type] = st;
    }
    return out;
  }

  private legacyCondition(
    list: unknown,
    type: string,
    status: string,
    reason: string,
    message: string,
  ): Json[] {
    const conds = Array.isArray(list) ? (list as Json[]).map((c) => ({ ...c })) : [];
    const i = conds.findIndex((c) => c.type === type);
    const next = { type, status, reason, message, lastUpdateTime: this.now, lastTransitionTime: this.now };
    if (i >= 0) {
      const old = conds[i]!;
      if (old.status === status && old.reason === reason && old.message === message) return conds;
      if (old.status === status) next.lastTransitionTime = String(old.lastTransitionTime);
      conds.splice(i, 1);
    }
    conds.push(next);
    return conds;
  }

  private initialStatus(j: SimJob, job: Json): void {
    const suspended = isSuspended(j.def, job);
    if (suspended) j.everSuspended = true;
    if (j.def.kind === 'TrainJob') {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          if (suspended) {
            st.conditions = setCondition(
              st.conditions,
              { type: 'Suspended', status: 'True', reason: 'Suspended', message: 'TrainJob is suspended' },
              this.now,
            );
          }
          st.jobsStatus = this.jobsStatus(j, o, suspended ? 'suspended' : 'pending');
          o.status = st;
        },
        'status',
      );
    } else {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          let conds = this.legacyCondition(
            st.conditions,
            'Created',
            'True',
            `${j.def.kind}Created`,
            `${j.def.kind} ${j.name} is created.`,
          );
          if (suspended) {
            conds = this.legacyCondition(
              conds,
              'Suspended',
              'True',
              `${j.def.kind}Suspended`,
              `${j.def.kind} ${j.name} is suspended.`,
            );
          }
          st.conditions = conds;
          st.replicaStatuses = this.replicaStatuses(j, o, 'none');
          o.status = st;
        },
        'status',
      );
    }
  }

  private writeRunning(j: SimJob, job: Json): void {
    const wasSuspended = isTrue(job, 'Suspended');
    if (j.def.kind === 'TrainJob') {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          if (wasSuspended) {
            st.conditions = setCondition(
              st.conditions,
              { type: 'Suspended', status: 'False', reason: 'Resumed', message: 'TrainJob is resumed' },
              this.now,
            );
          }
          st.jobsStatus = this.jobsStatus(j, o, 'running');
          o.status = st;
        },
        'status',
      );
    } else {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          if (wasSuspended) {
            st.conditions = this.legacyCondition(
              st.conditions,
              'Suspended',
              'False',
              `${j.def.kind}Resumed`,
              `${j.def.kind} ${j.name} is resumed.`,
            );
          }
          st.startTime = this.now;
          o.status = st;
        },
        'status',
      );
    }
  }

  private writeSuspended(j: SimJob, suspended: boolean): void {
    if (!suspended) return;
    j.everSuspended = true;
    if (j.def.kind === 'TrainJob') {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.conditions = setCondition(
            st.conditions,
            { type: 'Suspended', status: 'True', reason: 'Suspended', message: 'TrainJob is suspended' },
            this.now,
          );
          st.jobsStatus = this.jobsStatus(j, o, 'suspended');
          o.status = st;
        },
        'status',
      );
    } else {
      this.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          let conds = this.legacyCondition(
            st.conditions,
            'Suspended',
            'True',
            `${j.def.kind}Suspended`,
            `${j.def.kind} ${j.name} is suspended.`,
          );
          conds = conds.map((c) =>
            c.type === 'Running' && c.status === 'True'
              ? { ...c, status: 'False', reason: `${j.def.kind}Suspended`, lastTransitionTime: this.now }
              : c,
          );
          st.conditions = conds;
          st.replicaStatuses = this.replicaStatuses(j, o, 'none');
          o.status = st;
        },
        'status',
      );
    }
  }

  // -------------------------------------------------------------------------------------------
  // gang gates: Kueue Workloads and coscheduling PodGroups

  private ensureGate(j: SimJob): void {
    if (j.gate === 'kueue') this.ensureWorkload(j);
    else if (j.gate === 'podgroup') this.ensurePodGroup(j);
  }

  private workloadDef(): ResourceDef | undefined {
    return this.def(KUEUE.group, 'workloads');
  }

  private workloadOf(j: SimJob): Json | undefined {
    if (j.gate !== 'kueue') return undefined;
    const def = this.workloadDef();
    if (!def) return undefined;
    return this.api.peek(def, j.ns, workloadName(j.def.kind, j.def.group, j.name, j.uid));
  }

  private ensureWorkload(j: SimJob): void {
    const def = this.workloadDef();
    if (!def || this.workloadOf(j) || !kueueManages(this.o.kueueIntegrations, j.def)) return;
    const job = this.api.peek(j.def, j.ns, j.name);
    if (!job) return;
    if (j.def.kind === 'TrainJob' && !findRuntime(this.api, job)) {
      const ref = obj(obj(job.spec).runtimeRef);
      this.event(
        j,
        'Warning',
        'TrainJobResourcesCreationFailed',
        `TrainJob resources reconciliation failed: ${String(ref.kind ?? 'ClusterTrainingRuntime')}.${TRAINER_GROUP} ${JSON.stringify(String(ref.name ?? ''))} not found`,
      );
      return;
    }
    const podSets = podSetsOf(this.api, j.def, job);
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
      this.api.create(
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
      this.o.log(
        `simulator: creating the Workload of ${j.ns}/${j.name} failed: ${e instanceof Error ? e.message : String(e)}`,
      );
      return;
    }
    this.markDirty();
  }

  private priorityValue(name: string): number | undefined {
    const def = this.def(KUEUE.group, 'workloadpriorityclasses');
    const wpc = def ? this.api.peek(def, undefined, name) : undefined;
    if (wpc && typeof wpc.value === 'number') return wpc.value;
    return this.o.priorityClasses[name];
  }

  private mutateWorkloadStatus(wl: Json, fn: (status: Json) => void): Json | undefined {
    const def = this.workloadDef()!;
    return this.api.mutate(
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

  private finishWorkload(j: SimJob, ok: boolean, message: string): void {
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
        this.now,
      );
    });
  }

  private ownerJob(wl: Json): SimJob | undefined {
    const refs = meta(wl).ownerReferences;
    if (!Array.isArray(refs)) return undefined;
    for (const r of refs) {
      const j = this.jobs.get(String(obj(r).uid));
      if (j) return j;
    }
    return undefined;
  }

  /** One Kueue scheduling pass over every ClusterQueue. */
  private admit(): void {
    if (this.o.gang === 'coscheduling') {
      this.admitPodGroups();
      return;
    }
    if (this.o.gang !== 'kueue') return;
    const wlDef = this.workloadDef();
    const cqDef = this.def(KUEUE.group, 'clusterqueues');
    const lqDef = this.def(KUEUE.group, 'localqueues');
    if (!wlDef || !cqDef || !lqDef) return;

    const cqs = new Map<string, Json>();
    for (const cq of this.api.peekAll(cqDef)) cqs.set(String(meta(cq).name), cq);
    const usage = new Map<string, Record<string, number>>();
    const pendingBy = new Map<string, Json[]>();
    const admittedCount = new Map<string, number>();
    const lqCounts = new Map<string, { pending: number; admitted: number }>();
    for (const wl of this.api.peekAll(wlDef)) {
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
      const lq = this.api.peek(lqDef, ns, lqName);
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
        if (this.inBackoff(wl)) continue;
        // Admission needs the whole demand to fit what is free (one flavor per ClusterQueue).
        const total = this.demand(wl).total;
        const free = Object.entries(total).every(
          ([r, v]) => v === 0 || (r in nominal && v <= nominal[r]! - (used[r] ?? 0)),
        );
        const job = free ? this.ownerJob(wl) : undefined;
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
      this.writeQueueStatus(
        cq,
        used,
        (pendingBy.get(cqName)?.length ?? 0) - admittedNow,
        (admittedCount.get(cqName) ?? 0) + admittedNow,
      );
    }
    this.writeLocalQueueStatus(lqCounts);
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
      granular: this.o.kueueGranularReasons,
    });
  }

  private setPending(wl: Json, reason: string, message: string, refresh: boolean): void {
    const cur = findCondition(wl, 'QuotaReserved');
    if (cur && cur.status === 'False' && cur.reason === reason && cur.message === message) return;
    // Like Kueue, only the workloads the scheduler looks at (the heads) get a fresh message.
    if (cur && cur.status === 'False' && !refresh) return;
    this.mutateWorkloadStatus(wl, (st) => {
      st.conditions = setCondition(
        st.conditions,
        { type: 'QuotaReserved', status: 'False', reason, message, observedGeneration: meta(wl).generation },
        this.now,
      );
    });
  }

  private reserve(wl: Json, cqName: string, used: Record<string, number>): void {
    const req = this.workloadRequests(wl);
    for (const [r, v] of Object.entries(req)) used[r] = (used[r] ?? 0) + v;
    const cq = this.api.peek(this.def(KUEUE.group, 'clusterqueues')!, undefined, cqName)!;
    const flavor = flavorOf(cq);
    const podSets = (obj(wl.spec).podSets as Json[] | undefined) ?? [];
    const gen = meta(wl).generation;
    this.mutateWorkloadStatus(wl, (st) => {
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
        this.now,
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
        this.now,
      );
      conds = this.podsNotReadyYet(conds, gen);
      conds = conds.map((c) =>
        (c.type === 'Evicted' || c.type === 'Preempted') && c.status === 'True'
          ? {
              ...c,
              status: 'False',
              reason: 'QuotaReserved',
              message: `Previously: ${String(c.message)}`,
              lastTransitionTime: this.now,
            }
          : c,
      );
      st.conditions = conds;
    });
    this.stats.admitted++;
    const j = this.ownerJob(wl);
    if (!j) return;
    if (this.o.waitForPodsReady) this.armPodsReadyTimeout(wl);
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
    if (j.def.kind !== 'TrainJob' || !kueueNeedsRuntimePatch(this.o.kueueVersion)) {
      this.api.mutate(j.def, j.ns, j.name, (o) => setSuspended(j.def, o, false));
      return true;
    }
    const job = this.api.peek(j.def, j.ns, j.name);
    const patches = (obj(job?.spec).runtimePatches as Json[] | undefined) ?? [];
    if (!patches.some((p) => isObj(p) && p.manager === KUEUE.manager)) {
      this.o.log(
        `simulator: Kueue cannot start ${j.ns}/${j.name}: kueue runtime patch not found (Kueue ${this.o.kueueVersion} with Trainer ${this.o.trainerVersion})`,
      );
      return false;
    }
    const replicatedJobs = kueueReplicatedJobPatches(
      ((obj(wl.spec).podSets as Json[] | undefined) ?? []).map((ps) => String(ps.name)),
      {
        workload: String(meta(wl).name),
        localQueue: String(obj(wl.spec).queueName ?? ''),
        clusterQueue: cqName,
        flavor: this.o.flavor,
      },
    );
    this.setKueuePatch(j, replicatedJobs, false);
    return true;
  }

  /** Write Kueue's runtime patch (Trainer's webhook stamps `time` when it changes) and suspend or unsuspend. */
  private setKueuePatch(j: SimJob, replicatedJobs: Json[] | undefined, suspend: boolean): void {
    this.api.mutate(j.def, j.ns, j.name, (o) => {
      const spec = obj(o.spec);
      const patches = (spec.runtimePatches as Json[] | undefined) ?? [];
      spec.runtimePatches = patches.map((p) => {
        if (!isObj(p) || p.manager !== KUEUE.manager) return p;
        const specPatch: Json = replicatedJobs ? { replicatedJobs } : {};
        const next: Json = { ...p, trainingRuntimeSpec: { template: { spec: specPatch } } };
        const { time: _a, ...a } = p;
        const { time: _b, ...b } = next;
        if (JSON.stringify(a) !== JSON.stringify(b)) next.time = this.now;
        return next;
      });
      o.spec = spec;
      setSuspended(j.def, o, suspend);
    });
  }

  /** Evict lower-priority admitted workloads of the ClusterQueue until `wl` fits; true when any were evicted. */
  private preemptFor(
    wl: Json,
    cqName: string,
    nominal: Record<string, number>,
    used: Record<string, number>,
  ): boolean {
    const prio = Number(obj(wl.spec).priority ?? 0);
    const wlDef = this.workloadDef()!;
    const inCq = this.api
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
      this.evict(
        v,
        'Preempted',
        `Preempted to accommodate a workload (UID: ${String(meta(wl).uid)}, JobUID: ${String(obj(meta(wl).labels)[KUEUE.jobUidLabel] ?? '')}) due to prioritization in the ClusterQueue`,
      );
    }
    return true;
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
    this.mutateWorkloadStatus(wl, (st) => {
      prepare?.(st);
      let conds = setCondition(
        st.conditions,
        { type: 'Evicted', status: 'True', reason, message, observedGeneration: gen },
        this.now,
      );
      if (reason === 'Preempted')
        conds = setCondition(
          conds,
          { type: 'Preempted', status: 'True', reason: 'InClusterQueue', message, observedGeneration: gen },
          this.now,
        );
      st.conditions = conds;
    });
    const j = this.ownerJob(wl);
    if (j) {
      if (j.def.kind === 'TrainJob' && kueueNeedsRuntimePatch(this.o.kueueVersion) && this.hasKueuePatch(j))
        this.setKueuePatch(j, undefined, true);
      else this.api.mutate(j.def, j.ns, j.name, (o) => setSuspended(j.def, o, true));
      j.suspended = true;
      this.reconcileJob(j.uid);
    }
    if (hadReservation)
      this.scheduleAt(this.vt + EVICTION_REQUEUE_SECONDS * 1000, () => this.releaseEvicted(ns, name, uid));
    this.markDirty();
  }

  private hasKueuePatch(j: SimJob): boolean {
    const job = this.api.peek(j.def, j.ns, j.name);
    const patches = (obj(job?.spec).runtimePatches as Json[] | undefined) ?? [];
    return patches.some((p) => isObj(p) && p.manager === KUEUE.manager);
  }

  /** The evicted job is no longer active: withdraw the reservation (Kueue's jobframework, step 6). */
  private releaseEvicted(ns: string, name: string, uid: string): void {
    const wl = this.api.peek(this.workloadDef()!, ns, name);
    if (!wl || String(meta(wl).uid) !== uid || !isTrue(wl, 'QuotaReserved') || isTrue(wl, 'Finished')) return;
    const ev = findCondition(wl, 'Evicted');
    if (ev?.status !== 'True') return;
    const gen = meta(wl).generation;
    const evReason = String(ev.reason);
    const evMessage = String(ev.message ?? '');
    this.mutateWorkloadStatus(wl, (st) => {
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
        this.now,
      );
      conds = setCondition(
        conds,
        {
          type: 'QuotaReserved',
          status: 'False',
          reason: this.o.kueueGranularReasons ? 'PendingEvaluation' : 'Pending',
          message: evMessage,
          observedGeneration: gen,
        },
        this.now,
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
        this.now,
      );
      conds = this.podsNotReadyYet(conds, gen);
      st.conditions = conds;
    });
    const requeueAt = this.requeueAtVt.get(uid);
    if (requeueAt !== undefined && evReason === 'PodsReadyTimeout') {
      this.scheduleAt(Math.max(requeueAt, this.vt), () => this.finishBackoff(ns, name, uid));
    }
    this.markDirty();
  }

  /** The requeuing backoff is over: `Requeued=True BackoffFinished`, requeueAt cleared. */
  private finishBackoff(ns: string, name: string, uid: string): void {
    const wl = this.api.peek(this.workloadDef()!, ns, name);
    if (!wl || String(meta(wl).uid) !== uid || obj(wl.spec).active === false) return;
    this.requeueAtVt.delete(uid);
    this.mutateWorkloadStatus(wl, (st) => {
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
        this.now,
      );
    });
    this.markDirty();
  }

  /** Whether a pending workload still waits out its requeuing backoff. */
  private inBackoff(wl: Json): boolean {
    const at = this.requeueAtVt.get(String(meta(wl).uid));
    return at !== undefined && at > this.vt;
  }

  /** With waitForPodsReady, Kueue marks an (re)admitted or requeued Workload `PodsReady=False WaitForStart`. */
  private podsNotReadyYet(conds: unknown, gen: unknown): Json[] {
    const list = (Array.isArray(conds) ? conds : []) as Json[];
    if (!this.o.waitForPodsReady) return list;
    return setCondition(
      list,
      {
        type: 'PodsReady',
        status: 'False',
        reason: 'WaitForStart',
        message: 'Not all pods are ready or succeeded',
        observedGeneration: gen,
      },
      this.now,
    );
  }

  /** waitForPodsReady: check the admitted workload's PodsReady once its timeout has passed. */
  private armPodsReadyTimeout(wl: Json): void {
    const cfg = this.o.waitForPodsReady;
    if (!cfg) return;
    const ns = String(meta(wl).namespace);
    const name = String(meta(wl).name);
    const uid = String(meta(wl).uid);
    const admittedAt = this.vt;
    this.admittedAtVt.set(uid, admittedAt);
    const timeout = (cfg.timeoutSeconds ?? WAIT_FOR_PODS_READY_TIMEOUT_SECONDS) * 1000;
    this.scheduleAt(admittedAt + timeout, () => {
      const cur = this.api.peek(this.workloadDef()!, ns, name);
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
    const strategy = this.o.waitForPodsReady?.requeuingStrategy ?? {};
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
        this.requeueAtVt.set(String(meta(wl).uid), this.vt + backoff * 1000);
        st.requeueState = { count: count + 1, requeueAt: rfc3339(Date.parse(this.now) + backoff * 1000) };
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
    const def = this.workloadDef()!;
    if (cause)
      this.mutateWorkloadStatus(wl, (st) => {
        st.conditions = setCondition(
          st.conditions,
          {
            type: 'DeactivationTarget',
            status: 'True',
            reason: cause,
            message: why ?? '',
            observedGeneration: meta(wl).generation,
          },
          this.now,
        );
      });
    this.api.mutate(def, ns, name, (o) => {
      o.spec = { ...obj(o.spec), active: false };
    });
    const cur = this.api.peek(def, ns, name)!;
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

  /** Admin: deactivate a job's Workload, as a person setting `spec.active=false` would. */
  deactivateJob(ns: string, name: string, plural?: string): boolean {
    for (const j of this.jobs.values()) {
      if (j.ns !== ns || j.name !== name || (plural && j.def.plural !== plural)) continue;
      const wl = this.workloadOf(j);
      if (!wl || isTrue(wl, 'Finished') || obj(wl.spec).active === false) return false;
      this.deactivate(wl);
      return true;
    }
    return false;
  }

  /**
   * Admin: disrupt a running TrainJob's pods so that the job fails, as a JobSet whose Job has
   * `backoffLimit: 0` fails on its first failed pod (a deleted pod counts as failed at once:
   * kube-controller-manager `pkg/controller/job` isPodFailed):
   * - `node-lost`: the node under its first pod stops answering; the taint manager deletes the pods
   *   there (DisruptionTarget `DeletionByTaintManager`) and they stay Terminating while the job exists;
   * - `preempted`: the scheduler preempts its pods for a higher-priority gang (DisruptionTarget
   *   `PreemptionByScheduler`; no Kueue to requeue it), Terminating for their 30 s grace period;
   * - `evicted`: a drain or a spot interruption handler evicts them (DisruptionTarget
   *   `EvictionByEvictionAPI`), likewise.
   * False when the job is not running (or is a Training Operator v1 job, whose operator recreates
   * deleted pods instead).
   */
  disruptJob(ns: string, name: string, cause: Disruption, plural?: string): boolean {
    for (const j of this.jobs.values()) {
      if (j.ns !== ns || j.name !== name || (plural && j.def.plural !== plural)) continue;
      if (j.def.kind !== 'TrainJob' || (j.state !== 'running' && j.state !== 'finishing')) return false;
      const owner = this.owner(j);
      const pods = this.pods.of(owner).filter((p) => !meta(p).deletionTimestamp);
      const node = String(obj(pods[0]?.spec).nodeName ?? '');
      if (pods.length === 0 || node === '') return false;
      let hit: string[];
      if (cause === 'node-lost') {
        hit = this.pods.disrupt(
          owner,
          (p) => obj(p.spec).nodeName === node,
          { reason: 'DeletionByTaintManager', message: 'Taint manager: deleting due to NoExecute taint' },
          DISRUPTION_FINALIZER.nodeLost,
        );
      } else {
        hit = this.pods.disrupt(
          owner,
          () => true,
          cause === 'preempted'
            ? {
                reason: 'PreemptionByScheduler',
                message: `${this.o.gang === 'coscheduling' ? 'coscheduling' : 'default-scheduler'}: preempting to accommodate a higher priority pod`,
              }
            : { reason: 'EvictionByEvictionAPI', message: 'Eviction API: evicting' },
          DISRUPTION_FINALIZER.grace,
        );
        this.scheduleAt(this.vt + TERMINATION_GRACE_MS, () =>
          this.pods.release(owner, DISRUPTION_FINALIZER.grace),
        );
      }
      if (hit.length === 0) return false;
      this.event(
        j,
        'Warning',
        cause === 'node-lost' ? 'NodeNotReady' : cause === 'preempted' ? 'Preempted' : 'Evicted',
        `pods ${hit.join(', ')}${cause === 'node-lost' ? ` on node ${node}` : ''} were disrupted (${cause})`,
      );
      this.finish(j, false, 'Disrupted');
      return true;
    }
    return false;
  }

  /** Admin: preempt a job (evict its Workload, or fail its PodGroup-gated run back to pending). */
  preemptJob(ns: string, name: string, plural?: string): boolean {
    for (const j of this.jobs.values()) {
      if (j.ns !== ns || j.name !== name || (plural && j.def.plural !== plural)) continue;
      const wl = this.workloadOf(j);
      if (wl && isTrue(wl, 'QuotaReserved') && !isTrue(wl, 'Finished')) {
        this.evict(
          wl,
          'Preempted',
          'Preempted to accommodate a higher priority workload (simulator admin call)',
        );
        return true;
      }
      if (j.gate === 'podgroup' && j.gateOpen && j.state !== 'finished') {
        j.gateOpen = false;
        j.state = 'waiting';
        j.runStart = undefined;
        j.ready = false;
        this.setPodGroupPhase(j, 'Pending');
        this.markDirty();
        return true;
      }
      return false;
    }
    return false;
  }

  private writeQueueStatus(cq: Json, used: Record<string, number>, pending: number, admitted: number): void {
    const cqDef = this.def(KUEUE.group, 'clusterqueues')!;
    const flavor = flavorOf(cq);
    const resources = Object.keys(nominalQuota(cq)).map((r) => ({
      name: r,
      total: formatQuantity(r, Math.max(0, used[r] ?? 0)),
      borrowed: '0',
    }));
    this.api.mutate(
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
          this.now,
        );
        o.status = st;
      },
      'status',
    );
  }

  private writeLocalQueueStatus(counts: Map<string, { pending: number; admitted: number }>): void {
    const lqDef = this.def(KUEUE.group, 'localqueues')!;
    for (const lq of this.api.peekAll(lqDef)) {
      const key = `${String(meta(lq).namespace)}/${String(meta(lq).name)}`;
      const c = counts.get(key) ?? { pending: 0, admitted: 0 };
      const st = obj(lq.status);
      if (
        st.pendingWorkloads === c.pending &&
        st.admittedWorkloads === c.admitted &&
        Array.isArray(st.conditions)
      )
        continue;
      this.api.mutate(
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
            this.now,
          );
          o.status = s;
        },
        'status',
      );
    }
  }

  // -------------------------------------------------------------------------------------------
  // coscheduling

  private podGroupDef(): ResourceDef | undefined {
    return this.def('scheduling.x-k8s.io', 'podgroups');
  }

  private ensurePodGroup(j: SimJob): void {
    const def = this.podGroupDef();
    const job = this.api.peek(j.def, j.ns, j.name);
    if (!def || !job || this.api.peek(def, j.ns, j.name)) return;
    const podSets: PodSet[] = podSetsOf(this.api, j.def, job);
    const minMember = podSets.reduce((n, p) => n + p.count, 0);
    const minResources: Json = {};
    const total: Record<string, number> = {};
    for (const p of podSets)
      for (const [r, v] of Object.entries(p.requests)) total[r] = (total[r] ?? 0) + v * p.count;
    for (const [r, v] of Object.entries(total)) minResources[r] = formatQuantity(r, v);
    const spec: Json = { minMember, minResources };
    if (j.def.kind === 'TrainJob') spec.scheduleTimeoutSeconds = 60;
    this.api.create(
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
    this.markDirty();
  }

  /** A waiting gang's PodGroup, Pending until its pods exist, then Scheduling (see gatedPods). */
  private podGroupScheduling(j: SimJob): void {
    const def = this.podGroupDef();
    const pg = def && j.gate === 'podgroup' ? this.api.peek(def, j.ns, j.name) : undefined;
    if (pg && obj(pg.status).phase === 'Pending') this.setPodGroupPhase(j, 'Scheduling');
  }

  private setPodGroupPhase(
    j: SimJob,
    phase: 'Pending' | 'Scheduling' | 'Running' | 'Finished' | 'Failed',
  ): void {
    if (j.gate !== 'podgroup') return;
    const def = this.podGroupDef();
    const pg = def ? this.api.peek(def, j.ns, j.name) : undefined;
    if (!def || !pg) return;
    const min = Number(obj(pg.spec).minMember ?? 1);
    this.api.mutate(
      def,
      j.ns,
      j.name,
      (o) => {
        const st = obj(o.status);
        st.phase = phase;
        st.running = phase === 'Running' ? min : 0;
        st.succeeded = phase === 'Finished' ? min : 0;
        st.failed = phase === 'Failed' ? 1 : 0;
        st.scheduleStartTime ??= this.now;
        o.status = st;
      },
      'status',
    );
  }

  private capacity(): Record<string, number> | undefined {
    const src = this.o.capacity;
    if (src) return Object.fromEntries(Object.entries(src).map(([k, v]) => [k, parseQuantity(v)]));
    if (this.o.queues.length === 0) return undefined;
    const out: Record<string, number> = {};
    for (const q of this.o.queues)
      for (const [k, v] of Object.entries(q.quota)) out[k] = (out[k] ?? 0) + parseQuantity(v);
    return out;
  }

  private admitPodGroups(): void {
    const def = this.podGroupDef();
    if (!def) return;
    const cap = this.capacity();
    const used: Record<string, number> = {};
    const waiting: SimJob[] = [];
    for (const j of this.jobs.values()) {
      if (j.gate !== 'podgroup' || j.state === 'finished') continue;
      const pg = this.api.peek(def, j.ns, j.name);
      if (!pg) continue;
      const res = obj(obj(pg.spec).minResources);
      if (j.gateOpen) {
        for (const [r, v] of Object.entries(res)) used[r] = (used[r] ?? 0) + parseQuantity(v);
      } else waiting.push(j);
    }
    waiting.sort((a, b) => a.createdAt - b.createdAt);
    for (const j of waiting) {
      if (j.neverAdmit) continue;
      const pg = this.api.peek(def, j.ns, j.name)!;
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
      this.stats.admitted++;
      this.setPodGroupPhase(j, 'Scheduling');
      this.reconcileJob(j.uid);
    }
  }
}
