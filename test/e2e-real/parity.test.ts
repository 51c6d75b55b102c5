import { DEMO_QUEUE } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { activeVersionSets, versionSet } from '../helpers/realcp-heavy.ts';
import { PRIORITIES, parityTable, SCENARIOS, simulatorFor } from './parity-tables.ts';

/**
 * Parity on every version set of this run (all of v2.1, v2.2, v2.3 unless GANTRY_VERSION_SETS names fewer): the scenario table of
 * parity-tables.ts against the real controllers and against the simulator set up as that set.
 * The coscheduling table runs in parity-coscheduling.test.ts, a process of its own.
 */
for (const name of activeVersionSets()) {
  const set = versionSet(name);
  parityTable({
    name,
    label: `Trainer ${set.trainer} + Kueue ${set.kueue}`,
    components: ['kube', 'kwok', ...set.components],
    scenarios: SCENARIOS,
    real: { set: name, nodes: 2, gpusPerNode: 8, gpuQuota: 8, workloadPriorityClasses: PRIORITIES },
    simulator: {
      ...simulatorFor(name),
      queues: [{ ...DEMO_QUEUE, preemption: 'LowerPriority' }],
      priorityClasses: PRIORITIES,
    },
    queues: DEMO_TEAM.queues,
  });
}
