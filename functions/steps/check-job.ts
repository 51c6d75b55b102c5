import middy from '@middy/core';
import { type StepInput, stepOptions, steps } from './_steps.ts';

/** State machine task `checkJob` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = middy<StepInput<'checkJob'>>(stepOptions).handler((event, _context, { signal }) =>
  steps().checkJob(event, { signal }),
);
