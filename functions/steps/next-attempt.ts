import middy from '@middy/core';
import { gateway, records } from '../_deps.ts';
import { type StepInput, stepHandler, stepOptions, stepsWith, sweepHooks } from './_steps.ts';

/** Only what `nextAttempt` calls (see _steps.ts): the run record and the failed attempt's cluster. */
const steps = stepsWith(() => ({ gateway, records: records(), log: sweepHooks().log }));

/** State machine task `nextAttempt` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'nextAttempt'>>(stepOptions).handler((event, _context, { signal }) =>
    steps().nextAttempt(event, { signal }),
  ),
);
