import { StopExecutionCommand } from '@aws-sdk/client-sfn';
import { describe, expect, it } from 'vitest';
import { makeKubernetesGateway } from '../../lib/adapters/kubernetes/gateway.ts';
import { kubeConfigFromYaml } from '../../lib/adapters/kubernetes/kubeconfig.ts';
import type { ClusterGateway } from '../../lib/ports.ts';
import { makeGetQueuePosition } from '../../lib/queue/queue-position.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import { DEMO_TEAM, type Stack } from '../../local/stack.ts';
import { tableOfStack } from '../../local/state-table.ts';
import {
  type ConditionedObject,
  type RunDriver,
  TRAINJOBS,
  useRealStack,
  versionSetSuites,
  WORKLOADS,
} from '../helpers/real-stack.ts';
import { type HeavyControlPlane, KWOK_ENV } from '../helpers/realcp-heavy.ts';

/**
 * A pending run's queue position against REAL Kueue (the heavy tier's controllers). This tier runs
 * Kueue with VisibilityOnDemand off (its visibility server would need serving certificates and an
 * APIService the kube-apiserver reaches through a Service, which this node-less control plane has
 * no network path for): the real gateway finds the visibility API not served, and the answer is
 * Gantry's view — which must name the order in which real Kueue then admits the waiting runs.
 */

for (const { setName, label, available } of versionSetSuites('e2e-real')) {
  describe.runIf(available)(`queue position on real Kueue: ${label}`, () => {
    let hc: HeavyControlPlane, stack: Stack, driver: RunDriver, ns: string;
    useRealStack(
      {
        log: `e2e-real queue ${setName}`,
        controlPlane: { set: setName, nodes: 2, gpusPerNode: 8, gpuQuota: 8 },
        namespaces: ['demo'],
        stack: (nss) => ({ speed: 60, teams: [{ ...DEMO_TEAM, namespaces: nss }] }),
      },
      (real) => {
        ({ hc, stack, driver } = real);
        ns = real.namespaces[0] as string;
      },
    );

    type Obj = ConditionedObject;
    async function workload(run: RunSpec): Promise<Obj | undefined> {
      const j = await hc.request<Obj>(
        'GET',
        `${TRAINJOBS}/namespaces/${run.namespace}/trainjobs/${run.jobName}`,
      );
      if (j.status !== 200) return undefined;
      const r = await hc.request<{ items: Obj[] }>(
        'GET',
        `${WORKLOADS}/namespaces/${run.namespace}/workloads?labelSelector=kueue.x-k8s.io/job-uid=${j.body.metadata.uid}`,
      );
      return r.body.items?.[0];
    }
    const admitted = async (run: RunSpec) =>
      (await workload(run))?.status?.conditions?.find((c) => c.type === 'Admitted')?.status === 'True';

    it("the visibility API is not served: Gantry's view, in the order real Kueue admits", async () => {
      const gateway: ClusterGateway = makeKubernetesGateway({
        kubeConfig: await kubeConfigFromYaml(hc.kubeconfigYaml()),
      });
      const table = tableOfStack(stack);
      const getPosition = makeGetQueuePosition({
        records: makeRunRecords({ table, clock: { now: () => new Date() } }),
        config: stack.config,
        table,
        gateway: async () => gateway,
        clock: { now: () => new Date() },
      });
      const caller = { iamArn: DEMO_TEAM.principals[0] as string, groups: [] };
      // Prepare: one 8-GPU run holds the ClusterQueue's 8 GPUs; three more wait, created in order.
      const spec = (duration: string) =>
        driver.spec(
          { queue: 'demo-queue', resourcesPerNode: { gpu: 8 }, env: { [KWOK_ENV.runDuration]: duration } },
          ns,
        );
      const holder = spec('600s');
      const holderArn = await driver.start(holder);
      await driver.waitFor(
        'the holder admitted',
        async () => ((await admitted(holder)) ? true : undefined),
        60_000,
      );
      await driver.waitFor(
        'the holder Running',
        async () => ((await driver.record(holder.runId)).phase === 'Running' ? true : undefined),
        60_000,
      );
      const waiting = [spec('600s'), spec('600s'), spec('600s')];
      const arns: string[] = [];
      for (const run of waiting) {
        arns.push(await driver.start(run));
        // Each one's Workload exists (Kueue queued it) before the next is created.
        await driver.waitFor(
          `${run.runId} queued by Kueue`,
          async () => ((await workload(run)) ? true : undefined),
          60_000,
        );
        await driver.waitFor(`${run.runId} Pending`, async () =>
          (await driver.record(run.runId)).phase === 'Pending' ? true : undefined,
        );
        // Kueue orders by the Workload's creationTimestamp, which has whole seconds: runs created within
        // one second tie there, and Kueue may take them in another order than Gantry's (milliseconds).
        await new Promise((r) => setTimeout(r, 1100));
      }

      // Act + Assess: the real apiserver does not serve Kueue's visibility API here.
      const visibility = await gateway.pendingWorkloads?.(ns, 'demo-queue');
      expect(visibility).toMatchObject({ served: false });
      expect(visibility?.served ? '' : visibility?.reason).toMatch(
        /does not serve Kueue's visibility API \(v1beta2: not served; v1beta1: not served\)/,
      );
      const views = await Promise.all(waiting.map((r) => getPosition({ caller, runId: r.runId })));
      expect(views.map((v) => [v.source, v.position])).toEqual([
        ['gantry', 1],
        ['gantry', 2],
        ['gantry', 3],
      ]);
      expect(views[2]?.aheadRuns).toEqual([waiting[0]?.runId, waiting[1]?.runId]);
      for (const r of waiting) expect(await admitted(r)).toBe(false);

      // Real Kueue admits the one Gantry put first when the quota frees: stop the holder.
      await driver.sfn.send(new StopExecutionCommand({ executionArn: holderArn, cause: 'free the quota' }));
      const next = await driver.waitFor(
        'Kueue to admit the next',
        async () => {
          for (const r of waiting) if (await admitted(r)) return r.runId;
          return undefined;
        },
        120_000,
      );
      expect(next).toBe(waiting[0]?.runId);
      expect(await admitted(waiting[1] as RunSpec)).toBe(false);
      // The runs still waiting moved up in Gantry's view, as in Kueue's.
      await driver.waitFor(
        'the first to leave Pending',
        async () =>
          (await driver.record(waiting[0]?.runId as string)).phase !== 'Pending' ? true : undefined,
        60_000,
      );
      const after = await getPosition({ caller, runId: waiting[2]?.runId as string });
      expect([after.source, after.position]).toEqual(['gantry', 2]);
      for (const arn of arns)
        await driver.sfn.send(new StopExecutionCommand({ executionArn: arn, cause: 'done' }));
    }, 400_000);
  });
}
