import middy from '@middy/core';
import { type StepInput, stepOptions, steps } from './_steps.ts';

/** State machine task `recordOutcome` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = middy<StepInput<'recordOutcome'>>(stepOptions).handler((event, _context, { signal }) =>
  steps().recordOutcome(event, { signal }),
);
