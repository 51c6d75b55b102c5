import type { ArtifactStore, ServingEvents } from '../artifacts/ports.ts';
import {
  makeModelPublisher,
  type Notification,
  type PublishSummary,
  recordArtifacts,
} from '../artifacts/publish.ts';
import {
  AdmissionDeactivatedError,
  AdmissionStalledError,
  AdmissionTimeoutError,
  ClusterAccessDeniedError,
  InfrastructureFailureError,
  JobVanishedError,
  NotFoundError,
  NotManagedByKueueError,
  PodStartFailedError,
  RunDeadlineExceededError,
  RunEndedError,
  RuntimeNotFoundError,
  TrainingFailedError,
  UnschedulableError,
} from '../errors.ts';
import type { CallOptions, Clock, ClusterGateway, ObjectStore, WorkflowEngine } from '../ports.ts';
import {
  type AttemptRecord,
  admissionPlan,
  attemptGpuHours,
  attemptJobName,
  nextAttempt as decideNextAttempt,
  jobGpus,
  nextShape,
  retryBudget,
  type Shape,
  stepAdmissionDeadline,
} from '../run/attempts.ts';
import { type FailureReason, isInfrastructureFailure, isTerminal } from '../run/phases.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunSpec, TrialRef } from '../run/spec.ts';
import { buildJob, jobApi } from '../trainjob/build.ts';
import { chooseShape } from '../trainjob/capabilities.ts';
import { attemptOf } from '../trainjob/disruption.ts';
import { type GangGate, runtimeGangGate } from '../trainjob/gang.ts';
import { type InitializerJobs, initializerJobs } from '../trainjob/initializers.ts';
import { KUEUE_DEFAULT_MANAGED_KINDS, requireQueueable } from '../trainjob/kueue-kinds.ts';
import { ANNOTATION, LABEL } from '../trainjob/labels.ts';
import {
  DEFAULT_POD_HEALTH,
  type PodHealthOptions,
  podHealth,
  withPodHealth,
} from '../trainjob/pod-health.ts';
import { toRunPhase } from '../trainjob/status.ts';
import { decide, failureCause, type Stage } from './decide.ts';
import { isPast, type JobRef, refreshRef, secondsUntil } from './job-ref.ts';
import { withDisruptionEvidence } from './pod-events.ts';

export interface StepDeps {
  /** The gateway of a named cluster (built lazily: the Kubernetes client loads on first use). */
  gateway: (cluster: string) => Promise<ClusterGateway>;
  records: RunRecords;
  workflow: WorkflowEngine;
  store: ObjectStore;
  clock: Clock;
  /** Server-side copies of training output into the models bucket (the bucket `store` writes). */
  artifacts: ArtifactStore;
  /** The bucket published models go to (`models/<model>/<version>/`): the one `store` writes. */
  modelsBucket: string;
  /** The serving hand-off channel; without one NotifyServing only records. */
  serving?: ServingEvents;
  /**
   * Called when a sweep trial's run ends, so the sweep releases its next trials at once. Its
   * failure is logged, never the run's: the reconciler advances every active sweep each tick.
   */
  onTrialEnded?: (trial: TrialRef, runId: string, opts?: CallOptions) => Promise<void>;
  /**
   * The metric channel (lib/metrics/ingest.ts): PublishArtifacts folds in the run's newest metric
   * objects first, so a report whose notification is still queued counts for the manifest and a
   * trial's objective. Its failure is logged, never the run's.
   */
  metrics?: { drain(runId: string, opts?: CallOptions): Promise<number> };
  /** How long a job may stay suspended after Kueue admitted it (default ADMITTED_SUSPENDED_GRACE_SECONDS). */
  admittedSuspendedGraceSeconds?: number;
  /** The kinds a cluster's Kueue manages (config `kueueManagedKinds`); absent → Kueue's default, TrainJob. */
  kueueManagedKinds?: (cluster: string) => readonly string[];
  /** Unschedulable grace and crash-loop restart limit (the reconciler's; pod-health.ts). */
  podHealth?: Partial<PodHealthOptions>;
  /**
   * Authorize the run against the configuration again before its job is created (lib/intake/authorize.ts):
   * throws ForbiddenError, and the run fails `Forbidden` without a job. Absent → not checked.
   */
  authorize?: (run: RunSpec) => void;
  log?: (line: Record<string, unknown>) => void;
  /**
   * Told when a run's job was created (`started`, the record now Pending) and when the run ended
   * (`ended`, the terminal record): the functions emit metrics from it (lib/observability). Must
   * not throw (awaited: the functions write the metrics before the step returns). Told once per
   * run: only the call whose write made the transition tells (a retried step finds it made).
   * Runs ended by a cancel are told by the API and the sweep stopper (their `onEnded`).
   */
  runs?: {
    started(record: RunRecord): void | Promise<void>;
    ended(record: RunRecord): void | Promise<void>;
  };
}

