import middy from '@middy/core';
import { type StepInput, stepOptions, steps } from './_steps.ts';

/** State machine task `cleanup` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = middy<StepInput<'cleanup'>>(stepOptions).handler((event, _context, { signal }) =>
  steps().cleanup(event, { signal }),
);
