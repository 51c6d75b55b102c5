import { DEMO_QUEUE } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { versionSet } from '../helpers/realcp-heavy.ts';
import { KUEUE_GANG_SCENARIOS, parityTable, simulatorFor } from './parity-tables.ts';

/**
 * Parity of a gang runtime under Kueue: KUEUE_GANG_SCENARIOS (parity-tables.ts), queued runs on the
 * gang runtime, against Kueue + scheduler-plugins Coscheduling with Trainer v2.3.0 (2 nodes × 4
 * GPUs, 8 GPUs of quota) and against the simulator in Kueue mode serving PodGroups, with the same
 * quota. Trainer builds the PodGroup while the TrainJob is suspended, so every run has a Workload
 * and a PodGroup: Kueue's reading decides (lib/admission/interpret.ts admissionOfGates).
 */
const set = versionSet('v2.3');
parityTable({
  name: 'kueue-coscheduling',
  label: `Kueue ${set.kueue} + scheduler-plugins Coscheduling + Trainer ${set.trainer}`,
  components: ['kube', 'kwok', 'scheduler-plugins', ...set.components],
  scenarios: KUEUE_GANG_SCENARIOS,
  real: { set: 'v2.3', nodes: 2, gpusPerNode: 4, gpuQuota: 8, coscheduling: true },
  simulator: { ...simulatorFor('v2.3'), queues: [DEMO_QUEUE], install: { coscheduling: true } },
  queues: DEMO_TEAM.queues,
});
