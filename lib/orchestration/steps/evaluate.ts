import { manifestKey } from '../../artifacts/layout.ts';
import type { ModelManifest } from '../../artifacts/manifest.ts';
import type { PublishSummary } from '../../artifacts/publish.ts';
import { NotFoundError, TerminalError } from '../../errors.ts';
import { emptyHistory, foldObject, latestMetrics, metricsTokenOf } from '../../metrics/channel.ts';
import type { MetricObjectReader } from '../../metrics/ingest.ts';
import type { CallOptions, JobApi } from '../../ports.ts';
import {
  type EvaluatedVersion,
  type EvaluationSpec,
  type EvaluationState,
  evaluationJobName,
  evaluationPolicyOf,
} from '../../registry/evaluation.ts';
import { aliasKey } from '../../registry/layout.ts';
import { type PromotionPolicy, policiesFor } from '../../registry/policy.ts';
import type { RunSpec } from '../../run/spec.ts';
import { buildJob, jobApi } from '../../trainjob/build.ts';
import { chooseShape } from '../../trainjob/capabilities.ts';
import { LABEL } from '../../trainjob/labels.ts';
import { toRunPhase } from '../../trainjob/status.ts';
import { withHeartbeats } from '../job-ref.ts';
import type { StepDeps } from '../step-deps.ts';

/**
 * The state machine's EvaluateModel task (docs/model-registry.md#evaluation): between
 * PublishArtifacts and NotifyServing, when the team's policy for the model names an `evaluation`,
 * it creates one job of the evaluation image per version scored (the candidate, and the alias's
 * current version when there is one) and tells the ASL which job AwaitEvaluation waits on (the
 * AwaitJob task: the token on the job, answered by the reconciler). Entered again after each wait,
 * it reads the jobs, collects the metrics of those that succeeded from their metric channel, and
 * ends `done`, `failed` or `timed-out` (deleting the jobs); NotifyServing's promotion decides over it.
 * Idempotent: job names are fixed per run and version, and a second create is the same job.
 */

export type EvaluateModelDeps = Pick<StepDeps, 'gateway' | 'store' | 'clock' | 'log'> & {
  /** The Gantry bucket: the evaluation jobs' metric channel lives under the run's prefix there. */
  bucket: string;
  /** Reads a metric object's text (the metric channel's reader). */
  objects: MetricObjectReader;
  /** The team's promotion policies (config `teams[].promotion`). */
  policies: (team: string) => readonly PromotionPolicy[];
};

export interface EvaluateInput {
  run: RunSpec;
  artifacts: PublishSummary;
  evaluation?: EvaluationState;
  /**
   * AwaitEvaluation's answer, or the error it caught: `States.Timeout` is the deadline (the wait's
   * timeout is what remained of it); any other answer only means: read the jobs again.
   */
  evaluationWait?: { Error?: string; Cause?: string } | unknown;
}

/** Evaluate states one evaluation may enter (each after a wait): a loop without progress ends. */
export const MAX_EVALUATION_ROUNDS = 200;

/** Where an evaluation job reports: beside the run's metric channel, outside its notified `metrics/` prefix. */
export function evaluationMetricsPrefix(run: RunSpec, bucket: string, version: number): string {
  const token = run.metricsUri ? metricsTokenOf(run.metricsUri, bucket, run.runId) : undefined;
  return `runs/${run.runId}/evaluation/${token ? `${token}/` : ''}v${version}/metrics/`;
}

