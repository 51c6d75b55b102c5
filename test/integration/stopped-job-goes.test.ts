import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';

/**
 * A stopped run's job always goes: when the Cleanup step cannot delete the job (the apiserver
 * keeps failing the DELETE), the run still ends, and the reconciler deletes the job on a later
 * tick (a job whose execution has ended is an orphan), so no finished run keeps its quota.
 * Embedded default: real ASL on the local Step Functions endpoint, the cluster simulator.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;

describe('a stopped run’s job always goes', { timeout: 120_000 }, () => {
  let env: Embedded;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 60,
      sfnSpeed: 60,
      stack: { orphanGraceSeconds: 1, reconcileEveryMs: 300 },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function jobsOf(runId: string): Promise<unknown[]> {
    const res = await fetch(
      `${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/trainjobs?labelSelector=${encodeURIComponent(`gantry.dev/run-id=${runId}`)}`,
    );
    return ((await res.json()) as { items: unknown[] }).items;
  }

  it('Cleanup fails to delete the job of a run that timed out in admission; the reconciler deletes it later', async () => {
    // Prepare: 16 GPUs against the demo queue's 8 — Kueue never admits it; the shortest admission deadline.
    const submitted = await call('POST', '/v1/runs', {
      modelName: 'stuck',
      team: 'demo',
      runtime: { name: 'torch-distributed' },
      image: 'registry.local/vision/train:1.0',
      numNodes: 2,
      resourcesPerNode: { gpu: 8 },
      queue: 'demo-queue',
      admissionDeadlineSeconds: 60,
    });
    expect(submitted.status).toBe(202);
    const runId = submitted.body.runId as string;
    for (const end = Date.now() + 20_000; (await jobsOf(runId)).length === 0 && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await jobsOf(runId)).toHaveLength(1);
    // Every DELETE of the job fails for longer than Cleanup retries (6 attempts).
    env.sim.inject({
      path: new RegExp(`/trainjobs/${runId}(\\?|$)`),
      method: 'DELETE',
      status: 500,
      times: 12,
    });

    // Act: wait for the run to end, then for the job to go.
    let run: Record<string, unknown> = {};
    for (const end = Date.now() + 60_000; Date.now() < end; ) {
      run = (await call('GET', `/v1/runs/${runId}`)).body;
      if (run.phase === 'Failed') break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const endedWithJob = (await jobsOf(runId)).length;
    for (const end = Date.now() + 60_000; (await jobsOf(runId)).length > 0 && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 200));
    }

    // Assess
    expect(run).toMatchObject({ phase: 'Failed', reason: 'AdmissionTimeout' });
    expect(endedWithJob).toBe(1); // Cleanup could not delete it
    expect(await jobsOf(runId)).toHaveLength(0); // the reconciler did
  });
});
