import middy from '@middy/core';
import { type StepInput, stepOptions, steps } from './_steps.ts';

/** State machine task `publishArtifacts` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = middy<StepInput<'publishArtifacts'>>(stepOptions).handler(
  (event, _context, { signal }) => steps().publishArtifacts(event, { signal }),
);
