import type { Json } from './apiserver.ts';
import { releaseLostNode } from './disruption.ts';
import type { JobStatus } from './job-status.ts';
import { activeDeadlineSeconds, findRuntime, isSuspended, setSuspended, trainerContainer } from './jobs.ts';
import { isTrue, kueueManages } from './kueue.ts';
import type { KueueObjects } from './kueue-objects.ts';
import { finalAccuracy, parseHyperparameters } from './objective.ts';
import type { PodGroups } from './podgroups.ts';
import {
  crashLoopBackoffSeconds,
  POD_FAILURE_MESSAGE_ANNOTATION,
  podFailureSecondsOf,
  podScenarioOf,
} from './pods.ts';
import type { ResourceDef } from './registry.ts';
import {
  annotation,
  deadlineAt,
  type EndCause,
  endAt,
  failAt,
  type GateKind,
  KUEUE,
  meta,
  numAnnotation,
  obj,
  readyAt,
  SIM_ANNOTATIONS,
  type SimCore,
  type SimJob,
} from './sim-core.ts';
import type { Training } from './training.ts';

/**
 * A job's run as its controller (Trainer or Training Operator) drives it: the job is noticed, its
 * gang gate (Workload or PodGroup) made, its run started when unsuspended and admitted and stopped
 * when suspended again, and each of its due events handled in time order — pods ready, progress
 * report, injected failure, upload, completion, deadline — until it finishes.
 */
export class JobLifecycle {
  private readonly c: SimCore;
  private readonly status: JobStatus;
  private readonly training: Training;
  private readonly kueue: KueueObjects;
  private readonly podGroups: PodGroups;

  constructor(c: SimCore, status: JobStatus, training: Training, kueue: KueueObjects, podGroups: PodGroups) {
    this.c = c;
    this.status = status;
    this.training = training;
    this.kueue = kueue;
    this.podGroups = podGroups;
  }

  /** The simulated time of the next thing due for `j` (undefined: nothing until something changes). */
  nextEvent(j: SimJob): number | undefined {
    if (j.state === 'finished') return undefined;
    const suspended = this.isJobSuspended(j);
    const candidates: Array<number | undefined> = [];
    if (j.def.kind === 'TrainJob' && !suspended) candidates.push(deadlineAt(j));
    if (j.state === 'running') {
      if (j.def.kind !== 'TrainJob') candidates.push(deadlineAt(j));
      if (j.podScenario !== undefined) candidates.push(j.nextCrashAt, j.podRecoverAt);
      else if (!j.ready) candidates.push(readyAt(j));
      else if (j.loading === 0) {
        candidates.push(j.nextProgressAt, this.uploadAt(j), failAt(j));
        if (j.failAtPct === undefined) candidates.push(endAt(j));
      }
    }
    let best: number | undefined;
    for (const c of candidates) if (c !== undefined && (best === undefined || c < best)) best = c;
    return best;
  }

  private uploadAt(j: SimJob): number | undefined {
    if (j.upload !== 'none' || j.failAtPct !== undefined || !this.training.wantsOutput(j)) return undefined;
    return Math.max(readyAt(j), endAt(j) - j.durationMs * 0.1);
  }

  private isJobSuspended(j: SimJob): boolean {
    return j.suspended;
  }

