import type { Json } from './apiserver.ts';
import { findRuntime, isSuspended, LEGACY_KINDS, replicatedJobs } from './jobs.ts';
import { isTrue, setCondition } from './kueue.ts';
import { extraMetrics, finalLoss, metricsAt } from './objective.ts';
import { jobsStatusFromPods } from './pods.ts';
import { type EndCause, meta, obj, type SimCore, type SimJob } from './sim-core.ts';

/**
 * The job controllers' status writers: the Kubeflow Trainer's (TrainJob conditions, jobsStatus,
 * trainerStatus) and the Training Operator's (v1 conditions, replicaStatuses, start and
 * completion times), as a job is created, suspended, resumed, runs and finishes.
 */
export class JobStatus {
  private readonly c: SimCore;

  constructor(c: SimCore) {
    this.c = c;
  }

  jobsStatus(
    j: SimJob,
    job: Json,
    phase: 'suspended' | 'pending' | 'running' | 'succeeded' | 'failed',
  ): Json[] {
    // Counted from the pods (pods.ts), as JobSet counts its child Jobs; `phase` only says whether
    // the TrainJob is suspended.
    const rjs = replicatedJobs(job, findRuntime(this.c.api, job));
    return jobsStatusFromPods(
      rjs.map((rj) => rj.name),
      this.c.pods.of(this.c.owner(j)),
      phase === 'suspended',
    );
  }

  private replicaStatuses(j: SimJob, job: Json, phase: 'active' | 'succeeded' | 'failed' | 'none'): Json {
    const info = LEGACY_KINDS[j.def.kind]!;
    const specs = obj(obj(job.spec)[info.specs]);
    const out: Json = {};
    // Counted from the pods (the operator counts Running pods as active), one entry per replica type.
    const pods = phase === 'none' ? [] : this.c.pods.of(this.c.owner(j));
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
    const next = {
      type,
      status,
      reason,
      message,
      lastUpdateTime: this.c.now,
      lastTransitionTime: this.c.now,
    };
    if (i >= 0) {
      const old = conds[i]!;
      if (old.status === status && old.reason === reason && old.message === message) return conds;
      if (old.status === status) next.lastTransitionTime = String(old.lastTransitionTime);
      conds.splice(i, 1);
    }
    conds.push(next);
    return conds;
  }

  initialStatus(j: SimJob, job: Json): void {
    const suspended = isSuspended(j.def, job);
    if (suspended) j.everSuspended = true;
    if (j.def.kind === 'TrainJob') {
      this.c.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          if (suspended) {
            st.conditions = setCondition(
              st.conditions,
              { type: 'Suspended', status: 'True', reason: 'Suspended', message: 'TrainJob is suspended' },
              this.c.now,
            );
          }
          st.jobsStatus = this.jobsStatus(j, o, suspended ? 'suspended' : 'pending');
          o.status = st;
        },
        'status',
      );
    } else {
      this.c.api.mutate(
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

  writeRunning(j: SimJob, job: Json): void {
    const wasSuspended = isTrue(job, 'Suspended');
    if (j.def.kind === 'TrainJob') {
      this.c.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          if (wasSuspended) {
            st.conditions = setCondition(
              st.conditions,
              { type: 'Suspended', status: 'False', reason: 'Resumed', message: 'TrainJob is resumed' },
              this.c.now,
            );
          }
          st.jobsStatus = this.jobsStatus(j, o, 'running');
          o.status = st;
        },
        'status',
      );
    } else {
      this.c.api.mutate(
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
          st.startTime = this.c.now;
          o.status = st;
        },
        'status',
      );
    }
  }

  writeSuspended(j: SimJob, suspended: boolean): void {
    if (!suspended) return;
    j.everSuspended = true;
    if (j.def.kind === 'TrainJob') {
      this.c.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.conditions = setCondition(
            st.conditions,
            { type: 'Suspended', status: 'True', reason: 'Suspended', message: 'TrainJob is suspended' },
            this.c.now,
          );
          st.jobsStatus = this.jobsStatus(j, o, 'suspended');
          o.status = st;
        },
        'status',
      );
    } else {
      this.c.api.mutate(
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
              ? { ...c, status: 'False', reason: `${j.def.kind}Suspended`, lastTransitionTime: this.c.now }
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

  trainerStatus(j: SimJob, p: number): Json {
    const m = p >= 1 ? { loss: finalLoss(j.accuracy), accuracy: j.accuracy } : metricsAt(p, j.accuracy);
    return {
      progressPercentage: Math.floor(p * 100),
      estimatedRemainingSeconds: Math.max(0, Math.round(((1 - p) * j.durationMs) / 1000)),
      metrics: [
        { name: 'loss', value: m.loss.toFixed(4) },
        { name: 'accuracy', value: m.accuracy.toFixed(4) },
        ...Object.entries(extraMetrics(j.hp)).map(([name, v]) => ({ name, value: v.toFixed(4) })),
      ],
      lastUpdatedTime: this.c.now,
    };
  }

  /** The job's pods are ready: the Trainer's jobsStatus (and trainerStatus) or the operator's Running. */
  running(j: SimJob): void {
    if (j.def.kind === 'TrainJob') {
      this.c.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.jobsStatus = this.jobsStatus(j, o, 'running');
          if (this.c.o.trainerStatus) st.trainerStatus = this.trainerStatus(j, 0);
          o.status = st;
        },
        'status',
      );
    } else {
      this.c.api.mutate(
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
  }

  /**
   * The job finished (`p`: its progress): the Trainer's Complete/Failed or the operator's
   * Succeeded/Failed. Returns the condition's message (the Workload's Finished says the same).
   */
  finished(j: SimJob, ok: boolean, why: EndCause, p: number): string {
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
      this.c.api.mutate(
        j.def,
        j.ns,
        j.name,
        (o) => {
          const st = obj(o.status);
          st.conditions = setCondition(
            st.conditions,
            { type: ok ? 'Complete' : 'Failed', status: 'True', reason, message },
            this.c.now,
          );
          st.jobsStatus = this.jobsStatus(j, o, ok ? 'succeeded' : 'failed');
          if (this.c.o.trainerStatus && j.ready) st.trainerStatus = this.trainerStatus(j, ok ? 1 : p);
          o.status = st;
        },
        'status',
      );
      return message;
    }
    const reason = ok ? `${kind}Succeeded` : (j.failReason ?? `${kind}Failed`);
    const firstType =
      LEGACY_KINDS[kind]!.first.find(
        (t) => t in obj(obj(this.c.api.peek(j.def, j.ns, j.name)?.spec)[LEGACY_KINDS[kind]!.specs]),
      ) ?? 'Master';
    const message = ok
      ? `${kind} ${j.ns}/${j.name} successfully completed.`
      : why === 'DeadlineExceeded'
        ? `${kind} ${j.name} has failed because it was active longer than specified deadline`
        : (j.failMessage ?? `${kind} ${j.ns}/${j.name} has failed because 1 ${firstType} replica(s) failed.`);
    this.c.api.mutate(
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
          lastUpdateTime: this.c.now,
          lastTransitionTime: this.c.now,
        });
        st.conditions = conds;
        st.replicaStatuses = this.replicaStatuses(j, o, ok ? 'succeeded' : 'failed');
        st.completionTime = this.c.now;
        o.status = st;
      },
      'status',
    );
    return message;
  }
}
