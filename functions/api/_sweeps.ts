import {
  makeCancelSweep,
  makeGetSweep,
  makeListSweeps,
  type SweepIntakeDeps,
} from '../../lib/intake/sweeps.ts';
import { makeRunStopper } from '../../lib/sweep/stop.ts';
import {
  clock,
  config,
  deleteJob,
  env,
  logArchiver,
  records,
  runQueue,
  sweeps,
  table,
  workflow,
} from '../_deps.ts';
import { runEnded } from './_intake.ts';

/**
 * The sweep use cases, wired on use. Get reads; cancel may also stop trials (Step Functions, and
 * the Kubernetes client only for trials that have a job). Submit (submit-sweep.ts) wires itself
 * from `sweepDeps`, so get and cancel do not bundle the sweep request schema.
 */
export function sweepDeps(): Omit<SweepIntakeDeps, 'caps'> {
  let settings: { config: SweepIntakeDeps['config']; bucket: string };
  try {
    settings = { config: config(), bucket: env().GANTRY_BUCKET };
  } catch (err) {
    throw new Error('Gantry is misconfigured (environment or GANTRY_CONFIG)', { cause: err });
  }
  return { ...settings, sweeps: sweeps(), clock };
}

export const getSweep = () => makeGetSweep({ ...sweepDeps(), caps: {} });
export const listSweeps = () => makeListSweeps({ ...sweepDeps(), table: table() });
export const cancelSweep = () =>
  makeCancelSweep({
    ...sweepDeps(),
    caps: {
      queue: runQueue(),
      stopRun: makeRunStopper({
        workflow: workflow(),
        records: records(),
        clock,
        deleteJob,
        archiveLogs: logArchiver(),
        onEnded: runEnded,
      }),
    },
  });
