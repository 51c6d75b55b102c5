import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_QUEUE, type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';

/**
 * `GET /v1/runs/{id}/queue` in Gantry's view (the simulator serves no visibility API) orders the
 * pending runs by the priority Kueue gave their Workloads — the value of the WorkloadPriorityClass
 * the run names (`priorityClass`) — then by when they started waiting: production handlers behind
 * the local HTTP host, the real gateway, the cluster simulator's Kueue and its WorkloadPriorityClasses.
 */

const TEAM = { ...DEMO_TEAM, priorityClasses: ['batch-low', 'urgent'] };

describe('queue position by WorkloadPriorityClass on the embedded default', () => {
  let env: Embedded;
  const demo = apiClient(() => env.api.url, DEMO_TEAM.principals[0] as string);

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 60,
      sfnSpeed: 60,
      // Ten simulated hours: nothing ends while the test reads the line.
      simulator: { defaultDurationSeconds: 36_000, priorityClasses: { 'batch-low': 10, urgent: 1000 } },
      stack: { teams: [TEAM] },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const body = (name: string, priorityClass?: string) => ({
    modelName: name,
    team: 'demo',
    runtime: { name: 'torch-distributed' },
    image: 'registry.local/train:1',
    queue: DEMO_QUEUE.name,
    // The demo queue's whole quota (8 GPUs): one at a time.
    resourcesPerNode: { gpu: 8 },
    ...(priorityClass ? { priorityClass } : {}),
  });

  async function until(runId: string, ok: (run: Record<string, unknown>) => boolean, what: string) {
    const end = Date.now() + 30_000;
    for (;;) {
      const r = await demo('GET', `/v1/runs/${runId}`);
      if (ok(r.body)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is ${r.body.phase}, not ${what}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  it('a later run of a higher priority class is ahead of earlier ones of a lower one', async () => {
    // Prepare: a run holds the quota; two low-priority runs wait, then an urgent one.
    const holder = await demo('POST', '/v1/runs', body('prio-holder', 'urgent'));
    expect(holder.status, JSON.stringify(holder.body)).toBe(202);
    await until(holder.body.runId, (r) => r.phase === 'Running', 'Running');
    const ids: string[] = [];
    for (const [name, pc] of [
      ['prio-low-1', 'batch-low'],
      ['prio-low-2', 'batch-low'],
      ['prio-urgent', 'urgent'],
    ] as const) {
      const r = await demo('POST', '/v1/runs', body(name, pc));
      expect(r.status, JSON.stringify(r.body)).toBe(202);
      ids.push(r.body.runId);
      await until(r.body.runId, (x) => x.phase === 'Pending', 'Pending');
      // Each starts waiting after the one before (Gantry's order within one priority).
      await new Promise((res) => setTimeout(res, 50));
    }
    const [low1, low2, urgent] = ids as [string, string, string];
    // Act
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field
    const views: Record<string, Record<string, any>> = Object.fromEntries(
      await Promise.all(
        ids.map(async (id) => [id, (await demo('GET', `/v1/runs/${id}/queue`)).body] as const),
      ),
    );
    // Assess: the urgent run (submitted last) is first in line; the low ones keep their order.
    expect(views[urgent]).toMatchObject({ queued: true, source: 'gantry', position: 1, aheadRuns: [] });
    expect(views[low1]).toMatchObject({ position: 2, aheadRuns: [urgent] });
    expect(views[low2]).toMatchObject({ position: 3, aheadRuns: [urgent, low1] });
    expect(views[urgent]?.note).toMatch(/by their Workload's priority \(read from Kueue\)/);
    // The estimate counts the runs ahead in that order: the urgent run waits for the holder only.
    expect(views[urgent]?.estimate.basis).toContain('0 ahead, quota 8 GPUs');
    expect(views[low2]?.estimate.basis).toContain('2 ahead, quota 8 GPUs');
    for (const id of [holder.body.runId, ...ids]) await demo('POST', `/v1/runs/${id}/cancel`);
  }, 90_000);
});
