import middy from '@middy/core';
import { env, gateway, podHealth, workflow } from '../_deps.ts';
import { type StepInput, stepHandler, stepOptions, stepsWith } from './_steps.ts';

/** Only what `awaitJob` calls (see _steps.ts). */
const steps = stepsWith(() => ({
  gateway,
  workflow: workflow(),
  podHealth: podHealth(),
  admittedSuspendedGraceSeconds: env().GANTRY_ADMITTED_SUSPENDED_GRACE_SECONDS,
}));

/** State machine task `awaitJob` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'awaitJob'>>(stepOptions).handler((event, _context, { signal }) =>
    steps().awaitJob(event, { signal }),
  ),
);
