import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';

/**
 * `GET /v1/runs/{id}/logs` on the embedded default: production handlers behind the local HTTP
 * host, the real state machine and reconciler, the cluster simulator's pods and their logs.
 */

const RIVAL = {
  ...DEMO_TEAM,
  name: 'rival',
  principals: ['arn:aws:iam::000000000000:user/rival'],
  namespaces: ['rival'],
  queues: [],
  imagePrefixes: ['registry.local/rival/'],
};

const request = (over: Record<string, unknown> = {}) => ({
  modelName: 'logged',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 2,
  resourcesPerNode: { gpu: 1 },
  ...over,
});

describe('run logs on the embedded default', () => {
  let env: Embedded;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 300,
      sfnSpeed: 60,
      // An hour of simulated training: about 12 s here, long enough to read a running run's logs.
      simulator: { defaultDurationSeconds: 3600, namespaces: ['demo', 'rival'] },
      stack: { teams: [DEMO_TEAM, RIVAL] },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const demo = apiClient(() => env.api.url, DEMO_TEAM.principals[0] as string);
  const rival = apiClient(() => env.api.url, RIVAL.principals[0] as string);

  async function until(runId: string, phases: string[], timeoutMs = 30_000) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await demo('GET', `/v1/runs/${runId}`);
      if (phases.includes(r.body.phase)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is ${r.body.phase}, not ${phases.join('/')}`);
      await new Promise((res) => setTimeout(res, 100));
    }
  }

  let runId: string;

  it("returns the tail of a running run's trainer container, node 0 by default", async () => {
    // Prepare
    const submitted = await demo('POST', '/v1/runs', request());
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    runId = submitted.body.runId;
    await until(runId, ['Running']);
    // Act: enough simulated progress for a few steps.
    let logs = await demo('GET', `/v1/runs/${runId}/logs`);
    const end = Date.now() + 20_000;
    while (logs.status === 200 && logs.body.lines.length < 5 && Date.now() < end) {
      await new Promise((res) => setTimeout(res, 200));
      logs = await demo('GET', `/v1/runs/${runId}/logs`);
    }
    // Assess
    expect(logs.status, JSON.stringify(logs.body)).toBe(200);
    expect(Object.keys(logs.body).sort()).toEqual([
      'attempt',
      'container',
      'lines',
      'pod',
      'runId',
      'source',
    ]);
    expect(logs.body).toMatchObject({ runId, container: 'node', attempt: 1, source: 'live' });
    expect(logs.body.pod).toMatch(new RegExp(`^${runId}-node-0-0-`));
    expect(logs.body.lines[0]).toBe(
      `[rank 0/2] starting training on pod ${logs.body.pod} (image registry.local/vision/train:1.0)`,
    );
    expect(logs.body.lines.at(-1)).toMatch(
      /^\[rank 0\/2\] epoch \d+\/10 step \d+\/100 loss=\d\.\d{4} accuracy=\d\.\d{4}$/,
    );
  });

  it('reads another node and only the last tailLines lines', async () => {
    const one = await demo('GET', `/v1/runs/${runId}/logs?node=1&tailLines=2`);
    expect(one.status, JSON.stringify(one.body)).toBe(200);
    expect(one.body.pod).toMatch(new RegExp(`^${runId}-node-0-1-`));
    expect(one.body.lines).toHaveLength(2);
    expect(one.body.lines.every((l: string) => l.startsWith('[rank 1/2] '))).toBe(true);
  });

  it.each([
    ['node=abc', 'node', /whole number/],
    ['node=2', 'node', /below the run's numNodes \(2\)/],
    ['tailLines=0', 'tailLines', /at least 1/],
    ['tailLines=1001', 'tailLines', /at most 1000/],
    ['since=5', 'since', /./],
  ])('answers 400 naming the field for %s', async (query, field, rule) => {
    const r = await demo('GET', `/v1/runs/${runId}/logs?${query}`);
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.error).toBe('ValidationError');
    const issue = (r.body.issues as Array<{ field: string; rule: string }>).find((i) => i.field === field);
    expect(issue?.rule).toMatch(rule);
  });

  it("answers another team's run exactly as an unknown one: 404", async () => {
    const foreign = await rival('GET', `/v1/runs/${runId}/logs`);
    const unknown = await rival('GET', '/v1/runs/run-zzzzzzzzzzzzzzzzzzzz/logs');
    expect([foreign.status, unknown.status]).toEqual([404, 404]);
    expect(foreign.body.message).toBe(`run ${runId} does not exist`);
  });

  it('answers 409 with the phase while the run has no pods (queued behind the quota)', async () => {
    // Prepare: 2 nodes × 8 GPUs exceed the 8-GPU queue: Kueue keeps it pending, no pod starts.
    const submitted = await demo(
      'POST',
      '/v1/runs',
      request({ modelName: 'queued', resourcesPerNode: { gpu: 8 } }),
    );
    expect(submitted.status).toBe(202);
    const queued = submitted.body.runId as string;
    await until(queued, ['Pending']);
    // Act
    const r = await demo('GET', `/v1/runs/${queued}/logs`);
    // Assess
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body).toMatchObject({ error: 'RunLogsUnavailableError', phase: 'Pending' });
    expect(r.body.message).toMatch(new RegExp(`^run ${queued} \\(phase Pending\\) has no logs to read: `));
  });
});
