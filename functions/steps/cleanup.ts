import middy from '@middy/core';
import { gateway } from '../_deps.ts';
import { type StepInput, stepHandler, stepOptions, stepsWith } from './_steps.ts';

/** Only what `cleanup` calls (see _steps.ts). */
const steps = stepsWith(() => ({ gateway }));

/** State machine task `cleanup` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'cleanup'>>(stepOptions).handler((event, _context, { signal }) =>
    steps().cleanup(event, { signal }),
  ),
);
