import middy from '@middy/core';
import { makeCleanup } from '../../lib/orchestration/steps.ts';
import { gateway, logArchiver } from '../_deps.ts';
import { lazyStep, type StepInput, stepHandler, stepOptions } from './_steps.ts';

/** Only what `cleanup` calls (see _steps.ts). */
const cleanup = lazyStep(makeCleanup, () => ({ gateway, archiveLogs: logArchiver() }));

/** State machine task `cleanup` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'cleanup'>>(stepOptions).handler((event, _context, { signal }) =>
    cleanup()(event, { signal }),
  ),
);
