import type { Json } from './apiserver.ts';
import type { JobStatus } from './job-status.ts';
import { trainingLog } from './logs.ts';
import { extraMetrics, finalLoss, holdoutAccuracy, metricsAt } from './objective.ts';
import {
  METRICS_FILE,
  parseS3Uri,
  readCheckpoint,
  readModelHyperparameters,
  writeCheckpoint,
  writeMetricObject,
  writeOutput,
} from './output.ts';
import { arr, type EndCause, meta, obj, readyAt, type SimCore, type SimJob } from './sim-core.ts';

/**
 * The simulated training code in a job's pods: its progress, the checkpoints it saves and resumes
 * from, its reports on Gantry's metric channel, the model it uploads at the end and the log it prints.
 */
export class Training {
  private readonly c: SimCore;
  private readonly status: JobStatus;
  private readonly finish: (j: SimJob, ok: boolean, why: EndCause) => void;
  private readonly tick: () => void;

  constructor(
    c: SimCore,
    status: JobStatus,
    finish: (j: SimJob, ok: boolean, why: EndCause) => void,
    tick: () => void,
  ) {
    this.c = c;
    this.status = status;
    this.finish = finish;
    this.tick = tick;
  }

  progressInterval(j: SimJob): number {
    return Math.max(j.durationMs / 10, 5000);
  }

  progressOf(j: SimJob): number {
    if (!j.ready || j.runStart === undefined) return j.resumedFrom;
    return Math.min(1, Math.max(0, j.resumedFrom + (this.c.vt - readyAt(j)) / j.durationMs));
  }

  /** Whether the job's training code saves and resumes checkpoints (GANTRY_CHECKPOINT_URI). */
  checkpointLocation(j: SimJob) {
    if (!this.c.o.checkpoints || !this.c.o.s3 || j.checkpointUri === undefined) return undefined;
    return parseS3Uri(j.checkpointUri);
  }

  /**
   * What training code that follows the checkpoint contract does when it starts: look for the
   * newest checkpoint of its run and continue from there (a later attempt trains only the rest).
   */
  resumeFromCheckpoint(j: SimJob): void {
    const loc = this.checkpointLocation(j);
    const s3 = this.c.o.s3;
    if (!loc || !s3) return;
    this.readFirst(
      j,
      readCheckpoint(s3, loc),
      (p) => {
        if (p > 0) j.resumedFrom = p;
      },
      (e) => this.c.o.log(`simulator: checkpoint of ${j.ns}/${j.name} not read: ${String(e)}`),
    );
  }

  /**
   * The simulated evaluation code (a job given GANTRY_EVALUATION, docs/model-registry.md#evaluation):
   * it loads the model at GANTRY_MODEL_URI — the simulated training's `metrics.json` there names the
   * hyperparameters it was trained with — and reports its holdout score (objective.ts
   * `holdoutAccuracy`) instead of a training's. A model it cannot read crashes it at once, as
   * evaluation code that finds no model does.
   */
  evaluateModel(j: SimJob, env: Record<string, string>): void {
    if (env.GANTRY_EVALUATION === undefined) return;
    const s3 = this.c.o.s3;
    const loc = parseS3Uri(env.GANTRY_MODEL_URI ?? '');
    const crash = (why: string) => {
      j.failAtPct = 0;
      j.failMessage = `evaluation: ${why}`;
    };
    if (!s3 || !loc) {
      this.c.enqueue(() => {
        crash(`no model at GANTRY_MODEL_URI ${env.GANTRY_MODEL_URI ?? '(unset)'}`);
        this.c.markDirty();
      });
      return;
    }
    this.readFirst(
      j,
      readModelHyperparameters(s3, loc),
      (hp) => {
        if (hp) j.accuracy = holdoutAccuracy(hp);
        else crash(`${env.GANTRY_MODEL_URI}${METRICS_FILE} not found`);
      },
      (e) => crash(`model not read: ${String(e)}`),
    );
  }

  /**
   * A read the job's code makes before it trains or scores: the job holds (`loading`) until the
   * read returns, then `apply` (or `failed`) runs in the controller's queue unless the job is gone
   * or over. Tracked, so settle() and close() wait for it.
   */
  private readFirst<T>(
    j: SimJob,
    read: Promise<T>,
    apply: (v: T) => void,
    failed: (e: unknown) => void,
  ): void {
    j.loading++;
    const done = (fn: () => void) => {
      this.c.enqueue(() => {
        j.loading--;
        if (this.c.jobs.has(j.uid) && j.state !== 'finished') fn();
        this.c.markDirty();
      });
      setImmediate(() => this.tick());
    };
    const tracked: Promise<void> = read
      .then(
        (v) => done(() => apply(v)),
        (e: unknown) => done(() => failed(e)),
      )
      .finally(() => this.c.inflight.delete(tracked));
    this.c.inflight.add(tracked);
  }

