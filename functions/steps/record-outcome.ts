import middy from '@middy/core';
import { makeRecordOutcome } from '../../lib/orchestration/steps.ts';
import { records } from '../_deps.ts';
import { lazyStep, runMetrics, type StepInput, stepHandler, stepOptions, sweepHooks } from './_steps.ts';

/** Only what `recordOutcome` calls (see _steps.ts). */
const recordOutcome = lazyStep(makeRecordOutcome, () => ({
  records: records(),
  ...sweepHooks(),
  ...runMetrics(),
}));

/** State machine task `recordOutcome` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'recordOutcome'>>(stepOptions).handler((event, _context, { signal }) =>
    recordOutcome()(event, { signal }),
  ),
);