export interface RunInput {
  run: RunSpec;
}

/** Output location of a run, split for the object store (`s3://bucket/prefix/`). */
export function splitS3Uri(uri: string): { bucket: string; prefix: string } {
  const m = /^s3:\/\/([^/]+)\/(.*)$/.exec(uri);
  if (!m) throw new Error(`not an s3:// URI: ${uri}`);
  return { bucket: m[1] as string, prefix: m[2] as string };
}

/**
 * What each of the state machine's tasks uses: its factory below takes exactly these, so a step
 * function (functions/steps/) that wires less fails to compile.
 */
export type CreateJobDeps = Pick<
  StepDeps,
  'gateway' | 'records' | 'clock' | 'authorize' | 'kueueManagedKinds' | 'runs'
>;
export type AwaitJobDeps = Pick<
  StepDeps,
  'gateway' | 'workflow' | 'clock' | 'podHealth' | 'admittedSuspendedGraceSeconds'
>;
export type CheckJobDeps = Pick<
  StepDeps,
  'gateway' | 'clock' | 'podHealth' | 'admittedSuspendedGraceSeconds'
>;
export type PublishArtifactsDeps = Pick<
  StepDeps,
  'records' | 'store' | 'artifacts' | 'modelsBucket' | 'clock' | 'metrics' | 'log'
>;
export type NotifyServingDeps = Pick<
  StepDeps,
  'records' | 'store' | 'artifacts' | 'modelsBucket' | 'clock' | 'serving'
>;
export type CleanupDeps = Pick<StepDeps, 'gateway'>;
export type NextAttemptDeps = Pick<StepDeps, 'gateway' | 'records' | 'clock' | 'log'>;
export type RecordOutcomeDeps = Pick<StepDeps, 'records' | 'runs' | 'onTrialEnded' | 'log'>;

/** The use cases behind the state machine's tasks. Each is idempotent: Step Functions may retry it. */
export function makeSteps(deps: StepDeps) {
  return {
    createJob: makeCreateJob(deps),
    awaitJob: makeAwaitJob(deps),
    checkJob: makeCheckJob(deps),
    publishArtifacts: makePublishArtifacts(deps),
    notifyServing: makeNotifyServing(deps),
    cleanup: makeCleanup(deps),
    nextAttempt: makeNextAttempt(deps),
    recordOutcome: makeRecordOutcome(deps),
  };
}

export type Steps = ReturnType<typeof makeSteps>;

function decideOptionsOf(deps: Pick<StepDeps, 'admittedSuspendedGraceSeconds'>) {
  return (now: Date) => ({
    now,
    ...(deps.admittedSuspendedGraceSeconds !== undefined
      ? { admittedSuspendedGraceSeconds: deps.admittedSuspendedGraceSeconds }
      : {}),
  });
}

