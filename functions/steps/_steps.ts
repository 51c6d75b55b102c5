import { makeSteps, type StepDeps, type Steps } from '../../lib/orchestration/steps.ts';
import {
  artifactStore,
  clock,
  config,
  env,
  gateway,
  metricIngester,
  records,
  runQueue,
  servingEvents,
  store,
  sweeps,
  workflow,
} from '../_deps.ts';
import { logLine } from '../_log.ts';

/** A dependency a step function does not wire: using it is a wiring bug, named in the error. */
function unwired<T extends object>(name: string): T {
  return new Proxy({} as T, {
    get(_target, prop) {
      if (typeof prop === 'symbol' || prop === 'then') return undefined;
      throw new Error(`${name}.${prop} is not wired into this step function (functions/steps/)`);
    },
  });
}

/**
 * The state machine's use cases over only the dependencies one step function uses, wired once per
 * container on first invocation. Each step file names what its step calls, so its bundle holds no
 * other client: createJob S3 + Kubernetes, awaitJob Step Functions + Kubernetes, checkJob and
 * cleanup Kubernetes only, publishArtifacts / notifyServing / recordOutcome no Kubernetes.
 */
export function stepsWith(wire: () => Partial<StepDeps>): () => Steps {
  let built: Steps | undefined;
  return () => {
    built ??= makeSteps({
      gateway: () => Promise.reject(new Error('the Kubernetes gateway is not wired into this step function')),
      records: unwired('records'),
      workflow: unwired('workflow'),
      store: unwired('store'),
      artifacts: unwired('artifacts'),
      modelsBucket: '',
      clock,
      ...wire(),
    });
    return built;
  };
}

/** The steps that end a run: a sweep trial that ends releases the sweep's next trials now rather than at the next reconciler tick. */
export const sweepHooks = (): Pick<StepDeps, 'onTrialEnded' | 'log'> => ({
  // Look only at this trial's run, and give up after a few lost races: the reconciler advances
  // every active sweep each tick, so a contended record costs a tick, never the run.
  onTrialEnded: async (trial, runId, opts) => {
    await sweeps().advance(trial.sweepId, { queue: runQueue() }, opts, { onlyRuns: [runId], maxAttempts: 4 });
  },
  log: (line) => logLine({ service: 'gantry-steps', ...line }),
});

/** Every dependency wired (for code that runs several steps in one process). */
export const steps = /* @__PURE__ */ stepsWith(() => ({
  gateway,
  records: records(),
  workflow: workflow(),
  store: store(),
  artifacts: artifactStore(),
  modelsBucket: env().GANTRY_BUCKET,
  serving: servingEvents(),
  metrics: metricIngester(),
  kueueManagedKinds: (cluster) => config().clusters.find((c) => c.name === cluster)?.kueueManagedKinds ?? [],
  ...sweepHooks(),
}));

/** middy options shared by the step functions: abort the work 1 s before the Lambda timeout. */
export const stepOptions = { timeoutEarlyInMillis: 1000 };

/** The event a step function receives: the first argument of its use case. */
export type StepInput<K extends keyof Steps> = Parameters<Steps[K]>[0];
