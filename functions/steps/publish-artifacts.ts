import middy from '@middy/core';
import { makePublishArtifacts } from '../../lib/orchestration/steps.ts';
import { artifactStore, clock, env, metricIngester, records, store } from '../_deps.ts';
import { logLine } from '../_log.ts';
import { lazyStep, type StepInput, stepHandler, stepOptions } from './_steps.ts';

/** Only what `publishArtifacts` calls (see _steps.ts). */
const publishArtifacts = lazyStep(makePublishArtifacts, () => ({
  records: records(),
  clock,
  store: store(),
  artifacts: artifactStore(),
  modelsBucket: env().GANTRY_BUCKET,
  metrics: metricIngester(),
  log: (line) => logLine({ service: 'gantry-steps', ...line }),
}));

/** State machine task `publishArtifacts` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'publishArtifacts'>>(stepOptions).handler((event, _context, { signal }) =>
    publishArtifacts()(event, { signal }),
  ),
);