function publisherOf(deps: Pick<StepDeps, 'store' | 'artifacts' | 'modelsBucket' | 'clock'>) {
  return makeModelPublisher({
    store: deps.store,
    artifacts: deps.artifacts,
    clock: deps.clock,
    bucket: deps.modelsBucket,
  });
}

export function makeCreateJob(deps: CreateJobDeps) {
  const { records, clock } = deps;
  async function createJob({ run: input }: RunInput, opts?: CallOptions): Promise<JobRef> {
    // The shape this attempt asks for: the request's, or a step of its elastic fallback.
    const plan = admissionPlan(input.request);
    const step = Math.min(input.fallback?.step ?? 0, plan.length - 1);
    const asked = plan[step] as Shape;
    const run: RunSpec =
      step === 0
        ? input
        : {
            ...input,
            request: {
              ...input.request,
              numNodes: asked.numNodes,
              ...(asked.queue !== undefined ? { queue: asked.queue } : {}),
            },
          };
    // An execution's input is trusted only as far as the configuration allows it now.
    deps.authorize?.(run);
    const record = await records.update(run.runId, { phase: 'Submitting' }, opts);
    if (isTerminal(record.phase)) {
      // Cancelled (or ended) between intake and this step: create nothing.
      throw new RunEndedError(`run ${run.runId} is already ${record.phase}; no job is created`);
    }
    const gateway = await deps.gateway(run.cluster);
    const caps = await gateway.capabilities(opts);
    const { shape, kind } = chooseShape(run.request.target, caps);
    // The runtime's initializer jobs decide where datasetUri / modelUri go (initializer or env);
    // v1 jobs have none, and a namespaced TrainingRuntime is not read (undefined: as requested).
    let initializers: InitializerJobs | undefined;
    let gang: GangGate | undefined;
    // Never suspend-and-queue a kind Kueue will not admit (`auto` may have fallen back to a v1 kind).
    requireQueueable(
      {
        cluster: run.cluster,
        kueueManagedKinds: deps.kueueManagedKinds?.(run.cluster) ?? KUEUE_DEFAULT_MANAGED_KINDS,
      },
      kind ?? 'TrainJob',
      run.request.queue,
    );
    if (shape !== 'training-operator-v1' && run.request.runtime.kind === 'ClusterTrainingRuntime') {
      const runtimes = await gateway.listClusterTrainingRuntimes(opts);
      const runtime = runtimes.find((r) => r.metadata.name === run.request.runtime.name);
      if (!runtime) {
        throw new RuntimeNotFoundError(
          `ClusterTrainingRuntime ${run.request.runtime.name} does not exist on cluster ${run.cluster}`,
        );
      }
      initializers = initializerJobs(runtime, shape);
      gang = runtimeGangGate(runtime);
    }
    const now = clock.now();
    // The admission deadline bounds the whole search of an elastic fallback; each step gets a share.
    const searchDeadline = input.fallback?.searchDeadlineAt
      ? new Date(input.fallback.searchDeadlineAt)
      : new Date(now.getTime() + run.request.admissionDeadlineSeconds * 1000);
    const admissionDeadlineAt = (
      plan.length > 1 ? stepAdmissionDeadline(searchDeadline, now, plan.length - step) : searchDeadline
    ).toISOString();
    // Attempt N ≥ 2 (after NextAttempt) is a job of its own, `<name>-a<N>`: same run id label and URIs.
    const attempt = run.attempt ?? 1;
    const jobName = attemptJobName(run.jobName, attempt);
    const job = buildJob({ ...run, jobName }, shape, kind, initializers);
    job.metadata.annotations = {
      ...job.metadata.annotations,
      [ANNOTATION.admissionDeadline]: admissionDeadlineAt,
      [ANNOTATION.runDeadlineSeconds]: String(run.request.runDeadlineSeconds),
      ...(gang ? { [ANNOTATION.gangGate]: gang } : {}),
    };
    const { job: created } = await gateway.createJob(job, opts);
    const api = jobApi(shape, kind);
    const { record: pending, changed: started } = await records.apply(
      run.runId,
      {
        phase: 'Pending',
        job: {
          cluster: run.cluster,
          apiVersion: job.apiVersion,
          kind: job.kind,
          namespace: run.namespace,
          name: jobName,
        },
        attempt: {
          attempt,
          jobName,
          startedAt: now.toISOString(),
          ...(plan.length > 1
            ? { numNodes: asked.numNodes, ...(asked.queue !== undefined ? { queue: asked.queue } : {}) }
            : {}),
        },
      },
      opts,
    );
    // Once per run: a retried CreateJob finds the record Pending already and emits nothing, and a
    // later attempt is the same run.
    if (started && attempt === 1 && pending.phase === 'Pending') await deps.runs?.started(pending);
    return {
      cluster: run.cluster,
      api,
      namespace: run.namespace,
      name: jobName,
      ...(created.metadata.uid ? { uid: created.metadata.uid } : {}),
      status: 'pending',
      admissionDeadlineAt,
      admissionTimeoutSeconds: secondsUntil(admissionDeadlineAt, now),
      ...(plan.length > 1 ? { admissionSearchDeadlineAt: searchDeadline.toISOString() } : {}),
      runTimeoutSeconds: run.request.runDeadlineSeconds,
    };
  }

  return createJob;
}

