import { lazily } from '../../lib/lazily.ts';
import { runEndMetrics, runStartMetrics } from '../../lib/observability/metrics.ts';
import { makeSteps, type StepDeps, type Steps } from '../../lib/orchestration/steps.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import {
  artifactStore,
  clock,
  config,
  env,
  gateway,
  metricIngester,
  promoter,
  records,
  retention,
  runQueue,
  servingEvents,
  store,
  sweeps,
  workflow,
} from '../_deps.ts';
import { logLine, withLogKeys } from '../_log.ts';
import { emitMetrics } from '../_metrics.ts';

/**
 * One of the state machine's use cases over exactly the dependencies its factory declares
 * (lib/orchestration/steps.ts, e.g. `makeCreateJob(deps: CreateJobDeps)`), wired once per container
 * on first invocation: `wire` runs then, so clients are built on first use, not when the bundle
 * loads. A dependency the step uses and `wire` leaves out fails to compile. Each step file names
 * what its step calls, so its bundle holds no other client: createJob S3 + Kubernetes, awaitJob
 * Step Functions + Kubernetes, checkJob and cleanup Kubernetes only, publishArtifacts /
 * notifyServing / recordOutcome no Kubernetes.
 */
export function lazyStep<D, F>(make: (deps: D) => F, wire: () => NoInfer<D>): () => F {
  return lazily(() => make(wire()));
}

/** The steps that end a run: a sweep trial that ends releases the sweep's next trials now rather than at the next reconciler tick. */
export const sweepHooks = (): Required<Pick<StepDeps, 'onTrialEnded' | 'log'>> => ({
  // Look only at this trial's run, and give up after a few lost races: the reconciler advances
  // every active sweep each tick, so a contended record costs a tick, never the run.
  onTrialEnded: async (trial, runId, opts, ended) => {
    await sweeps().advance(trial.sweepId, { queue: runQueue() }, opts, {
      onlyRuns: [runId],
      maxAttempts: 4,
      ...(ended ? { runs: [ended] } : {}),
    });
  },
  log: (line) => logLine({ service: 'gantry-steps', ...line }),
});

/** Run metrics (lib/observability/metrics.ts): started when CreateJob created the job, the outcome and its waits at RecordOutcome. */
export const runMetrics = (): Pick<StepDeps, 'runs'> => ({
  runs: {
    started: (record) => emitMetrics('gantry-steps', runStartMetrics(record)),
    ended: (record) => emitMetrics('gantry-steps', runEndMetrics(record)),
  },
});

/**
 * A step handler whose log lines carry the run id, sweep id and team of the run it works on (a
 * step's input holds the run at `run`, or at `state.run` for RecordOutcome's Failed branch).
 */
export function stepHandler<E, C extends { awsRequestId?: string }, R>(
  handler: (event: E, context: C) => Promise<R>,
): (event: E, context: C) => Promise<R> {
  return withLogKeys((event: E) => {
    const e = event as { run?: RunSpec; state?: { run?: RunSpec } };
    const run = e.run ?? e.state?.run;
    return { runId: run?.runId, sweepId: run?.trial?.sweepId, team: run?.request?.team };
  }, handler);
}

/** Every dependency wired (for code that runs several steps in one process). */
export const steps = /* @__PURE__ */ lazyStep(makeSteps, () => ({
  ...servingOf(),
  gateway,
  clock,
  records: records(),
  workflow: workflow(),
  store: store(),
  artifacts: artifactStore(),
  modelsBucket: env().GANTRY_BUCKET,
  promoter: promoter(),
  retention: retention(),
  metrics: metricIngester(),
  kueueManagedKinds: (cluster) => config().clusters.find((c) => c.name === cluster)?.kueueManagedKinds ?? [],
  ...sweepHooks(),
  ...runMetrics(),
}));

/** The serving hand-off channel when one is configured (GANTRY_SERVING_QUEUE_URL), else nothing. */
export function servingOf(): Pick<StepDeps, 'serving'> {
  const serving = servingEvents();
  return serving ? { serving } : {};
}

/** middy options shared by the step functions: abort the work 1 s before the Lambda timeout. */
export const stepOptions = { timeoutEarlyInMillis: 1000 };

/** The event a step function receives: the first argument of its use case. */
export type StepInput<K extends keyof Steps> = Parameters<Steps[K]>[0];
