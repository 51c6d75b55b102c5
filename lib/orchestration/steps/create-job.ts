import { RunEndedError, RuntimeNotFoundError, UnsupportedApiError } from '../../errors.ts';
import type { CallOptions } from '../../ports.ts';
import { admissionPlan, attemptJobName, type Shape, stepAdmissionDeadline } from '../../run/attempts.ts';
import { isTerminal } from '../../run/phases.ts';
import type { RunSpec } from '../../run/spec.ts';
import { buildJob, jobApi } from '../../trainjob/build.ts';
import { chooseShape } from '../../trainjob/capabilities.ts';
import { type GangGate, runtimeGangGate } from '../../trainjob/gang.ts';
import { type InitializerJobs, initializerJobs } from '../../trainjob/initializers.ts';
import { KUEUE_DEFAULT_MANAGED_KINDS, requireQueueable } from '../../trainjob/kueue-kinds.ts';
import { ANNOTATION } from '../../trainjob/labels.ts';
import { runtimeReplicatedJobs, runtimeShapeProblem } from '../../trainjob/runtime-jobs.ts';
import { type JobRef, secondsUntil, withHeartbeats } from '../job-ref.ts';
import type { CreateJobDeps, RunInput } from '../step-deps.ts';

/**
 * The state machine's CreateJob task: the attempt's shape (the request's, or a step of its elastic
 * fallback), the job built for what the cluster serves, created with its deadlines, and the run
 * record Pending with the attempt.
 */

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
    let podJobs: string[] | undefined;
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
      // Checked before the create: Trainer's webhook would refuse the patch of a missing `node` job.
      const problem = runtimeShapeProblem(runtime);
      if (problem) throw new UnsupportedApiError(`${problem} (cluster ${run.cluster})`);
      initializers = initializerJobs(runtime, shape);
      gang = runtimeGangGate(runtime);
      podJobs = runtimeReplicatedJobs(runtime);
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
    const job = buildJob({ ...run, jobName }, shape, kind, initializers, podJobs);
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
    return withHeartbeats({
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
    });
  }

  return createJob;
}