function jobObserver(deps: Pick<StepDeps, 'gateway' | 'clock' | 'podHealth'>) {
  const { clock } = deps;
  const healthOptions: PodHealthOptions = { ...DEFAULT_POD_HEALTH, ...deps.podHealth };
  /** The job, its gate and the run's pods, read as the reconciler reads them (one LIST of the run's pods). */
  async function observe(ref: JobRef, runId: string, opts?: CallOptions) {
    const gateway = await deps.gateway(ref.cluster);
    const job = await gateway.getJob(ref.api, ref.namespace, ref.name, opts);
    const gate = job ? await gateway.findAdmissionGate(job, opts) : undefined;
    const view = toRunPhase(job, gate);
    if (!job || view.phase === 'Succeeded') return view;
    let pods: unknown[] | undefined;
    try {
      const attempt = attemptOf(job);
      pods = (await gateway.listPods(`${LABEL.runId}=${runId}`, opts)).filter(
        (p) => attemptOf(p) === attempt,
      );
    } catch (err) {
      // RBAC from before pod health: judge by the job alone (as the reconciler does).
      if (!(err instanceof ClusterAccessDeniedError)) throw err;
    }
    // A failed job: its pods tell an infrastructure failure from a code failure.
    if (view.finished) return withDisruptionEvidence(gateway, view, pods, job, opts);
    const health = pods === undefined ? undefined : podHealth(pods, clock.now(), healthOptions);
    return withDisruptionEvidence(gateway, withPodHealth(view, health, job), pods, job, opts);
  }

  return observe;
}

export function makeAwaitJob(deps: AwaitJobDeps) {
  const { workflow, clock } = deps;
  const observe = jobObserver(deps);
  const decideOptions = decideOptionsOf(deps);
  /**
   * The `.waitForTaskToken` task: store the token on the job where the reconciler finds it, then
   * look once — if the job is already past this stage, answer the token at once.
   */
  async function awaitJob(
    input: RunInput & { token: string; stage: Stage; job: JobRef },
    opts?: CallOptions,
  ): Promise<void> {
    const { token, stage, job: ref, run } = input;
    const gateway = await deps.gateway(ref.cluster);
    const key = stage === 'admission' ? ANNOTATION.admissionToken : ANNOTATION.completionToken;
    try {
      await gateway.annotateJob(ref.api, ref.namespace, ref.name, { [key]: token }, opts);
    } catch (err) {
      if (err instanceof Error && err.name === 'NotFoundError') {
        await workflow.sendTaskFailure(token, 'JobVanishedError', failureCause(vanished()), opts);
        return;
      }
      throw err;
    }
    const view = await observe(ref, run.runId, opts);
    const decision = decide(stage, view, decideOptions(clock.now()));
    if (decision.kind === 'succeed') {
      const output = refreshRef(ref, view, run.request.runDeadlineSeconds, clock.now());
      await workflow.sendTaskSuccess(token, output, opts);
      await gateway
        .annotateJob(ref.api, ref.namespace, ref.name, { [key]: null }, opts)
        .catch(() => undefined);
    } else if (decision.kind === 'fail') {
      await workflow.sendTaskFailure(token, decision.error, failureCause(decision), opts);
    }
  }

  return awaitJob;
}

