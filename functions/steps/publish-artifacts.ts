import middy from '@middy/core';
import { artifactStore, env, metricIngester, records, store } from '../_deps.ts';
import { logLine } from '../_log.ts';
import { type StepInput, stepHandler, stepOptions, stepsWith } from './_steps.ts';

/** Only what `publishArtifacts` calls (see _steps.ts). */
const steps = stepsWith(() => ({
  records: records(),
  store: store(),
  artifacts: artifactStore(),
  modelsBucket: env().GANTRY_BUCKET,
  metrics: metricIngester(),
  log: (line) => logLine({ service: 'gantry-steps', ...line }),
}));

/** State machine task `publishArtifacts` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'publishArtifacts'>>(stepOptions).handler((event, _context, { signal }) =>
    steps().publishArtifacts(event, { signal }),
  ),
);
