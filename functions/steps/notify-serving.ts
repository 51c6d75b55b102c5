import middy from '@middy/core';
import { makeNotifyServing } from '../../lib/orchestration/steps.ts';
import { artifactStore, clock, env, promoter, records, retention, store } from '../_deps.ts';
import { logLine } from '../_log.ts';
import { lazyStep, type StepInput, servingOf, stepHandler, stepOptions } from './_steps.ts';

/** Only what `notifyServing` calls (see _steps.ts). */
const notifyServing = lazyStep(makeNotifyServing, () => ({
  records: records(),
  clock,
  store: store(),
  artifacts: artifactStore(),
  modelsBucket: env().GANTRY_BUCKET,
  promoter: promoter(),
  retention: retention(),
  log: (line) => logLine({ service: 'gantry-steps', ...line }),
  ...servingOf(),
}));

/** State machine task `notifyServing` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'notifyServing'>>(stepOptions).handler((event, _context, { signal }) =>
    notifyServing()(event, { signal }),
  ),
);
