import middy from '@middy/core';
import { makeS3TextReader } from '../../lib/adapters/aws/s3-store.ts';
import { type EvaluateInput, makeEvaluateModel } from '../../lib/orchestration/steps/evaluate.ts';
import { clock, config, env, gateway, s3, store } from '../_deps.ts';
import { logLine } from '../_log.ts';
import { lazyStep, stepHandler, stepOptions } from './_steps.ts';

/** Only what `evaluateModel` calls (see _steps.ts): Kubernetes (its jobs) and S3 (manifests, aliases, its metrics). */
const evaluateModel = lazyStep(makeEvaluateModel, () => ({
  gateway,
  clock,
  store: store(),
  bucket: env().GANTRY_BUCKET,
  objects: makeS3TextReader({ s3: s3(), bucket: env().GANTRY_BUCKET }),
  policies: (team) => config().teams.find((t) => t.name === team)?.promotion ?? [],
  log: (line) => logLine({ service: 'gantry-steps', ...line }),
}));

/** State machine task `evaluateModel` (lib/orchestration/steps/evaluate.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<EvaluateInput>(stepOptions).handler((event, _context, { signal }) =>
    evaluateModel()(event, { signal }),
  ),
);
