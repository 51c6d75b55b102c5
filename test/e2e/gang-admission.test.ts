import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunRequestInput } from '../../lib/run/schema.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import type { Json } from '../../local/simulator/apiserver.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { runDriver } from '../helpers/runs.ts';

/**
 * A gang that cannot fit, on a runtime with `podGroupPolicy.coscheduling`, against the simulator's
 * coscheduling (8 GPUs). Trainer creates the PodGroup in its own reconcile, so for a moment after
 * CreateJob the TrainJob exists, is not suspended and has no gate: the first look of AwaitAdmission
 * used to read that as admitted (2 of 4 runs here went Running and then waited for completion until
 * the wall-clock deadline). CreateJob now marks the job with the gate its runtime names, and a
 * missing PodGroup reads as "waiting for it". Every run must end AdmissionTimeout without ever
 * having been Running.
 */

const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1';
const GANG_RUNTIME = 'torch-distributed-gang';

describe('gang admission: a gang that cannot fit is never read as admitted', () => {
  let env: Embedded;

  beforeAll(async () => {
    vi.resetModules();
    env = await startEmbedded({
      simSpeed: 1,
      sfnSpeed: 60,
      simulator: { gang: 'coscheduling', capacity: { 'nvidia.com/gpu': 8 } },
      stack: {
        reconcileEveryMs: 300,
        orphanGraceSeconds: 0,
        consumer: false,
        teams: [{ ...DEMO_TEAM, queues: [] }],
      },
    });
    const base = `${env.sim.url}${TRAINJOBS}/clustertrainingruntimes`;
    const upstream = (await (await fetch(`${base}/torch-distributed`)).json()) as { spec: Json };
    const created = await fetch(base, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'trainer.kubeflow.org/v1alpha1',
        kind: 'ClusterTrainingRuntime',
        metadata: { name: GANG_RUNTIME },
        spec: { ...upstream.spec, podGroupPolicy: { coscheduling: { scheduleTimeoutSeconds: 60 } } },
      }),
    });
    expect(created.status).toBe(201);
  }, 120_000);

  afterAll(async () => {
    await env?.close();
  });

  it('4 runs of 12 GPUs on 8: each ends AdmissionTimeout at its (accelerated) admission deadline', async () => {
    const driver = runDriver(env.stack);
    const request: Partial<RunRequestInput> = {
      runtime: { name: GANG_RUNTIME },
      numNodes: 3,
      resourcesPerNode: { gpu: 4 },
      admissionDeadlineSeconds: 600, // 10 s at the state machine's speed 60
    };
    const outcomes: Array<{
      status?: string | undefined;
      phases: string[];
      reason?: string | undefined;
      jobAnnotation?: string | undefined;
    }> = [];
    for (let i = 0; i < 4; i++) {
      const run = driver.spec(request, 'demo');
      const arn = await driver.start(run);
      const job = await driver.waitFor(`TrainJob ${run.jobName}`, async () => {
        const r = await fetch(`${env.sim.url}${TRAINJOBS}/namespaces/demo/trainjobs/${run.jobName}`);
        return r.ok
          ? ((await r.json()) as { metadata: { annotations?: Record<string, string> } })
          : undefined;
      });
      const execution = await driver.finished(arn, 60_000);
      const record = await driver.record(run.runId);
      outcomes.push({
        status: execution.status,
        phases: record.transitions.map((t) => t.phase),
        reason: record.reason,
        jobAnnotation: job.metadata.annotations?.['gantry.dev/gang-gate'],
      });
    }

    expect(outcomes).toEqual(
      Array(4).fill({
        status: 'FAILED',
        phases: ['Accepted', 'Submitting', 'Pending', 'Failed'],
        reason: 'AdmissionTimeout',
        jobAnnotation: 'coscheduling',
      }),
    );
  }, 300_000);
});
