import middy from '@middy/core';
import { env, gateway, podHealth } from '../_deps.ts';
import { type StepInput, stepHandler, stepOptions, stepsWith } from './_steps.ts';

/** Only what `checkJob` calls (see _steps.ts). */
const steps = stepsWith(() => ({
  gateway,
  podHealth: podHealth(),
  admittedSuspendedGraceSeconds: env().GANTRY_ADMITTED_SUSPENDED_GRACE_SECONDS,
}));

/** State machine task `checkJob` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'checkJob'>>(stepOptions).handler((event, _context, { signal }) =>
    steps().checkJob(event, { signal }),
  ),
);
