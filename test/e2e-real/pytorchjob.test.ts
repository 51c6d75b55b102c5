import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunSpec } from '../../lib/run/spec.ts';
import { apiRoutes, startHttpApi } from '../../local/http-api.ts';
import { DEMO_TEAM, type Stack, startStack } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';
import {
  type Condition,
  type ConditionedObject,
  REAL_STACK_START_MS,
  type RealStack,
  realStackOptions,
  startRealStack,
  stopRealStack,
  watchUntil,
} from '../helpers/real-stack.ts';
import { type HeavyControlPlane, heavyMissing, KWOK_ENV, versionSet } from '../helpers/realcp-heavy.ts';
import { runDriver, SUCCEEDED_PHASES } from '../helpers/runs.ts';
import { tierAvailable } from '../helpers/tiers.ts';

/**
 * Gantry's state machine against the REAL Kubeflow Training Operator v1 (v1.9.3, PyTorchJob scheme,
 * its validating webhook served on 127.0.0.1) on the heavy control plane: the operator makes the
 * pods and services, the scheduler binds them to kwok GPU nodes, kwok "runs" them, and the operator
 * rolls the pod phases up to the PyTorchJob's Succeeded condition.
 *
 * Kueue runs with its release's DEFAULT configuration (v0.19.2: `integrations.frameworks` as in
 * config/components/manager/controller_manager_config.yaml, where every kubeflow.org v1 integration
 * is commented out), as a default install has it:
 *   - a run without `queue` is created unsuspended and runs (nothing waits for admission);
 *   - a queued PyTorchJob is refused at submit (400, field `queue`, naming the cluster and the kind)
 *     while the cluster's `kueueManagedKinds` is the default (TrainJob);
 *   - if the operator lists PyTorchJob in `kueueManagedKinds` although Kueue does not manage it, the
 *     job is created suspended with the queue label, the real Kueue makes no Workload for it (its
 *     PyTorchJob webhook is the disabled integration's no-op), and the run fails NotManagedByKueue
 *     after `kueueWorkloadGraceSeconds` with its job deleted.
 */

const SPEED = 60;
const PYTORCHJOBS = '/apis/kubeflow.org/v1';
const SET = 'v2.3' as const;

type Obj = ConditionedObject;

const set = versionSet(SET);
const available = tierAvailable(
  'e2e-real (Training Operator v1 PyTorchJob)',
  heavyMissing(['kube', 'kwok', ...set.components, 'training-operator']),
);

