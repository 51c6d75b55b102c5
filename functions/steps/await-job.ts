import middy from '@middy/core';
import { type StepInput, stepOptions, steps } from './_steps.ts';

/** State machine task `awaitJob` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = middy<StepInput<'awaitJob'>>(stepOptions).handler((event, _context, { signal }) =>
  steps().awaitJob(event, { signal }),
);
