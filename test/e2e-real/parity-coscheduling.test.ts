import { versionSet } from '../helpers/realcp-heavy.ts';
import { GANG_SCENARIOS, parityTable, simulatorFor } from './parity-tables.ts';

/**
 * Parity of gang scheduling: GANG_SCENARIOS (parity-tables.ts), unqueued runs on the gang runtime,
 * against scheduler-plugins Coscheduling with Trainer v2.3.0 (2 nodes × 4 GPUs) and against the
 * simulator's `gang: 'coscheduling'` with the same 8 GPUs.
 *
 * "gang cannot fit" was left out for a while: on the simulator its run sometimes went Running and
 * never reached the admission timeout. The simulator was right to show it — Gantry read a TrainJob
 * whose PodGroup Trainer had not created yet as admitted (test/e2e/gang-admission.test.ts); CreateJob
 * now marks the job with the gate its runtime names (lib/trainjob/gang.ts).
 */
const set = versionSet('v2.3');
parityTable({
  name: 'coscheduling',
  label: `scheduler-plugins Coscheduling + Trainer ${set.trainer}`,
  components: ['kube', 'kwok', 'scheduler-plugins', ...set.components],
  scenarios: GANG_SCENARIOS,
  // 2 nodes × 4 GPUs: the simulator's coscheduling capacity is the same 8 GPUs.
  real: { set: 'v2.3', nodes: 2, gpusPerNode: 4, coscheduling: true },
  simulator: { ...simulatorFor('v2.3'), gang: 'coscheduling', capacity: { 'nvidia.com/gpu': 8 } },
  queues: [],
});
