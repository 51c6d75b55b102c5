import type { S3Client } from '@aws-sdk/client-s3';
import type { ApiServer, Json } from './apiserver.ts';
import { rfc3339, type SimClock } from './clock.ts';
import type { Gang } from './crds.ts';
import type { FlavorConfig, KueueVersion, WaitForPodsReady } from './kueue.ts';
import type { Hyperparameters } from './objective.ts';
import { type PodOwner, type PodScenario, Pods } from './pods.ts';
import type { ResourceDef } from './registry.ts';
import type { TrainerVersion } from './stubs.ts';

/**
 * What the simulated controllers share: their options, the simulated jobs, the pods, the
 * simulated time of the event being processed and the queue of changes and timers the event
 * loop (controller.ts) works through. The controllers' concerns live in their own files
 * (job-lifecycle.ts, job-status.ts, training.ts, kueue-*.ts, podgroups.ts,
 * disruption.ts) and all act on this.
 */

export const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
export const obj = (v: unknown): Json => (isObj(v) ? v : {});
export const meta = (o: Json): Json => obj(o.metadata);
export const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

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
  /** ± fraction the default duration varies by, per job (SimulatorOptions.durationSpread). */
  durationSpread: number;
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

export type GateKind = 'kueue' | 'podgroup' | 'none';

/** Why a run finished (what its pods' logs end with). */
export type EndCause = 'Succeeded' | 'Injected' | 'DeadlineExceeded' | 'UploadFailed' | 'Disrupted';