  /** Handle whatever is due for `j` at vt. */
  advanceJob(j: SimJob): void {
    const t = this.c.vt;
    const deadline = deadlineAt(j);
    if (deadline !== undefined && deadline <= t && (j.def.kind !== 'TrainJob' || !this.isJobSuspended(j))) {
      this.finish(j, false, 'DeadlineExceeded');
      return;
    }
    if (j.state !== 'running') return;
    if (j.podScenario !== undefined) {
      if (j.podRecoverAt !== undefined && j.podRecoverAt <= t) {
        // The kubelet's next retry succeeds (registry back, Secret created): the pods start from here.
        j.podScenario = undefined;
        j.podRecoverAt = undefined;
        j.nextCrashAt = undefined;
        j.runStart = t;
        this.c.pods.recovered(this.c.owner(j));
        if (j.slowStartMs === 0) {
          j.ready = true;
          this.onPodsReady(j);
        }
        this.c.markDirty();
        return;
      }
      if (j.nextCrashAt !== undefined && j.nextCrashAt <= t) {
        const restarts = this.c.pods.crash(this.c.owner(j), j.podMessage);
        j.nextCrashAt = t + crashLoopBackoffSeconds(restarts) * 1000;
      }
      return;
    }
    if (!j.ready && readyAt(j) <= t) {
      j.ready = true;
      this.onPodsReady(j);
      return;
    }
    // The job's code has not read its checkpoint or model yet: nothing is due until it has.
    if (j.loading > 0) return;
    const fail = failAt(j);
    if (fail !== undefined && fail <= t) {
      this.finish(j, false, 'Injected');
      return;
    }
    const up = this.uploadAt(j);
    if (up !== undefined && up <= t) {
      this.training.startUpload(j);
      return;
    }
    if (j.failAtPct === undefined && endAt(j) <= t) {
      if (
        (this.training.wantsOutput(j) || this.training.reportsMetrics(j)) &&
        j.upload !== 'done' &&
        j.upload !== 'failed'
      ) {
        if (j.upload === 'none') this.training.startUpload(j);
        j.state = 'finishing';
        return;
      }
      this.finish(j, j.upload !== 'failed', j.upload === 'failed' ? 'UploadFailed' : 'Succeeded');
      return;
    }
    if (j.nextProgressAt !== undefined && j.nextProgressAt <= t) this.training.reportProgress(j);
  }

  /** A job appeared in the store: its simulated run's parameters, initial status and gang gate. */
  onJobCreated(def: ResourceDef, created: Json): void {
    const m = meta(created);
    const uid = String(m.uid);
    const job = this.c.api.peek(def, String(m.namespace), String(m.name));
    if (!job || meta(job).uid !== uid || this.c.jobs.has(uid)) return;
    const labels = obj(m.labels);
    // Kueue runs no controller for a disabled framework: the queue label is just a label then.
    const queued =
      typeof labels[KUEUE.queueLabel] === 'string' && kueueManages(this.c.o.kueueIntegrations, def);
    const gate: GateKind =
      this.c.o.gang === 'kueue'
        ? queued
          ? 'kueue'
          : 'none'
        : this.c.o.gang === 'coscheduling'
          ? 'podgroup'
          : 'none';
    // Trainer's coscheduling plugin (pkg/runtime/framework/plugins/coscheduling Build) builds the
    // PodGroup whenever the runtime asks for it and none exists, suspended or not.
    const podGroup =
      gate === 'podgroup' ||
      (gate === 'kueue' &&
        def.kind === 'TrainJob' &&
        obj(obj(findRuntime(this.c.api, job)?.spec).podGroupPolicy).coscheduling !== undefined);
    const container = trainerContainer(this.c.api, def, job);
    const hp = parseHyperparameters(container.args, container.env);
    // The simulated training code crashes at this progress: the job's annotation, or the env the
    // run request gave its trainer (SIM_FAIL_AT_PERCENT), so a request through the API can ask for it.
    const envFail = Number(container.env.SIM_FAIL_AT_PERCENT ?? Number.NaN);
    const failFor = podFailureSecondsOf(job, container.env);
    const failPct =
      numAnnotation(job, SIM_ANNOTATIONS.failAtPercent) ??
      (Number.isFinite(envFail) && envFail >= 0 ? envFail : undefined);
    const createdAt = this.c.vt;
    const j: SimJob = {
      uid,
      def,
      ns: String(m.namespace),
      name: String(m.name),
      gate,
      podGroup,
      createdAt,
      // An evaluation job (GANTRY_EVALUATION: one pass over a holdout set) takes a tenth of a training.
      durationMs:
        (numAnnotation(job, SIM_ANNOTATIONS.duration) ??
          (this.c.o.defaultDurationSeconds / (container.env.GANTRY_EVALUATION === undefined ? 1 : 10)) *
            spreadFactor(String(m.name), this.c.o.durationSpread)) * 1000,
      // The annotation, or the trainer's SIM_SLOW_START_SECONDS (slow initializers, through the API).
      slowStartMs:
        (numAnnotation(job, SIM_ANNOTATIONS.slowStart) ??
          envSeconds(container.env.SIM_SLOW_START_SECONDS) ??
          0) * 1000,
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
      loading: 0,
      state: 'waiting',
      runStart: undefined,
      ready: false,
      nextProgressAt: undefined,
      deadlineBase: this.c.vt,
      deadlineSeconds:
        this.c.o.trainerVersion === '2.1' && def.kind === 'TrainJob'
          ? undefined
          : activeDeadlineSeconds(def, job),
      upload: 'none',
      uploadError: undefined,
      gateOpen: gate !== 'podgroup',
      everSuspended: false,
      suspended: isSuspended(def, job),
      podScenario: podScenarioOf(job, container.env) ?? this.c.o.podFailure?.(job),
      podFailureMs: failFor === undefined ? undefined : failFor * 1000,
      podMessage: annotation(job, POD_FAILURE_MESSAGE_ANNOTATION),
      nextCrashAt: undefined,
    };
    this.c.jobs.set(uid, j);
    this.training.resumeFromCheckpoint(j);
    this.training.evaluateModel(j, container.env);
    this.updatePeak();
    this.status.initialStatus(j, job);
    this.ensureGate(j);
    this.reconcileJob(uid);
  }

