import middy from '@middy/core';
import { config, gateway, records } from '../_deps.ts';
import { type StepInput, stepOptions, stepsWith } from './_steps.ts';

/** Only what `createJob` calls (see _steps.ts). */
const steps = stepsWith(() => ({
  gateway,
  records: records(),
  kueueManagedKinds: (cluster) => config().clusters.find((c) => c.name === cluster)?.kueueManagedKinds ?? [],
}));

/** State machine task `createJob` (lib/orchestration/steps.ts). Errors keep their names for the ASL's Retry/Catch. */
export const handler = middy<StepInput<'createJob'>>(stepOptions).handler((event, _context, { signal }) =>
  steps().createJob(event, { signal }),
);