export interface SimJob {
  uid: string;
  def: ResourceDef;
  ns: string;
  name: string;
  gate: GateKind;
  /**
   * Trainer built a coscheduling PodGroup for the job: its gate is the PodGroup, or it is a TrainJob
   * under Kueue whose runtime sets `podGroupPolicy.coscheduling` (Trainer builds the PodGroup of a
   * suspended TrainJob too, so it exists beside the Workload from the start).
   */
  podGroup: boolean;
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
  /**
   * Reads the job's code makes before it trains or scores, not yet returned: its checkpoint
   * (training.ts `resumeFromCheckpoint`), the model an evaluation scores (`evaluateModel`). While
   * any is out it reports nothing and cannot finish, however long the read takes; only its deadline
   * can end it.
   */
  loading: number;
  /**
   * Failed pods per replicated job (a disruption's pods count as failed at once), against each
   * batch Job's `backoffLimit`; the Job controller replaces them while it lasts (disruption.ts).
   */
  podFailures?: Record<string, number>;
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
  /** Simulated ms after the pods' start when the pod scenario clears (sim.gantry.dev/pod-failure-seconds). */
  podFailureMs?: number | undefined;
  /** When the current pods' scenario clears (simulated time), armed at each start. */
  podRecoverAt?: number | undefined;
  podMessage: string | undefined;
  /** CrashLoopBackOff: sim ms of the next container restart. */
  nextCrashAt: number | undefined;
  /** Progress (0–1) and cause when the run finished: what its pods' logs end with. */
  ended?: {
    progress: number;
    why: EndCause;
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

export function annotation(job: Json, key: string): string | undefined {
  const v = obj(meta(job).annotations)[key];
  return typeof v === 'string' ? v : undefined;
}

export function numAnnotation(job: Json, key: string): number | undefined {
  const v = annotation(job, key);
  if (v === undefined) return undefined;
  const n = Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** When the job's pods are (or become) ready: its run start plus its slow start. */
export function readyAt(j: SimJob): number {
  return (j.runStart ?? 0) + j.slowStartMs;
}

export function endAt(j: SimJob): number {
  return readyAt(j) + j.durationMs * (1 - j.resumedFrom);
}

export function failAt(j: SimJob): number | undefined {
  return j.failAtPct === undefined
    ? undefined
    : readyAt(j) + j.durationMs * Math.max(0, j.failAtPct / 100 - j.resumedFrom);
}

export function deadlineAt(j: SimJob): number | undefined {
  if (j.deadlineSeconds === undefined) return undefined;
  if (j.def.kind !== 'TrainJob' && j.state === 'waiting') return undefined;
  return j.deadlineBase + j.deadlineSeconds * 1000;
}

export class SimCore {
  readonly api: ApiServer;
  readonly o: ControllerOptions;
  readonly jobs = new Map<string, SimJob>();
  readonly pods: Pods;
  /** Changes observed in the store, in arrival order (their times never decrease). */
  queue: Array<{ at: number; fn: () => void }> = [];
  queueHead = 0;
  /** Future work at a simulated time (e.g. an evicted Workload becoming admissible again). */
  readonly timers: Array<{ at: number; fn: () => void }> = [];
  seq = 0;
  /** Virtual time of the event being processed (ms). */
  vt: number;
  dirty = false;
  readonly inflight = new Set<Promise<unknown>>();
  readonly stats = { admitted: 0, peakRunning: 0, peakUnfinished: 0, completed: 0, failed: 0 };

  constructor(o: ControllerOptions) {
    this.o = o;
    this.api = o.api;
    this.vt = o.clock.now();
    this.pods = new Pods(o.api, () => this.now);
  }

  def(group: string, plural: string): ResourceDef | undefined {
    return this.api.registry.get(group, plural);
  }

  /** The timestamp objects get now: wall clock unless the simulator stamps simulated time (clock.ts). */
  get now(): string {
    // Simulated stamps are the event's own time (the loop may be catching up on a backlog).
    return rfc3339(this.o.clock.timestamps === 'simulated' ? this.vt : this.o.clock.stamp());
  }

  /** Run `fn` at the current simulated time, in order with everything else (admin calls use this). */
  enqueue(fn: () => void, at = this.o.clock.now()): void {
    const last = this.queue[this.queue.length - 1];
    this.queue.push({ at: last && last.at > at ? last.at : at, fn });
  }

  markDirty(): void {
    this.dirty = true;
  }

  scheduleAt(at: number, fn: () => void): void {
    const i = this.timers.findIndex((t) => t.at > at);
    if (i < 0) this.timers.push({ at, fn });
    else this.timers.splice(i, 0, { at, fn });
  }

  /** The job as its pods' owner (pods.ts). */
  owner(j: SimJob): PodOwner {
    return { def: j.def, ns: j.ns, name: j.name, uid: j.uid };
  }

  /** Record an Event about the job (best effort, as client-go's recorder). */
  event(j: SimJob, type: string, reason: string, message: string): void {
    this.record(
      j.ns,
      {
        apiVersion: `${j.def.group}/${j.def.storageVersion}`,
        kind: j.def.kind,
        name: j.name,
        namespace: j.ns,
        uid: j.uid,
      },
      type,
      reason,
      message,
      j.def.kind === 'TrainJob' ? 'trainjob-controller' : 'training-operator',
    );
  }

  /** An Event about a pod, from the component that acted on it (the scheduler, the taint manager). */
  podEvent(pod: Json, type: string, reason: string, message: string, component: string): void {
    const m = meta(pod);
    const ns = String(m.namespace ?? '');
    this.record(
      ns,
      { apiVersion: 'v1', kind: 'Pod', name: String(m.name), namespace: ns, uid: String(m.uid ?? '') },
      type,
      reason,
      message,
      component,
    );
  }

  private record(
    ns: string,
    involvedObject: Json,
    type: string,
    reason: string,
    message: string,
    component: string,
  ): void {
    const ev = this.def('', 'events');
    if (!ev) return;
    try {
      this.api.create(
        ev,
        'v1',
        ns,
        {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: {
            name: `${String(involvedObject.name)}.${(this.vt * 1000 + (this.seq++ % 1000)).toString(16)}`,
            namespace: ns,
          },
          involvedObject,
          reason,
          message,
          type,
          source: { component },
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
}