  onJobDeleted(uid: string): void {
    const j = this.c.jobs.get(uid);
    if (!j) return;
    releaseLostNode(this.c, j);
    this.c.jobs.delete(uid);
    this.c.pods.forget(uid);
    this.c.markDirty();
  }

  /** Start or stop the job's run to match its spec and its gang gate. */
  reconcileJob(uid: string): void {
    const j = this.c.jobs.get(uid);
    if (!j || j.state === 'finished') return;
    const job = this.c.api.peek(j.def, j.ns, j.name);
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
      !isTrue(this.kueue.workloadOf(j) ?? {}, 'QuotaReserved')
    ) {
      // Kueue stops a queued job that runs without admission (e.g. created past its webhook).
      this.c.api.mutate(j.def, j.ns, j.name, (o) => setSuspended(j.def, o, true));
      suspended = true;
    }
    j.suspended = suspended;
    const canRun = !suspended && j.gateOpen && !(j.neverAdmit && j.gate === 'none');
    if (!suspended && !j.gateOpen && j.state === 'waiting') this.podGroups.gatedPods(j, job);
    if (canRun && j.state === 'waiting') this.startRun(j, job);
    else if (suspended && (j.state === 'running' || j.state === 'finishing')) this.stopRun(j);
    else if (suspended && j.state === 'waiting' && !this.hasSuspendedCondition(j, job))
      this.status.writeSuspended(j, true);
  }

  private hasSuspendedCondition(j: SimJob, job: Json): boolean {
    return j.def.kind === 'TrainJob' ? isTrue(job, 'Suspended') : isTrue(job, 'Suspended');
  }

  private startRun(j: SimJob, job: Json): void {
    j.state = 'running';
    j.runStart = this.c.vt;
    j.ready = false;
    j.upload = 'none';
    j.nextProgressAt = undefined;
    if (j.def.kind === 'TrainJob' && (isTrue(job, 'Suspended') || j.everSuspended))
      j.deadlineBase = this.c.vt;
    if (j.def.kind !== 'TrainJob') j.deadlineBase = this.c.vt;
    // Pods the gang scheduler held back (a PodGroup that waited) are placed now: they start afresh here.
    this.c.pods.remove(this.c.owner(j), false);
    this.c.pods.create(this.c.owner(j), job, j.podScenario, j.podMessage);
    // Under Kueue the PodGroup controller sees minMember pods: Scheduling until they run.
    if (j.gate === 'kueue') this.podGroups.setPodGroupPhase(j, 'Scheduling');
    if (j.podScenario === 'CrashLoopBackOff') j.nextCrashAt = this.c.vt + crashLoopBackoffSeconds(1) * 1000;
    if (j.podScenario !== undefined && j.podFailureMs !== undefined)
      j.podRecoverAt = this.c.vt + j.podFailureMs;
    this.status.writeRunning(j, job);
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
    j.podRecoverAt = undefined;
    // Suspended: the Job controller deletes the pods (evicted ones carry DisruptionTarget first).
    this.c.pods.remove(this.c.owner(j), true);
    this.status.writeSuspended(j, true);
    // Trainer rebuilds the PodGroup of a suspended TrainJob; with no pods it waits again.
    if (j.gate === 'kueue') this.podGroups.setPodGroupPhase(j, 'Pending');
    this.c.markDirty();
  }

  private updatePeak(): void {
    let running = 0;
    let unfinished = 0;
    for (const x of this.c.jobs.values()) {
      if (x.state === 'running' || x.state === 'finishing') running++;
      if (x.state !== 'finished') unfinished++;
    }
    if (running > this.c.stats.peakRunning) this.c.stats.peakRunning = running;
    if (unfinished > this.c.stats.peakUnfinished) this.c.stats.peakUnfinished = unfinished;
  }

  private onPodsReady(j: SimJob): void {
    const job = this.c.api.peek(j.def, j.ns, j.name);
    if (!job) return;
    this.c.pods.set(this.c.owner(j), 'running');
    this.status.running(j);
    if (
      (this.c.o.trainerStatus && j.def.kind === 'TrainJob') ||
      this.training.reportsMetrics(j) ||
      this.training.checkpointLocation(j)
    ) {
      j.nextProgressAt = this.c.vt + this.training.progressInterval(j);
      void this.training.writeMetricLine(j, 0);
    }
    this.kueue.podsReady(j);
    this.podGroups.setPodGroupPhase(j, 'Running');
  }

  /** The run ends: its pods, the job's conditions, its Workload or PodGroup, the counters. */
  finish(j: SimJob, ok: boolean, why: EndCause): void {
    j.ended = { progress: this.training.progressOf(j), why };
    j.state = 'finished';
    j.nextProgressAt = undefined;
    j.nextCrashAt = undefined;
    // Finished pods stay (Succeeded / Failed) until the job is deleted, as on a real cluster.
    this.c.pods.set(this.c.owner(j), ok ? 'succeeded' : 'failed');
    if (ok) this.c.stats.completed++;
    else this.c.stats.failed++;
    const message = this.status.finished(j, ok, why, this.training.progressOf(j));
    this.kueue.finishWorkload(j, ok, message);
    if (!ok && j.uploadError)
      this.c.event(j, 'Warning', 'UploadFailed', `writing the output failed: ${j.uploadError}`);
    this.podGroups.setPodGroupPhase(j, ok ? 'Finished' : 'Failed');
    this.c.markDirty();
  }

  ensureGate(j: SimJob): void {
    if (j.gate === 'kueue') this.kueue.ensureWorkload(j);
    if (j.podGroup) this.podGroups.ensurePodGroup(j);
  }
}

/** A non-negative number of seconds from an env value; undefined when absent or not one. */
function envSeconds(v: string | undefined): number | undefined {
  const n = Number(v ?? Number.NaN);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** 1 ± up to `spread`, the same for every call with one job name (FNV-1a of the name, then murmur3's fmix32). */
export function spreadFactor(name: string, spread: number): number {
  if (spread <= 0) return 1;
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  h ^= h >>> 16;
  return 1 + spread * (((h >>> 0) / 0xffffffff) * 2 - 1);
}
