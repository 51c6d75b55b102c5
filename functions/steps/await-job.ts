import middy from '@middy/core';
import { makeAwaitJob } from '../../lib/orchestration/steps.ts';
import { clock, env, gateway, podHealth, workflow } from '../_deps.ts';
import { lazyStep, type StepInput, stepHandler, stepOptions } from './_steps.ts';

/** Only what `awaitJob` calls (see _steps.ts). */
const awaitJob = lazyStep(makeAwaitJob, () => ({
  gateway,
  clock,
  workflow: workflow(),
  podHealth: podHealth(),
  admittedSuspendedGraceSeconds: env().GANTRY_ADMITTED_SUSPENDED_GRACE_SECONDS,
}));

/** State machine task `awaitJob` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'awaitJob'>>(stepOptions).handler((event, _context, { signal }) =>
    awaitJob()(event, { signal }),
  ),
);
