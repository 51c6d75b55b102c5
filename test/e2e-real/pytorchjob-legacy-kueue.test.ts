import { describe, expect, it } from 'vitest';
import { DEMO_TEAM, type Stack } from '../../local/stack.ts';
import { type ConditionedObject, type RunDriver, useRealStack, WORKLOADS } from '../helpers/real-stack.ts';
import {
  activeVersionSets,
  type HeavyControlPlane,
  heavyMissing,
  KWOK_ENV,
  NEWEST_SET,
  versionSet,
} from '../helpers/realcp-heavy.ts';
import { SUCCEEDED_PHASES } from '../helpers/runs.ts';
import { tierAvailable } from '../helpers/tiers.ts';

const SPEED = 60;

type Obj = ConditionedObject;

/**
 * Gantry's state machine against the REAL Kubeflow Training Operator v1 (PyTorchJob) under the
 * Kueue of the run's older version set — a file of its own so CI can run it once that set's
 * controllers are built (.ci/run phase C2). The newest set's Kueue (default configuration without
 * the kubeflow.org v1 integrations) is in pytorchjob.test.ts.
 *
 * The Kueue of the run's older version set (v0.16.6 of v2.1 or v0.17.1 of v2.2: CI rotates them) with
 * ITS default configuration, which still enables the kubeflow.org v1 integrations (v0.16–v0.18 did):
 * listed in `kueueManagedKinds`, a queued PyTorchJob gets a Workload, is admitted against the
 * ClusterQueue's GPU quota, unsuspended and run by the operator. Not run when the run's sets are only
 * the newest (GANTRY_VERSION_SETS=v2.3), whose Kueue does not manage PyTorchJob by default.
 */
const legacySetName = activeVersionSets().find((s) => s !== NEWEST_SET);
const legacySet = versionSet(legacySetName ?? 'v2.2');
const legacyAvailable =
  legacySetName !== undefined &&
  tierAvailable(
    `e2e-real (Training Operator v1 PyTorchJob under Kueue ${legacySet.kueue})`,
    heavyMissing(['kube', 'kwok', ...legacySet.components, 'training-operator']),
  );

describe.runIf(legacyAvailable)(
  `real Training Operator v1: queued PyTorchJob under Kueue ${legacySet.kueue}`,
  () => {
    let hc: HeavyControlPlane, stack: Stack, driver: RunDriver, ns: string;
    useRealStack(
      {
        log: `e2e-real pytorchjob ${legacySet.name}`,
        controlPlane: {
          set: legacySet.name,
          nodes: 2,
          gpusPerNode: 8,
          trainingOperator: true,
          kueueFrameworks: 'default',
        },
        namespaces: ['pt'],
        stack: (nss) => ({
          cluster: { legacyKinds: ['PyTorchJob'], kueueManagedKinds: ['TrainJob', 'PyTorchJob'] },
          speed: SPEED,
          teams: [{ ...DEMO_TEAM, namespaces: nss }],
        }),
      },
      (real) => {
        ({ hc, stack, driver } = real);
        ns = real.namespaces[0] as string;
      },
    );

    it('the default configuration of this Kueue enables kubeflow.org/pytorchjob', () => {
      expect(hc.kueueFrameworks).toContain('kubeflow.org/pytorchjob');
    });

    it('a queued PyTorchJob gets a Workload, is admitted, runs and ends Succeeded', async () => {
      const run = driver.spec(
        {
          target: 'PyTorchJob',
          numNodes: 2,
          resourcesPerNode: { gpu: 2 },
          queue: 'demo-queue',
          env: { [KWOK_ENV.runDuration]: '8s' },
        },
        ns,
      );
      const arn = await driver.start(run);
      const wl = await driver.waitFor(
        'Kueue to admit the PyTorchJob',
        async () => {
          const r = await hc.request<{ items: Obj[] }>('GET', `${WORKLOADS}/namespaces/${ns}/workloads`);
          return r.body.items.find((w) =>
            w.status?.conditions?.some((c) => c.type === 'Admitted' && c.status === 'True'),
          );
        },
        60_000,
      );
      expect(wl.metadata.ownerReferences?.[0]).toMatchObject({ kind: 'PyTorchJob', name: run.jobName });
      await driver.waitFor(
        `run ${run.runId} Running`,
        async () => ((await driver.record(run.runId)).phase === 'Running' ? true : undefined),
        60_000,
      );
      await driver.writeOutput(stack.s3, run);
      const ended = await driver.finished(arn, 90_000);
      expect(ended.status).toBe('SUCCEEDED');
      const record = await driver.record(run.runId);
      expect(record.transitions.map((t) => t.phase)).toEqual(SUCCEEDED_PHASES);
    });

    it('no controller crashed', () => {
      expect(hc.exited()).toEqual([]);
    });
  },
);