export function makeCheckJob(deps: CheckJobDeps) {
  const { clock } = deps;
  const observe = jobObserver(deps);
  const decideOptions = decideOptionsOf(deps);
  /** Heartbeat fallback: the reconciler was silent, so look once and tell the ASL what to do. */
  async function checkJob(
    input: RunInput & { stage: Stage; job: JobRef },
    opts?: CallOptions,
  ): Promise<JobRef> {
    const { stage, job: ref, run } = input;
    const view = await observe(ref, run.runId, opts);
    const now = clock.now();
    const decision = decide(stage, view, decideOptions(now));
    if (decision.kind === 'fail') {
      const cause = failureCause(decision);
      throw new FAIL_ERRORS[decision.error](cause);
    }
    const next = refreshRef(ref, view, run.request.runDeadlineSeconds, now);
    if (decision.kind === 'wait') {
      if (stage === 'admission' && isPast(ref.admissionDeadlineAt, now)) {
        throw new AdmissionTimeoutError(`job ${ref.name} was not admitted before ${ref.admissionDeadlineAt}`);
      }
      if (stage === 'completion' && next.runDeadlineAt && isPast(next.runDeadlineAt, now)) {
        throw new RunDeadlineExceededError(`job ${ref.name} ran past ${next.runDeadlineAt}`);
      }
      // The ASL's Choice sends `pending` back to AwaitAdmission and anything but `succeeded` back to AwaitCompletion.
      return stage === 'admission' ? { ...next, status: 'pending' } : next;
    }
    return next;
  }

  return checkJob;
}

export function makePublishArtifacts(deps: PublishArtifactsDeps) {
  const { records, clock } = deps;
  const publisher = publisherOf(deps);
  /**
   * Publish the run's output as the next version of its model (lib/artifacts/publish.ts):
   * server-side copies to `models/<model>/<version>/`, a manifest, the `latest` pointer.
   * Idempotent: a retry returns what the first attempt published. Returns a small summary
   * (never the file list: the execution's payload limit is 256 KiB).
   */
  async function publishArtifacts(
    input: RunInput & { job: JobRef },
    opts?: CallOptions,
  ): Promise<PublishSummary> {
    const { run, job } = input;
    if (deps.metrics) {
      await deps.metrics.drain(run.runId, opts).catch((err: unknown) => {
        deps.log?.({
          level: 'WARN',
          msg: 'metric channel not drained',
          runId: run.runId,
          error: String(err),
        });
      });
    }
    const record = await records.update(run.runId, { phase: 'Publishing' }, opts);
    if (run.trial && !run.trial.publish) {
      // A sweep publishes its best trial once the sweep ends, not every trial.
      return {
        outputUri: run.outputUri,
        model: run.request.modelName,
        published: false,
        files: 0,
        bytes: 0,
        at: clock.now().toISOString(),
      };
    }
    const artifacts = await publisher.publish({ run, job, record }, opts);
    await records.update(run.runId, { artifacts: recordArtifacts(artifacts) }, opts);
    return artifacts;
  }

  return publishArtifacts;
}

