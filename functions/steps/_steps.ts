import { makeSteps, type Steps } from '../../lib/orchestration/steps.ts';
import { artifactStore, clock, env, gateway, records, servingEvents, store, workflow } from '../_deps.ts';

let built: Steps | undefined;

/** The state machine's use cases, wired once per container on first invocation. */
export function steps(): Steps {
  built ??= makeSteps({
    gateway,
    records: records(),
    workflow: workflow(),
    store: store(),
    clock,
    artifacts: artifactStore(),
    modelsBucket: env().GANTRY_BUCKET,
    serving: servingEvents(),
  });
  return built;
}

/** middy options shared by the step functions: abort the work 1 s before the Lambda timeout. */
export const stepOptions = { timeoutEarlyInMillis: 1000 };

/** The event a step function receives: the first argument of its use case. */
export type StepInput<K extends keyof Steps> = Parameters<Steps[K]>[0];