describe.runIf(available)('real Training Operator v1: PyTorchJob', () => {
  let hc: HeavyControlPlane;
  let stack: Stack;
  let driver: ReturnType<typeof runDriver>;
  let ns: string;
  /** A team without queues: the only kind whose runs may go unqueued (a team with queues must use one). */
  let soloNs: string;
  let real: RealStack | undefined;

  beforeAll(async () => {
    real = await startRealStack({
      log: 'e2e-real pytorchjob',
      controlPlane: {
        set: SET,
        nodes: 2,
        gpusPerNode: 8,
        trainingOperator: true,
        kueueFrameworks: 'default',
      },
      namespaces: ['pt', 'solo'],
      stack: ([pt, solo]) => ({
        cluster: { legacyKinds: ['PyTorchJob'] },
        speed: SPEED,
        teams: [
          { ...DEMO_TEAM, namespaces: [pt as string] },
          {
            ...DEMO_TEAM,
            name: 'solo',
            principals: ['local-solo'],
            namespaces: [solo as string],
            queues: [],
          },
        ],
      }),
    });
    ({ hc, stack, driver } = real);
    [ns, soloNs] = real.namespaces as [string, string];
  }, REAL_STACK_START_MS);

  afterAll(async () => {
    // The nested describe below replaces the stack: stop the current one.
    await stopRealStack({ ...real, stack });
  });

  it("Kueue runs its release's default configuration, which does not enable kubeflow.org/pytorchjob", () => {
    expect(hc.set.kueue).toBe('v0.19.2');
    expect(hc.kueueFrameworks).toContain('trainer.kubeflow.org/trainjob');
    expect(hc.kueueFrameworks).toContain('batch/job');
    expect(hc.kueueFrameworks).not.toContain('kubeflow.org/pytorchjob');
  });

  const jobPath = (run: RunSpec) => `${PYTORCHJOBS}/namespaces/${run.namespace}/pytorchjobs/${run.jobName}`;
  async function job(run: RunSpec): Promise<Obj | undefined> {
    const r = await hc.request<Obj>('GET', jobPath(run));
    return r.status === 200 ? r.body : undefined;
  }
  const phase = (run: RunSpec, want: string, timeoutMs = 60_000) =>
    driver.waitFor(
      `run ${run.runId} phase ${want}`,
      async () => ((await driver.record(run.runId)).phase === want ? true : undefined),
      timeoutMs,
    );

  /** Watch the PyTorchJob until its Succeeded condition (caught even if Gantry deletes it right after). */
  function succeeded(run: RunSpec, timeoutMs = 90_000): Promise<Condition> {
    return watchUntil<Obj, Condition>(
      hc,
      `${PYTORCHJOBS}/namespaces/${run.namespace}/pytorchjobs`,
      run.jobName,
      (o) => o?.status?.conditions?.find((c) => c.type === 'Succeeded' && c.status === 'True'),
      `PyTorchJob ${run.jobName} Succeeded`,
      timeoutMs,
    );
  }

  it('succeeds: the operator makes master + worker pods on kwok GPU nodes, Succeeded → record Succeeded', async () => {
    // Prepare
    const run = driver.spec(
      {
        team: 'solo',
        target: 'PyTorchJob',
        numNodes: 2,
        resourcesPerNode: { gpu: 2 },
        env: { [KWOK_ENV.runDuration]: '8s' },
      },
      soloNs,
    );
    // Act
    const watching = succeeded(run);
    const arn = await driver.start(run);
    await phase(run, 'Running');
    // kwok pods run no code: write what the training code would write, while the job runs.
    await driver.writeOutput(stack.s3, run);
    // Assess: the real operator did the work
    const pods = await driver.waitFor('pods bound to kwok nodes', async () => {
      const r = await hc.request<{
        items: { metadata: { labels?: Record<string, string> }; spec: { nodeName?: string } }[];
      }>(
        'GET',
        `/api/v1/namespaces/${soloNs}/pods?labelSelector=training.kubeflow.org/job-name=${run.jobName}`,
      );
      return r.body.items.length === 2 && r.body.items.every((p) => p.spec.nodeName)
        ? r.body.items
        : undefined;
    });
    expect(pods.map((p) => p.metadata.labels?.['training.kubeflow.org/replica-type']).sort()).toEqual([
      'master',
      'worker',
    ]);
    for (const p of pods) expect(p.spec.nodeName).toMatch(/^kwok-gpu-/);
    const done = await watching;
    expect(done.reason).toBe('PyTorchJobSucceeded');
    const ended = await driver.finished(arn, 90_000);
    expect(ended.status).toBe('SUCCEEDED');
    const record = await driver.record(run.runId);
    expect(record.phase).toBe('Succeeded');
    expect(record.transitions.map((t) => t.phase)).toEqual(SUCCEEDED_PHASES);
    expect(record.artifacts).toMatchObject({ outputUri: run.outputUri, files: 2 });
    await driver.waitFor('the job to be deleted', async () => ((await job(run)) ? undefined : true), 30_000);
  });

  it('the webhook is the real one: a PyTorchJob with two masters is refused', async () => {
    const bad = {
      apiVersion: 'kubeflow.org/v1',
      kind: 'PyTorchJob',
      metadata: { name: 'two-masters', namespace: ns },
      spec: {
        pytorchReplicaSpecs: {
          Master: { replicas: 2, template: { spec: { containers: [{ name: 'pytorch', image: 'x' }] } } },
        },
      },
    };
    const r = await hc.request('POST', `${PYTORCHJOBS}/namespaces/${ns}/pytorchjobs?dryRun=All`, bad);
    expect(r.status).toBe(403); // a webhook denial
    expect((r.body as { message?: string }).message).toMatch(
      /^admission webhook "validator\.pytorchjob\.training-operator\.kubeflow\.org" denied the request: .*Master.*must be 1/,
    );
  });

  it('a queued PyTorchJob is refused at submit: 400 on field queue, naming the cluster and the kind', async () => {
    const api = await startHttpApi({ routes: apiRoutes(), port: 0 });
    try {
      const call = apiClient(() => api.url, DEMO_TEAM.principals[0] as string);
      const r = await call('POST', '/v1/runs', {
        modelName: 'pt-queued',
        team: 'demo',
        namespace: ns,
        target: 'PyTorchJob',
        runtime: { name: 'torch-distributed' },
        image: 'registry.local/train:1',
        numNodes: 2,
        resourcesPerNode: { gpu: 1 },
        queue: 'demo-queue',
      });
      expect(r.status).toBe(400);
      const text = JSON.stringify(r.body);
      expect(text).toContain('queue');
      expect(text).toContain('a queued PyTorchJob would never be admitted on cluster local');
      expect(text).toContain('kueueManagedKinds');
      // Nothing was created on the cluster.
      const list = await hc.request<{ items: unknown[] }>(
        'GET',
        `${PYTORCHJOBS}/namespaces/${ns}/pytorchjobs`,
      );
      expect(list.body.items.filter((j) => JSON.stringify(j).includes('pt-queued'))).toEqual([]);
    } finally {
      await api.close();
    }
  });

  describe('kueueManagedKinds lists PyTorchJob, but the real Kueue does not manage it', () => {
    beforeAll(async () => {
      await stack.close();
      vi.resetModules();
      stack = await startStack(
        realStackOptions(hc, {
          cluster: {
            legacyKinds: ['PyTorchJob'],
            kueueManagedKinds: ['TrainJob', 'PyTorchJob'],
            kueueWorkloadGraceSeconds: 10,
          },
          speed: SPEED,
          teams: [{ ...DEMO_TEAM, namespaces: [ns] }],
        }),
      );
      driver = runDriver(stack);
    }, 120_000);

    it('the suspended job gets no Workload from Kueue → Failed NotManagedByKueue, and its job is deleted', async () => {
      const run = driver.spec(
        {
          target: 'PyTorchJob',
          numNodes: 2,
          resourcesPerNode: { gpu: 1 },
          queue: 'demo-queue',
          admissionDeadlineSeconds: 3600,
        },
        ns,
      );
      const arn = await driver.start(run);
      const created = await driver.waitFor('the PyTorchJob to exist', () => job(run), 30_000);
      expect(created.metadata.labels?.['kueue.x-k8s.io/queue-name']).toBe('demo-queue');
      expect((created as { spec?: { runPolicy?: { suspend?: boolean } } }).spec?.runPolicy?.suspend).toBe(
        true,
      );
      const ended = await driver.finished(arn, 90_000);
      expect(ended.status).toBe('FAILED');
      const record = await driver.record(run.runId);
      expect(record).toMatchObject({ phase: 'Failed', reason: 'NotManagedByKueue' });
      expect(record.message).toMatch(
        /no Kueue Workload appeared for PyTorchJob .* on cluster local within 10 s/,
      );
      // The real Kueue made no Workload in the namespace.
      const wls = await hc.request<{ items: unknown[] }>(
        'GET',
        `/apis/kueue.x-k8s.io/v1beta2/namespaces/${ns}/workloads`,
      );
      expect(wls.body.items).toEqual([]);
      expect(record.transitions.map((t) => t.phase)).toEqual(['Accepted', 'Submitting', 'Pending', 'Failed']);
      await driver.waitFor(
        'the job to be deleted',
        async () => ((await job(run)) ? undefined : true),
        30_000,
      );
    });
  });

  it('no controller crashed', () => {
    expect(hc.exited()).toEqual([]);
  });
});