export function makeNotifyServing(deps: NotifyServingDeps) {
  const { records } = deps;
  const publisher = publisherOf(deps);
  /**
   * Hand-off to serving: an event carrying the published manifest (or a no-model event when the
   * run produced none), on the configured channel; with none configured it only records.
   */
  async function notifyServing(
    input: RunInput & { job?: JobRef; artifacts: PublishSummary },
    opts?: CallOptions,
  ): Promise<Notification> {
    const { run, artifacts } = input;
    await records.update(run.runId, { artifacts: recordArtifacts(artifacts) }, opts);
    if (run.trial && !run.trial.publish) {
      return {
        notified: false,
        reason: `a trial of sweep ${run.trial.sweepId}: the sweep hands over its best trial`,
      };
    }
    return publisher.notify({ run, artifacts }, deps.serving, opts);
  }

  return notifyServing;
}

export function makeCleanup(deps: CleanupDeps) {
  /** Delete the job so its quota is freed. Missing job refs (CreateJob failed) are fine. */
  async function cleanup(
    state: { run: RunSpec; job?: JobRef },
    opts?: CallOptions,
  ): Promise<{ deleted: boolean }> {
    if (!state.job) return { deleted: false };
    await (await deps.gateway(state.job.cluster)).deleteJob(
      state.job.api,
      state.job.namespace,
      state.job.name,
      opts,
    );
    return { deleted: true };
  }

  return cleanup;
}

export function makeNextAttempt(deps: NextAttemptDeps) {
  const { records, clock } = deps;
  /**
   * An attempt failed (the ASL caught InfrastructureFailureError, UnschedulableError or
   * TrainingFailedError from a wait): record how it ended on the run record, delete its job, and
   * return the run for the next attempt — or, when the request's budget for that kind of failure is
   * spent (lib/run/attempts.ts), fail with the attempt's reason. Idempotent: a retry finds the
   * attempt recorded (its first end stands) and the job gone.
   */
  async function nextAttempt(input: { state: FailedState & { job?: JobRef } }, opts?: CallOptions) {
    const { state } = input;
    const { run } = state;
    const { reason, message } = failureOf(state);
    const ended = run.attempt ?? 1;
    const now = clock.now();
    const record = await records.get(run.runId, opts);
    if (!record) throw new NotFoundError(`run ${run.runId} has no record`);
    if (isTerminal(record.phase)) {
      throw new RunEndedError(`run ${run.runId} is already ${record.phase}; no new attempt`);
    }
    const own = record.attempts?.find((a) => a.attempt === ended);
    const startedAt = own?.startedAt ?? record.createdAt;
    const endedAt = own?.endedAt ?? now.toISOString();
    const gpuHours = attemptGpuHours(record.transitions, jobGpus(run.request), startedAt, endedAt);
    const endedAttempt: AttemptRecord = {
      attempt: ended,
      jobName: own?.jobName ?? attemptJobName(run.jobName, ended),
      startedAt,
      endedAt,
      cause: reason,
      message,
      gpuHours,
      gpuHoursLost: isInfrastructureFailure(reason) ? gpuHours : 0,
    };
    const previous = (record.attempts ?? []).filter((a) => a.attempt < ended);
    const step = run.fallback?.step ?? 0;
    const searchDeadlineAt = state.job?.admissionSearchDeadlineAt;
    // Not admitted in time: the elastic fallback's next shape, while the run's admission deadline allows.
    const decision =
      reason === 'AdmissionTimeout'
        ? nextShape(
            ended,
            step,
            admissionPlan(run.request),
            message,
            searchDeadlineAt === undefined || isPast(searchDeadlineAt, now),
          )
        : decideNextAttempt(ended, reason, message, previous, retryBudget(run.request));
    if (decision.kind === 'fail') {
      // The run ends: Cleanup deletes the job (and the reconciler, should Cleanup not manage to).
      await records.update(run.runId, { attempt: endedAttempt }, opts);
      const cause = JSON.stringify({ reason: decision.reason, message: decision.message });
      if (decision.reason === 'AdmissionTimeout') throw new AdmissionTimeoutError(decision.message);
      throw isInfrastructureFailure(decision.reason)
        ? new InfrastructureFailureError(cause, { reason: decision.reason })
        : new TrainingFailedError(cause);
    }
    if (state.job) {
      // The failed job goes before the next one is created: its pods, Workload or queue slot must not linger.
      await (await deps.gateway(state.job.cluster))
        .deleteJob(state.job.api, state.job.namespace, state.job.name, opts)
        .catch((err: unknown) => {
          if (!(err instanceof NotFoundError)) throw err;
        });
    }
    await records.update(
      run.runId,
      {
        phase: 'Pending',
        reason,
        message: `attempt ${decision.attempt} starts after attempt ${ended} ended (${reason}): ${message}`,
        attempt: endedAttempt,
      },
      opts,
    );
    deps.log?.({ level: 'INFO', msg: 'next attempt', runId: run.runId, attempt: decision.attempt, reason });
    // An infrastructure failure keeps the shape that was admitted, with a fresh admission deadline.
    const fallback =
      decision.step !== undefined
        ? { step: decision.step, ...(searchDeadlineAt ? { searchDeadlineAt } : {}) }
        : run.fallback
          ? { step: run.fallback.step }
          : undefined;
    const { fallback: _old, ...rest } = run;
    return { run: { ...rest, attempt: decision.attempt, ...(fallback ? { fallback } : {}) } };
  }

  return nextAttempt;
}

