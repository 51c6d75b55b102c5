import middy from '@middy/core';
import { records } from '../_deps.ts';
import { runMetrics, type StepInput, stepHandler, stepOptions, stepsWith, sweepHooks } from './_steps.ts';

/** Only what `recordOutcome` calls (see _steps.ts). */
const steps = stepsWith(() => ({ records: records(), ...sweepHooks(), ...runMetrics() }));

/** State machine task `recordOutcome` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'recordOutcome'>>(stepOptions).handler((event, _context, { signal }) =>
    steps().recordOutcome(event, { signal }),
  ),
);
