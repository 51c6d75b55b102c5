import { describe, expect, it } from 'vitest';
import { DEMO_TEAM, type Stack } from '../../local/stack.ts';
import { type RunDriver, TRAINJOBS, useRealStack, versionSetSuite } from '../helpers/real-stack.ts';
import { GANG_RUNTIME, type HeavyControlPlane, KWOK_ENV } from '../helpers/realcp-heavy.ts';
import { SUCCEEDED_PHASES } from '../helpers/runs.ts';

/**
 * Gang scheduling through the scheduler-plugins Coscheduling plugin, on the real controllers
 * (issue 16): scheduler-plugins v0.35.4-devel (its go.mod pins k8s.io/kubernetes v1.35.4, the
 * control plane's version) built from the Go module proxy — its kube-scheduler, configured as its
 * manifests/coscheduling/scheduler-config.yaml ships (Coscheduling in the default profile), and its
 * PodGroup controller — with Trainer v2.3.0 + JobSet v0.12.0 (Kueue runs too, but these runs are not
 * queued). The runtime `torch-distributed-gang` is the upstream torch-distributed with
 * `podGroupPolicy.coscheduling`, so Trainer's CoScheduling plugin makes a PodGroup named like the
 * TrainJob (minMember = the pods, minResources = their requests) and labels the pods with it.
 *
 *   - a gang that fits: the PodGroup goes Pending → Running, Gantry reads it as the gate and the
 *     run goes Pending → Running → Succeeded;
 *   - a gang that cannot fit (12 GPUs on a cluster of 8): Coscheduling rejects its pods
 *     (`PodScheduled=False Unschedulable`), the PodGroup goes Pending → Scheduling (the PodGroup
 *     controller's Scheduling means "minMember pods exist", placed or not) and never Running; the run
 *     stays Pending with the admission note Gantry reads from it (Queued, reason Scheduling, 0/3
 *     running) and fails AdmissionTimeout at its deadline; the job is deleted (a gang still waiting
 *     for room is judged by its gate, not by its unschedulable pods).
 */

const SPEED = 60;
const PODGROUPS = '/apis/scheduling.x-k8s.io/v1alpha1';

interface PodGroup {
  metadata: { name: string; ownerReferences?: Array<{ kind: string; name: string; uid: string }> };
  spec?: { minMember?: number; minResources?: Record<string, string> };
  status?: { phase?: string; running?: number; succeeded?: number };
}

