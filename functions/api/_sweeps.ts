import {
  makeCancelSweep,
  makeGetSweep,
  makeSubmitSweep,
  type SweepIntakeDeps,
} from '../../lib/intake/sweeps.ts';
import { makeRunStopper } from '../../lib/sweep/stop.ts';
import { clock, config, env, records, runQueue, sweeps, workflow } from '../_deps.ts';
import { deleteJob } from './_intake.ts';

/**
 * The sweep use cases, wired once per container on first use. Submit may release trials (SQS);
 * cancel may also stop them (Step Functions, and the Kubernetes client only for trials that
 * have a job); get reads.
 */
function base(): Omit<SweepIntakeDeps, 'caps'> {
  let settings: { config: SweepIntakeDeps['config']; bucket: string };
  try {
    settings = { config: config(), bucket: env().GANTRY_BUCKET };
  } catch (err) {
    throw new Error('Gantry is misconfigured (environment or GANTRY_CONFIG)', { cause: err });
  }
  return { ...settings, sweeps: sweeps(), clock };
}

export const submitSweep = () => makeSubmitSweep({ ...base(), caps: { queue: runQueue() } });
export const getSweep = () => makeGetSweep({ ...base(), caps: {} });
export const cancelSweep = () =>
  makeCancelSweep({
    ...base(),
    caps: {
      queue: runQueue(),
      stopRun: makeRunStopper({ workflow: workflow(), records: records(), clock, deleteJob }),
    },
  });
