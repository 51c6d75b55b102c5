import middy from '@middy/core';
import { makeNextAttempt } from '../../lib/orchestration/steps.ts';
import { clock, gateway, logArchiver, records } from '../_deps.ts';
import { lazyStep, type StepInput, stepHandler, stepOptions, sweepHooks } from './_steps.ts';

/** Only what `nextAttempt` calls (see _steps.ts): the run record and the failed attempt's cluster. */
const nextAttempt = lazyStep(makeNextAttempt, () => ({
  gateway,
  records: records(),
  clock,
  log: sweepHooks().log,
  archiveLogs: logArchiver(),
}));

/** State machine task `nextAttempt` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'nextAttempt'>>(stepOptions).handler((event, _context, { signal }) =>
    nextAttempt()(event, { signal }),
  ),
);