interface Pod {
  spec: { nodeName?: string };
  status?: { conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
}
const scheduled = (p: Pod) => p.status?.conditions?.find((c) => c.type === 'PodScheduled');

const { set, available } = versionSetSuite('v2.3', 'e2e-real coscheduling', ['scheduler-plugins']);
const label = `scheduler-plugins Coscheduling + Trainer ${set.trainer} + JobSet ${set.jobset}`;

describe.runIf(available)(`real controllers, gang scheduling: ${label}`, () => {
  let hc: HeavyControlPlane, stack: Stack, driver: RunDriver, ns: string;
  useRealStack(
    {
      log: 'e2e-real coscheduling',
      controlPlane: { set: 'v2.3', nodes: 2, gpusPerNode: 4, coscheduling: true },
      namespaces: ['gang'],
      // A team without queues: its runs go unqueued, gang-scheduled by the PodGroup alone.
      stack: (nss) => ({ speed: SPEED, teams: [{ ...DEMO_TEAM, namespaces: nss, queues: [] }] }),
    },
    (real) => {
      ({ hc, stack, driver } = real);
      ns = real.namespaces[0] as string;
    },
  );

  const podGroup = async (name: string) => {
    const r = await hc.request<PodGroup>('GET', `${PODGROUPS}/namespaces/${ns}/podgroups/${name}`);
    return r.status === 200 ? r.body : undefined;
  };
  /** Polls the PodGroup, collecting the distinct phases it shows, until `until` holds. */
  async function watchPhases(name: string, until: (pg: PodGroup) => boolean, timeoutMs = 90_000) {
    const phases: string[] = [];
    const last = await driver.waitFor(
      `PodGroup ${name}`,
      async () => {
        const pg = await podGroup(name);
        const phase = pg?.status?.phase;
        if (phase && phases.at(-1) !== phase) phases.push(phase);
        return pg && until(pg) ? pg : undefined;
      },
      timeoutMs,
    );
    return { phases, last };
  }
  const jobGone = (jobName: string) =>
    driver.waitFor(
      `TrainJob ${jobName} to be deleted`,
      async () => {
        const r = await hc.request('GET', `${TRAINJOBS}/namespaces/${ns}/trainjobs/${jobName}`);
        return r.status === 404 ? true : undefined;
      },
      60_000,
    );

  it('a gang that fits: Trainer’s PodGroup is admitted by Coscheduling, the run runs and succeeds', async () => {
    // Prepare: 2 pods × 4 GPUs on 2 nodes of 4.
    const run = driver.spec(
      {
        runtime: { name: GANG_RUNTIME },
        numNodes: 2,
        resourcesPerNode: { gpu: 4 },
        env: { [KWOK_ENV.runDuration]: '10s' },
      },
      ns,
    );
    // Act
    const arn = await driver.start(run);
    const { phases, last } = await watchPhases(run.jobName, (pg) => pg.status?.phase === 'Running');
    const pods = await hc.request<{
      items: Array<{ metadata: { labels?: Record<string, string> }; spec: { nodeName?: string } }>;
    }>('GET', `/api/v1/namespaces/${ns}/pods?labelSelector=scheduling.x-k8s.io/pod-group=${run.jobName}`);
    await driver.waitFor(
      `run ${run.runId} Running`,
      async () => ((await driver.record(run.runId)).phase === 'Running' ? true : undefined),
      60_000,
    );
    await driver.writeOutput(stack.s3, run);
    const ended = await driver.finished(arn, 150_000);
    // Assess
    console.log(`[e2e-real coscheduling] fits: PodGroup phases ${phases.join(' → ')}`);
    expect(last.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'TrainJob', name: run.jobName }),
    ]);
    expect(last.spec).toMatchObject({
      minMember: 2,
      minResources: expect.objectContaining({ 'nvidia.com/gpu': '8' }),
    });
    expect(last.status?.running).toBe(2);
    expect(pods.body.items).toHaveLength(2);
    expect(new Set(pods.body.items.map((p) => p.spec.nodeName)).size).toBe(2);
    expect(ended.status).toBe('SUCCEEDED');
    const record = await driver.record(run.runId);
    expect(record.phase).toBe('Succeeded');
    expect(record.transitions.map((t) => t.phase)).toEqual(SUCCEEDED_PHASES);
  });

  it('a gang that cannot fit: the PodGroup never runs, the run shows it and fails AdmissionTimeout', async () => {
    // Prepare: 3 pods × 4 GPUs = 12 on a cluster of 8.
    const run = driver.spec(
      {
        runtime: { name: GANG_RUNTIME },
        numNodes: 3,
        resourcesPerNode: { gpu: 4 },
        admissionDeadlineSeconds: 900,
      },
      ns,
    );
    // Act
    const arn = await driver.start(run);
    // The PodGroup controller moves a PodGroup to Scheduling once minMember pods exist, placed or not.
    const { phases, last: pg } = await watchPhases(
      run.jobName,
      (g) => g.status?.phase === 'Scheduling',
      60_000,
    );
    const shown = await driver.waitFor(
      'the PodGroup in the admission note',
      async () => {
        const r = await driver.record(run.runId);
        return r.admission?.reason === 'Scheduling' ? r : undefined;
      },
      60_000,
    );
    const pods = await driver.waitFor(
      'the gang’s pods rejected by Coscheduling',
      async () => {
        const r = await hc.request<{ items: Pod[] }>(
          'GET',
          `/api/v1/namespaces/${ns}/pods?labelSelector=scheduling.x-k8s.io/pod-group=${run.jobName}`,
        );
        return r.body.items.length === 3 && r.body.items.every((p) => scheduled(p)?.status === 'False')
          ? r.body.items
          : undefined;
      },
      60_000,
    );
    const ended = await driver.finished(arn, 120_000);
    // Assess
    console.log(
      `[e2e-real coscheduling] cannot fit: PodGroup phases ${phases.join(' → ')}; pod: ${JSON.stringify(scheduled(pods[0] as Pod))}; note: ${JSON.stringify(shown.admission)}`,
    );
    expect(pg.spec?.minMember).toBe(3);
    expect(pg.status?.phase).toBe('Scheduling');
    expect(pg.status?.running ?? 0).toBe(0);
    expect(pods.every((p) => p.spec.nodeName === undefined)).toBe(true);
    expect(scheduled(pods[0] as Pod)).toMatchObject({
      reason: 'Unschedulable',
      message: expect.stringMatching(/resource gap: .*nvidia\.com\/gpu/),
    });
    expect(shown.phase).toBe('Pending');
    expect(shown.admission).toMatchObject({
      state: 'Queued',
      reason: 'Scheduling',
      message: 'minMember pods exist, waiting for them to be placed and run (0/3 running)',
    });
    expect(ended.status).toBe('FAILED');
    const record = await driver.record(run.runId);
    expect(record).toMatchObject({ phase: 'Failed', reason: 'AdmissionTimeout' });
    expect(record.transitions.map((t) => t.phase)).not.toContain('Running');
    expect(await jobGone(run.jobName)).toBe(true);
  });

  it('no controller crashed', () => {
    expect(hc.exited()).toEqual([]);
  });
});
