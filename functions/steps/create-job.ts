import middy from '@middy/core';
import { authorizeRun } from '../../lib/intake/authorize.ts';
import { makeCreateJob } from '../../lib/orchestration/steps.ts';
import { clock, config, env, gateway, records } from '../_deps.ts';
import { lazyStep, runMetrics, type StepInput, stepHandler, stepOptions } from './_steps.ts';

/** Only what `createJob` calls (see _steps.ts). */
const createJob = lazyStep(makeCreateJob, () => ({
  gateway,
  records: records(),
  clock,
  kueueManagedKinds: (cluster) => config().clusters.find((c) => c.name === cluster)?.kueueManagedKinds ?? [],
  // Tenancy and placement again, against the configuration: a job is created only where its team may run.
  authorize: (run) => {
    authorizeRun(run, config(), env().GANTRY_BUCKET);
  },
  ...runMetrics(),
}));

/** State machine task `createJob` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = stepHandler(
  middy<StepInput<'createJob'>>(stepOptions).handler((event, _context, { signal }) =>
    createJob()(event, { signal }),
  ),
);