export function makeRecordOutcome(deps: RecordOutcomeDeps) {
  const { records } = deps;
  async function recordOutcome(
    input:
      | { outcome: 'Succeeded'; run: RunSpec; job: JobRef; artifacts?: unknown }
      | { outcome: 'Failed'; state: FailedState },
    opts?: CallOptions,
  ) {
    if (input.outcome === 'Succeeded') {
      const { record, changed } = await records.apply(
        input.run.runId,
        { phase: 'Succeeded', ...(input.job.metrics ? { metrics: input.job.metrics } : {}) },
        opts,
      );
      // The outcome's metrics once: a retried RecordOutcome finds the record ended and emits nothing.
      if (changed) await deps.runs?.ended(record);
      await trialEnded(input.run, opts);
      return { phase: record.phase };
    }
    const { reason, message } = failureOf(input.state);
    const { record, changed } = await records.apply(
      input.state.run.runId,
      { phase: 'Failed', reason, message },
      opts,
    );
    if (changed) await deps.runs?.ended(record);
    await trialEnded(input.state.run, opts);
    return { phase: record.phase, reason: record.reason };
  }

  /**
   * The sweep hook, bounded: it gets TRIAL_HOOK_BUDGET_MS of the step's time, and whatever
   * happens to it the run's outcome stands (the step must not time out or fail because a sweep
   * record is contended; the reconciler advances the sweep on its next tick).
   */
  async function trialEnded(run: RunSpec, opts?: CallOptions) {
    if (!run.trial || !deps.onTrialEnded) return;
    const budget = AbortSignal.timeout(TRIAL_HOOK_BUDGET_MS);
    const signal = opts?.signal ? AbortSignal.any([opts.signal, budget]) : budget;
    try {
      await Promise.race([
        deps.onTrialEnded(run.trial, run.runId, { signal }),
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => reject(signal.reason), { once: true });
        }),
      ]);
    } catch (err) {
      deps.log?.({
        level: 'WARN',
        msg: 'sweep not advanced; the reconciler will',
        runId: run.runId,
        sweepId: run.trial.sweepId,
        error: String(err),
      });
    }
  }

  return recordOutcome;
}

/** How long RecordOutcome may spend advancing a trial's sweep (its Lambda timeout is 30 s). */
export const TRIAL_HOOK_BUDGET_MS = 8000;