export function makeEvaluateModel(deps: EvaluateModelDeps) {
  const { clock, store } = deps;

  /** The evaluation job of one version, built like a run's job from the policy's evaluation. */
  async function createJob(
    run: RunSpec,
    spec: EvaluationSpec,
    subject: { role: 'candidate' | 'champion'; version: number; storageUri: string },
    deadlineAt: string,
    opts?: CallOptions,
  ): Promise<JobApi> {
    const gateway = await deps.gateway(run.cluster);
    const { shape, kind } = chooseShape(run.request.target, await gateway.capabilities(opts));
    const {
      hyperparameters: _h,
      datasetUri: _d,
      modelUri: _m,
      minNodes: _n,
      command: _c,
      args: _a,
      ...request
    } = run.request;
    const jobName = evaluationJobName(run.jobName, subject.version);
    const evalSpec: RunSpec = {
      runId: `${run.runId}-ev${subject.version}`,
      cluster: run.cluster,
      jobName,
      namespace: run.namespace,
      outputUri: `s3://${deps.bucket}/${evaluationMetricsPrefix(run, deps.bucket, subject.version).replace(/metrics\/$/, 'output/')}`,
      metricsUri: `s3://${deps.bucket}/${evaluationMetricsPrefix(run, deps.bucket, subject.version)}`,
      request: {
        ...request,
        image: spec.image,
        numNodes: 1,
        runtime: spec.runtime ?? run.request.runtime,
        labels: {},
        env: {
          ...spec.env,
          GANTRY_EVALUATION: subject.role,
          GANTRY_EVALUATION_OF: run.runId,
          GANTRY_MODEL_URI: subject.storageUri,
          GANTRY_MODEL_VERSION: String(subject.version),
          GANTRY_DATASET_URI: spec.dataset,
        },
        ...(spec.queue ? { queue: spec.queue } : {}),
        ...(spec.resourcesPerNode ? { resourcesPerNode: spec.resourcesPerNode } : {}),
        ...(spec.command ? { command: spec.command } : {}),
        ...(spec.args ? { args: spec.args } : {}),
        runDeadlineSeconds: spec.deadlineSeconds,
      },
    };
    const job = buildJob(evalSpec, shape, kind);
    // Not the run's job: no run id label (the reconciler answers its token, and never writes the
    // run's record from it); the run it evaluates for instead.
    const labels = { ...job.metadata.labels };
    delete labels[LABEL.runId];
    job.metadata.labels = { ...labels, [LABEL.evaluationOf]: run.runId };
    job.metadata.annotations = { ...job.metadata.annotations, 'gantry.dev/evaluation-deadline': deadlineAt };
    await gateway.createJob(job, opts);
    return jobApi(shape, kind);
  }

  /** The newest value of each metric the job reported (the policy's `metrics` only, when named). */
  async function metricsOf(run: RunSpec, version: number, spec: EvaluationSpec, opts?: CallOptions) {
    const keys = (await store.list(evaluationMetricsPrefix(run, deps.bucket, version), opts))
      .filter((o) => o.key.endsWith('.jsonl'))
      .sort((a, b) => (a.key < b.key ? -1 : 1))
      .slice(-64);
    let history = emptyHistory(run.runId, clock.now());
    for (const { key } of keys) {
      const object = await deps.objects.read(key, opts);
      if (!object) continue;
      history = foldObject(history, { key, ...object }, clock.now())?.history ?? history;
    }
    const all = latestMetrics(history);
    if (!spec.metrics) return all;
    return Object.fromEntries(Object.entries(all).filter(([name]) => spec.metrics?.includes(name)));
  }

  /** Start: the versions to score and their jobs. A job the cluster refuses ends the evaluation `failed`. */
  async function start(
    run: RunSpec,
    artifacts: PublishSummary & { version: number },
    policy: PromotionPolicy & { evaluation: EvaluationSpec },
    opts?: CallOptions,
  ): Promise<EvaluationState> {
    const spec = policy.evaluation;
    const now = clock.now();
    const deadlineAt = new Date(now.getTime() + spec.deadlineSeconds * 1000).toISOString();
    const base: EvaluationState = {
      status: 'waiting',
      alias: policy.alias,
      image: spec.image,
      dataset: spec.dataset,
      deadlineSeconds: spec.deadlineSeconds,
      startedAt: now.toISOString(),
      deadlineAt,
      rounds: 0,
    };
    const model = artifacts.model;
    const champion = (await store.getJson<{ version: number }>(aliasKey(model, policy.alias), opts))?.value;
    const subjects = [
      { role: 'candidate' as const, version: artifacts.version },
      ...(champion && champion.version < artifacts.version
        ? [{ role: 'champion' as const, version: champion.version }]
        : []),
    ];
    const versions: EvaluatedVersion[] = [];
    let api: JobApi | undefined;
    for (const s of subjects) {
      const job = evaluationJobName(run.jobName, s.version);
      try {
        const manifest = await store.getJson<ModelManifest>(manifestKey(model, s.version), opts);
        if (!manifest) throw new NotFoundError(`version ${s.version} of ${model} has no manifest`);
        if (manifest.value.retired) throw new NotFoundError(`version ${s.version} of ${model} is retired`);
        const storageUri = manifest.value.storageUri;
        api = await createJob(run, spec, { ...s, storageUri }, deadlineAt, opts);
        versions.push({ ...s, job, state: 'running' });
      } catch (err) {
        if (!(err instanceof TerminalError)) throw err;
        await removeJobs(run, api, versions, opts);
        return {
          ...base,
          status: 'failed',
          endedAt: clock.now().toISOString(),
          versions: [...versions, { ...s, job, state: 'failed', message: err.message }],
          reason: `the evaluation job of version ${s.version} was not created: ${err.name}: ${err.message}`,
        };
      }
    }
    return { ...base, versions, job: { api } };
  }

  async function removeJobs(
    run: RunSpec,
    api: JobApi | undefined,
    versions: readonly EvaluatedVersion[],
    opts?: CallOptions,
  ): Promise<void> {
    if (!api) return;
    const gateway = await deps.gateway(run.cluster);
    for (const v of versions) {
      await gateway.deleteJob(api, run.namespace, v.job, opts).catch((err: unknown) => {
        deps.log?.({ level: 'WARN', msg: 'evaluation job not deleted', job: v.job, error: String(err) });
      });
    }
  }

  /** Read the jobs: collect what succeeded, end when all did, one failed, or the deadline passed. */
  async function progress(
    run: RunSpec,
    state: EvaluationState,
    spec: EvaluationSpec,
    waitTimedOut: boolean,
    opts?: CallOptions,
  ): Promise<EvaluationState> {
    const api = (state.job as { api?: JobApi } | undefined)?.api;
    const gateway = await deps.gateway(run.cluster);
    const versions: EvaluatedVersion[] = [];
    // A job stopped by its own active deadline (the evaluation's, set on the job) ran out of time.
    let overran = false;
    for (const v of state.versions ?? []) {
      if (v.state !== 'running' || !api) {
        versions.push(v);
        continue;
      }
      const job = await gateway.getJob(api, run.namespace, v.job, opts);
      const view = toRunPhase(job, job ? await gateway.findAdmissionGates(job, opts) : []);
      if (!job) versions.push({ ...v, state: 'failed', message: 'the evaluation job was deleted' });
      else if (view.phase === 'Succeeded') {
        versions.push({ ...v, state: 'succeeded', metrics: await metricsOf(run, v.version, spec, opts) });
      } else if (view.finished) {
        const why = [view.reason, view.message].filter(Boolean).join(': ');
        if (view.reason === 'DeadlineExceeded') overran = true;
        versions.push({ ...v, state: 'failed', message: why || 'the evaluation job failed' });
      } else versions.push(v);
    }
    const now = clock.now();
    const rounds = (state.rounds ?? 0) + 1;
    const failed = versions.find((v) => v.state === 'failed');
    const running = versions.find((v) => v.state === 'running');
    const ended = (status: EvaluationState['status'], reason?: string): EvaluationState => {
      const { job: _j, timeoutSeconds: _t, ...rest } = state;
      return { ...rest, status, versions, rounds, endedAt: now.toISOString(), ...(reason ? { reason } : {}) };
    };
    let out: EvaluationState;
    if (failed && overran) {
      out = ended('timed-out', `the job of version ${failed.version} ran past it: ${failed.message}`);
    } else if (failed) {
      out = ended('failed', `the evaluation job of version ${failed.version} failed: ${failed.message}`);
    } else if (!running) out = ended('done');
    else if (waitTimedOut || (state.deadlineAt && Date.parse(state.deadlineAt) <= now.getTime())) {
      const still = versions
        .filter((v) => v.state === 'running')
        .map((v) => `version ${v.version} (${v.job})`);
      out = ended('timed-out', `still running at ${state.deadlineAt}: ${still.join(', ')}`);
    } else if (rounds > MAX_EVALUATION_ROUNDS) {
      out = ended('failed', `no progress after ${MAX_EVALUATION_ROUNDS} waits`);
    } else {
      const timeoutSeconds = Math.max(
        2,
        Math.ceil((Date.parse(state.deadlineAt ?? now.toISOString()) - now.getTime()) / 1000),
      );
      const deadlineAt = state.deadlineAt ?? now.toISOString();
      return {
        ...state,
        versions,
        rounds,
        timeoutSeconds,
        job: withHeartbeats({
          cluster: run.cluster,
          api: api as JobApi,
          namespace: run.namespace,
          name: running.job,
          status: 'pending',
          admissionDeadlineAt: deadlineAt,
          admissionTimeoutSeconds: timeoutSeconds,
          runTimeoutSeconds: timeoutSeconds,
        }),
      };
    }
    await removeJobs(run, api, versions, opts);
    return out;
  }

  async function evaluateModel(input: EvaluateInput, opts?: CallOptions): Promise<EvaluationState> {
    const { run, artifacts } = input;
    if (!artifacts.published || artifacts.version === undefined || (run.trial && !run.trial.publish)) {
      return { status: 'none' };
    }
    const policy = evaluationPolicyOf(policiesFor(deps.policies(run.request.team), artifacts.model));
    if (!policy) return { status: 'none' };
    const prev = input.evaluation;
    // Entered again after it ended (a retried NotifyServing never comes back here; a redrive might).
    if (prev && prev.status !== 'waiting') return prev;
    const state = prev ?? (await start(run, artifacts as PublishSummary & { version: number }, policy, opts));
    if (state.status !== 'waiting') return state;
    const wait = input.evaluationWait as { Error?: unknown } | undefined;
    return progress(
      run,
      state,
      policy.evaluation,
      prev !== undefined && wait?.Error === 'States.Timeout',
      opts,
    );
  }

  return evaluateModel;
}
