import middy from '@middy/core';
import { makeCheckJob } from '../../lib/orchestration/steps.ts';
import { clock, env, gateway, podHealth } from '../_deps.ts';
import { lazyStep, type StepInput, stepHandler, stepOptions } from './_steps.ts';

/** Only what `checkJob` calls (see _steps.ts). */
const checkJob = lazyStep(makeCheckJob, () => ({
  gateway,
  clock,
  podHealth: podHealth(),
  admittedSuspendedGraceSeconds: env().GANTRY_ADMITTED_SUSPENDED_GRACE_SECONDS,
}));

/** State machine task `checkJob` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'checkJob'>>(stepOptions).handler((event, _context, { signal }) =>
    checkJob()(event, { signal }),
  ),
);
