import middy from '@middy/core';
import { artifactStore, env, records, store } from '../_deps.ts';
import { type StepInput, servingOf, stepHandler, stepOptions, stepsWith } from './_steps.ts';

/** Only what `notifyServing` calls (see _steps.ts). */
const steps = stepsWith(() => ({
  records: records(),
  store: store(),
  artifacts: artifactStore(),
  modelsBucket: env().GANTRY_BUCKET,
  ...servingOf(),
}));

/** State machine task `notifyServing` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'notifyServing'>>(stepOptions).handler((event, _context, { signal }) =>
    steps().notifyServing(event, { signal }),
  ),
);