function vanished() {
  return {
    kind: 'fail' as const,
    error: 'JobVanishedError' as const,
    reason: 'JobVanished',
    message: 'the job was deleted while the run waited for it',
  };
}

const FAIL_ERRORS = {
  TrainingFailedError,
  JobVanishedError,
  AdmissionDeactivatedError,
  AdmissionStalledError,
  NotManagedByKueueError,
  PodStartFailedError,
  UnschedulableError,
  InfrastructureFailureError,
} as const;

/** The state the failure path receives: `$.failure` from a timeout Pass, or `$.error` from a Catch. */
export interface FailedState {
  run: RunSpec;
  failure?: { reason: string; message: string };
  error?: { Error: string; Cause?: string };
}

const REASON_BY_ERROR: Record<string, FailureReason> = {
  TrainingFailedError: 'TrainingFailed',
  NotManagedByKueueError: 'NotManagedByKueue',
  PodStartFailedError: 'TrainingFailed',
  UnschedulableError: 'Unschedulable',
  InfrastructureFailureError: 'NodeLost',
  // Only NextAttempt sees it: AwaitAdmission's own timeout (AwaitCompletion's goes to RunDeadlineExceeded).
  'States.Timeout': 'AdmissionTimeout',
  JobVanishedError: 'JobVanished',
  AdmissionDeactivatedError: 'AdmissionDeactivated',
  AdmissionStalledError: 'AdmissionStalled',
  AdmissionTimeoutError: 'AdmissionTimeout',
  RunDeadlineExceededError: 'DeadlineExceeded',
  RuntimeNotFoundError: 'InvalidRuntime',
  UnsupportedApiError: 'InvalidRuntime',
  ValidationError: 'InvalidRequest',
  ClusterRejectedError: 'ClusterRejected',
  ClusterAccessDeniedError: 'ClusterRejected',
  JobNameConflictError: 'JobNameConflict',
  NoArtifactsError: 'NoArtifacts',
  ArtifactIntegrityError: 'ArtifactIntegrity',
  ArtifactConflictError: 'ArtifactConflict',
  ModelOwnedError: 'ModelOwned',
  ForbiddenError: 'Forbidden',
  ClusterUnavailableError: 'ClusterUnavailable',
};

/** Errors sent by SendTaskFailure whose cause names the precise reason (e.g. `ImagePullFailed`, `Stalled`). */
const REASON_FROM_CAUSE = new Set([
  'TrainingFailedError',
  'PodStartFailedError',
  'UnschedulableError',
  'InfrastructureFailureError',
]);

/** Turn the failure path's state into the reason and message the run record shows. */
export function failureOf(state: FailedState): { reason: string; message: string } {
  if (state.failure) return state.failure;
  const error = state.error?.Error ?? 'InternalError';
  const cause = state.error?.Cause ?? '';
  let message = error === 'States.Timeout' ? 'the job was not admitted before the admission deadline' : cause;
  let reason: string = REASON_BY_ERROR[error] ?? 'InternalError';
  // Errors sent by SendTaskFailure carry {reason, message} as JSON; thrown errors carry
  // {errorMessage} (Lambda's error shape) or plain text.
  try {
    let parsed = JSON.parse(cause) as { reason?: string; message?: string; errorMessage?: string };
    if (parsed.errorMessage) message = parsed.errorMessage;
    // The heartbeat fallback (checkJob) throws with the {reason, message} JSON as its message.
    if (parsed.errorMessage?.startsWith('{') && REASON_FROM_CAUSE.has(error)) {
      try {
        parsed = { ...parsed, ...(JSON.parse(parsed.errorMessage) as { reason?: string; message?: string }) };
      } catch {
        // not JSON after all: keep the text
      }
    }
    if (parsed.message) message = parsed.message;
    if (parsed.reason && REASON_FROM_CAUSE.has(error)) reason = parsed.reason;
  } catch {
    // plain-text cause: keep it as the message
  }
  return { reason, message: message || error };
}
