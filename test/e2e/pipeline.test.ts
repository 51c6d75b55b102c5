import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';

/**
 * The whole pipeline through the HTTP API on the embedded default: the production handlers
 * behind the local HTTP host, the real SQS consumer loop, the real ASL on the local Step
 * Functions endpoint, the reconciler, and the cluster simulator playing Kueue and Trainer.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;

const request = (over: Record<string, unknown> = {}) => ({
  modelName: 'resnet50',
  team: 'demo',
  namespace: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  args: ['--lr=0.003'],
  numNodes: 1,
  resourcesPerNode: { gpu: 2 },
  queue: 'demo-queue',
  ...over,
});

describe('the pipeline through the HTTP API (embedded default)', () => {
  let env: Embedded;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 600 },
      stack: { orphanGraceSeconds: 1 },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function until(runId: string, phases: string[], timeoutMs = 60_000) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await call('GET', `/v1/runs/${runId}`);
      if (phases.includes(r.body.phase)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is ${r.body.phase}, not ${phases.join('/')}`);
      await new Promise((res) => setTimeout(res, 150));
    }
  }

  /** The run's TrainJobs as the cluster (simulator) lists them. */
  async function jobsOf(runId: string): Promise<unknown[]> {
    const res = await fetch(
      `${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/trainjobs?labelSelector=${encodeURIComponent(`gantry.dev/run-id=${runId}`)}`,
    );
    return ((await res.json()) as { items: unknown[] }).items;
  }

  it('submit → Succeeded, with progress, metrics and the published output', async () => {
    // Act
    const submitted = await call('POST', '/v1/runs', request(), { 'Idempotency-Key': 'e2e-success' });
    // Assess
    expect(submitted.status).toBe(202);
    expect(submitted.headers.get('location')).toBe(`/v1/runs/${submitted.body.runId}`);
    const run = await until(submitted.body.runId, ['Succeeded', 'Failed', 'Cancelled']);
    expect(run.phase).toBe('Succeeded');
    expect(run.progress?.percent).toBe(100);
    expect(typeof run.metrics?.accuracy).toBe('number');
    expect(run.artifacts?.outputUri).toBe(`s3://${env.stack.bucket}/runs/${submitted.body.runId}/output/`);
    expect(run.artifacts?.files).toBeGreaterThan(0);
  });

  it('replays the same key and body to the same run, and refuses the key with another body (409)', async () => {
    const first = await call('POST', '/v1/runs', request({ modelName: 'bert' }), {
      'Idempotency-Key': 'e2e-replay',
    });
    const again = await call('POST', '/v1/runs', request({ modelName: 'bert' }), {
      'Idempotency-Key': 'e2e-replay',
    });
    const other = await call('POST', '/v1/runs', request({ modelName: 'gpt' }), {
      'Idempotency-Key': 'e2e-replay',
    });
    expect(first.status).toBe(202);
    expect(again.status).toBe(200);
    expect(again.body.runId).toBe(first.body.runId);
    expect(other.status).toBe(409);
    await until(first.body.runId, ['Running']);
    // One run, one execution, one job.
    const list = await call('GET', '/v1/runs?model=bert');
    expect(list.body.runs.map((r: { runId: string }) => r.runId)).toEqual([first.body.runId]);
    expect(await jobsOf(first.body.runId)).toHaveLength(1);
  });

  it('cancels a running run: Cancelled, and its job is gone from the cluster', async () => {
    const submitted = await call('POST', '/v1/runs', request({ modelName: 'long', args: ['--epochs=100'] }), {
      'Idempotency-Key': 'e2e-cancel',
    });
    await until(submitted.body.runId, ['Running']);
    const cancelled = await call('POST', `/v1/runs/${submitted.body.runId}/cancel`);
    expect(cancelled.status).toBe(202);
    const run = await until(submitted.body.runId, ['Cancelled', 'Succeeded', 'Failed']);
    expect(run.phase).toBe('Cancelled');
    const deadline = Date.now() + 20_000;
    while ((await jobsOf(submitted.body.runId)).length > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(await jobsOf(submitted.body.runId)).toHaveLength(0);
  });

  it('lists with pagination', async () => {
    for (const i of [1, 2, 3]) {
      const r = await call('POST', '/v1/runs', request({ modelName: 'paged' }), {
        'Idempotency-Key': `e2e-page-${i}`,
      });
      expect(r.status).toBe(202);
    }
    const page1 = await call('GET', '/v1/runs?model=paged&limit=2');
    expect(page1.body.runs).toHaveLength(2);
    expect(page1.body.nextToken).toBeTruthy();
    const page2 = await call(
      'GET',
      `/v1/runs?model=paged&limit=2&nextToken=${encodeURIComponent(page1.body.nextToken)}`,
    );
    expect(page2.body.runs).toHaveLength(1);
    const ids = [...page1.body.runs, ...page2.body.runs].map((r: { runId: string }) => r.runId);
    expect(new Set(ids).size).toBe(3);
  });

  it("refuses another team's namespace with a 403 that names the rule", async () => {
    const r = await call('POST', '/v1/runs', request({ namespace: 'kube-system' }));
    expect(r.status).toBe(403);
    expect(JSON.stringify(r.body)).toContain('kube-system');
  });
});