  /** Save the progress as the training code's checkpoint (each progress report). */
  private saveCheckpoint(j: SimJob, p: number): void {
    const loc = this.checkpointLocation(j);
    const s3 = this.c.o.s3;
    if (!loc || !s3) return;
    const write = writeCheckpoint(s3, loc, p).catch((e: unknown) =>
      this.c.o.log(`simulator: checkpoint of ${j.ns}/${j.name} not saved: ${String(e)}`),
    );
    const tracked = write.finally(() => this.c.inflight.delete(tracked));
    this.c.inflight.add(tracked);
  }

  /** Whether the job's training code reports through Gantry's metric channel. */
  reportsMetrics(j: SimJob): boolean {
    return (
      this.c.o.metricChannel &&
      this.c.o.s3 !== undefined &&
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
  writeMetricLine(j: SimJob, p: number): Promise<void> {
    const loc = parseS3Uri(j.metricsUri ?? '');
    if (!loc || !this.c.o.s3 || !this.reportsMetrics(j)) return Promise.resolve();
    const pct = Math.floor(p * 100);
    const m = p >= 1 ? { loss: finalLoss(j.accuracy), accuracy: j.accuracy } : metricsAt(p, j.accuracy);
    const line = {
      time: this.c.now,
      step: pct,
      progressPercentage: pct,
      estimatedRemainingSeconds: Math.max(0, Math.round(((1 - p) * j.durationMs) / 1000)),
      metrics: {
        loss: Number(m.loss.toFixed(6)),
        accuracy: Number(m.accuracy.toFixed(6)),
        ...extraMetrics(j.hp),
      },
    };
    const name = `progress-${String(pct).padStart(3, '0')}.jsonl`;
    const write = writeMetricObject(this.c.o.s3, loc, name, [line]).catch((e: unknown) => {
      const why = e instanceof Error ? e.message : String(e);
      this.c.o.log(`simulator: metric report of ${j.ns}/${j.name} failed: ${why}`);
    });
    const tracked = write.finally(() => this.c.inflight.delete(tracked));
    this.c.inflight.add(tracked);
    return tracked;
  }

  reportProgress(j: SimJob): void {
    const p = this.progressOf(j);
    j.nextProgressAt = p >= 1 ? undefined : this.c.vt + this.progressInterval(j);
    if (p < 1) void this.writeMetricLine(j, p);
    if (p > 0 && p < 1) this.saveCheckpoint(j, p);
    if (j.def.kind !== 'TrainJob' || !this.c.o.trainerStatus) return;
    this.c.api.mutate(
      j.def,
      j.ns,
      j.name,
      (o) => {
        const st = obj(o.status);
        st.trainerStatus = this.status.trainerStatus(j, p);
        o.status = st;
      },
      'status',
    );
  }

  wantsOutput(j: SimJob): boolean {
    return (
      !j.noOutput &&
      j.outputUri !== undefined &&
      this.c.o.s3 !== undefined &&
      parseS3Uri(j.outputUri) !== undefined
    );
  }

  startUpload(j: SimJob): void {
    const loc = this.wantsOutput(j) ? parseS3Uri(j.outputUri ?? '') : undefined;
    const s3 = this.c.o.s3;
    if (!s3 || (!loc && !this.reportsMetrics(j))) {
      j.upload = 'done';
      return;
    }
    j.upload = 'started';
    const metrics = {
      accuracy: Number(j.accuracy.toFixed(6)),
      loss: Number(finalLoss(j.accuracy).toFixed(6)),
      ...extraMetrics(j.hp),
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
          this.c.o.log(`simulator: output upload for ${j.ns}/${j.name} failed: ${j.uploadError}`);
        },
      );
    const tracked = p.finally(() => {
      this.c.inflight.delete(tracked);
      if (j.state === 'finishing') {
        this.c.enqueue(() => {
          if (j.state !== 'finishing' || !this.c.jobs.has(j.uid)) return;
          this.finish(j, j.upload === 'done', j.upload === 'done' ? 'Succeeded' : 'UploadFailed');
        });
        setImmediate(() => this.tick());
      }
    });
    this.c.inflight.add(tracked);
  }

  /**
   * What the simulated training script in a pod's container has printed (local/simulator/logs.ts):
   * derived from the run's progress, so the log grows as the run goes; a pod of no simulated job
   * has printed nothing. `last`: the run before a crash (CrashLoopBackOff).
   */
  podLog(pod: Json, container: string, last: boolean): string[] {
    const owner = arr(meta(pod).ownerReferences).map(obj)[0];
    const j = owner ? this.c.jobs.get(String(owner.uid)) : undefined;
    if (!j) return [];
    const labels = obj(meta(pod).labels) as Record<string, string>;
    const pods = this.c.pods.of(this.c.owner(j));
    let rank: number;
    let worldSize: number;
    if (j.def.kind === 'TrainJob') {
      const set = labels['jobset.sigs.k8s.io/replicatedjob-name'];
      rank = Number(labels['batch.kubernetes.io/job-completion-index'] ?? 0);
      // Pods the Job controller replaced (Terminating) are not in the world any more.
      worldSize = pods.filter(
        (p) =>
          obj(meta(p).labels)['jobset.sigs.k8s.io/replicatedjob-name'] === set && !meta(p).deletionTimestamp,
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
}
