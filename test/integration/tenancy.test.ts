import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';
import { runDriver } from '../helpers/runs.ts';

/**
 * Two teams on one embedded default, the second one hostile: what it may not do to the first.
 * Production handlers behind the local HTTP host, the real consumer loop and ASL, the cluster
 * simulator.
 */

const RIVAL = {
  ...DEMO_TEAM,
  name: 'rival',
  principals: ['arn:aws:iam::000000000000:user/rival'],
  namespaces: ['rival'],
  queues: [],
  imagePrefixes: ['registry.local/rival/'],
};

/** A team with small caps on what it may have in flight. */
const CAPPED = {
  ...RIVAL,
  name: 'capped',
  principals: ['arn:aws:iam::000000000000:user/capped'],
  namespaces: ['capped'],
  imagePrefixes: ['registry.local/capped/'],
  maxRunsInFlight: 2,
  maxGpusInFlight: 3,
};

const request = (over: Record<string, unknown> = {}) => ({
  modelName: 'shared-name',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  resourcesPerNode: { gpu: 1 },
  ...over,
});

describe('two teams on the embedded default', () => {
  let env: Embedded;
  let driver: ReturnType<typeof runDriver>;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 300, namespaces: ['demo', 'rival', 'capped'] },
      stack: { orphanGraceSeconds: 1, teams: [DEMO_TEAM, RIVAL, CAPPED] },
    });
    driver = runDriver(env.stack);
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const demo = apiClient(() => env.api.url, DEMO_TEAM.principals[0] as string);
  const rival = apiClient(() => env.api.url, RIVAL.principals[0] as string);
  const capped = apiClient(() => env.api.url, CAPPED.principals[0] as string);

  async function until(runId: string, phases: string[], timeoutMs = 60_000) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await demo('GET', `/v1/runs/${runId}`);
      if (phases.includes(r.body.phase)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is ${r.body.phase}, not ${phases.join('/')}`);
      await new Promise((res) => setTimeout(res, 150));
    }
  }

  async function jobsOf(runId: string): Promise<unknown[]> {
    const res = await fetch(
      `${env.sim.url}/apis/trainer.kubeflow.org/v1alpha1/trainjobs?labelSelector=${encodeURIComponent(`gantry.dev/run-id=${runId}`)}`,
    );
    return ((await res.json()) as { items: unknown[] }).items;
  }

  it("keeps the first publisher's model name: the rival's submit is a 403 naming the owner", async () => {
    // Prepare: demo publishes shared-name.
    const first = await demo('POST', '/v1/runs', request());
    expect(first.status).toBe(202);
    expect((await until(first.body.runId, ['Succeeded', 'Failed'])).phase).toBe('Succeeded');
    // Act
    const taken = await rival(
      'POST',
      '/v1/runs',
      request({ team: 'rival', image: 'registry.local/rival/train:1' }),
    );
    // Assess
    expect(taken.status).toBe(403);
    expect(taken.body.rule).toBe('model shared-name belongs to team demo; choose another modelName');
    // And the rival cannot even tell that demo's run exists.
    const peek = await rival('GET', `/v1/runs/${first.body.runId}`);
    const unknown = await rival('GET', '/v1/runs/run-zzzzzzzzzzzzzzzzzzzz');
    expect([peek.status, unknown.status]).toEqual([404, 404]);
  });

  it('refuses a foreign priority class and an output in another bucket at submit', async () => {
    const priority = await rival(
      'POST',
      '/v1/runs',
      request({ team: 'rival', modelName: 'r1', image: 'registry.local/rival/x:1', priorityClass: 'high' }),
    );
    expect(priority.status).toBe(403);
    expect(priority.body.rule).toMatch(/priorityClass high is not allowed for team rival \(allowed: none\)/);
    const output = await rival(
      'POST',
      '/v1/runs',
      request({
        team: 'rival',
        modelName: 'r2',
        image: 'registry.local/rival/x:1',
        output: { uri: `s3://other-bucket/steal/` },
      }),
    );
    expect(output.status).toBe(403);
    expect(output.body.rule).toMatch(/output.uri s3:\/\/other-bucket\/steal\/ is outside team rival's/);
  });

  it("refuses a sweep whose parallel trials would exceed the team's GPUs in flight", async () => {
    const sweep = await rival('POST', '/v1/sweeps', {
      template: request({
        team: 'rival',
        modelName: 'r3',
        image: 'registry.local/rival/x:1',
        numNodes: 4,
        resourcesPerNode: { gpu: 8 },
      }),
      parameters: [{ name: 'lr', type: 'continuous', min: 0.001, max: 0.1 }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'random', seed: 1 },
      maxTrials: 256,
      parallelTrials: 256,
    });
    expect(sweep.status, JSON.stringify(sweep.body)).toBe(403);
    expect(sweep.body.rule).toBe(
      "parallelTrials 256 × 32 GPUs per trial = 8192 GPUs exceed team rival's maxGpusInFlight 128",
    );
  });

  it("answers 429 with Retry-After at a team's caps on runs and GPUs in flight; other teams and replays pass", async () => {
    const mine = (over: Record<string, unknown>) =>
      request({ team: 'capped', image: 'registry.local/capped/x:1', resourcesPerNode: { gpu: 1 }, ...over });
    // Two runs in flight fill maxRunsInFlight 2.
    const a = await capped('POST', '/v1/runs', mine({ modelName: 'c1' }), { 'Idempotency-Key': 'cap-a' });
    const b = await capped('POST', '/v1/runs', mine({ modelName: 'c2' }), { 'Idempotency-Key': 'cap-b' });
    expect([a.status, b.status]).toEqual([202, 202]);
    const c = await capped('POST', '/v1/runs', mine({ modelName: 'c3' }), { 'Idempotency-Key': 'cap-c' });
    expect(c.status).toBe(429);
    expect(c.headers.get('retry-after')).toBe('30');
    expect(c.body.limit).toBe('maxRunsInFlight');
    expect(c.body.message).toMatch(/team capped has 2 runs in flight, its maxRunsInFlight is 2/);
    // Nothing was recorded for the refused run; a replay of an accepted one still answers 200.
    expect(((await capped('GET', '/v1/runs')).body.runs as unknown[]).length).toBe(2);
    const replay = await capped('POST', '/v1/runs', mine({ modelName: 'c1' }), {
      'Idempotency-Key': 'cap-a',
    });
    expect([replay.status, replay.body.runId]).toEqual([200, a.body.runId]);
    // Another team is not held back by this one's load.
    const other = await demo('POST', '/v1/runs', request({ modelName: 'not-capped' }));
    expect(other.status).toBe(202);
    // Once the two end, the refused run goes through with the same key.
    for (const id of [a.body.runId, b.body.runId]) {
      const end = Date.now() + 60_000;
      for (;;) {
        const r = await capped('GET', `/v1/runs/${id}`);
        if (['Succeeded', 'Failed', 'Cancelled'].includes(r.body.phase)) break;
        if (Date.now() > end) throw new Error(`run ${id} did not end`);
        await new Promise((res) => setTimeout(res, 150));
      }
    }
    const again = await capped('POST', '/v1/runs', mine({ modelName: 'c3' }), { 'Idempotency-Key': 'cap-c' });
    expect(again.status).toBe(202);
    // GPUs: 3 in flight at most; one run of 4 GPUs can never fit.
    const big = await capped('POST', '/v1/runs', mine({ modelName: 'c4', resourcesPerNode: { gpu: 4 } }));
    expect(big.status).toBe(429);
    expect(big.body.limit).toBe('maxGpusInFlight');
  });

  it('dead-letters a forged queue message with the reason; no job, no record', async () => {
    // Prepare: a run of demo placed in kube-system, outside Kueue, sent straight to the runs queue.
    const forged = driver.spec({ resourcesPerNode: { gpu: 8 } }, 'kube-system');
    const body = JSON.stringify({ kind: 'run', run: forged });
    // Act
    await env.stack.sqs.send(new SendMessageCommand({ QueueUrl: env.stack.queueUrl, MessageBody: body }));
    // Assess: on the DLQ with the reason, once the consumer has seen it.
    let reason: string | undefined;
    const end = Date.now() + 20_000;
    while (reason === undefined && Date.now() < end) {
      const out = await env.stack.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: env.stack.dlqUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageAttributeNames: ['All'],
        }),
      );
      const m = out.Messages?.find((x) => x.Body === body);
      reason = m?.MessageAttributes?.rejectedReason?.StringValue;
    }
    expect(reason).toMatch(/namespace kube-system is not allowed for team demo/);
    expect(reason).toMatch(/a run of team demo must name one of its queues \(demo-queue\)/);
    expect(await jobsOf(forged.runId)).toEqual([]);
    expect((await demo('GET', `/v1/runs/${forged.runId}`)).status).toBe(404);
  });

  it("fails a forged execution at CreateJob (Forbidden): no job in the other team's namespace", async () => {
    // Prepare: an execution started with a spec placing demo's run in rival's namespace.
    const forged = driver.spec({ queue: 'demo-queue' }, 'rival');
    // Act
    const arn = await driver.start(forged);
    // Assess
    expect((await driver.finished(arn, 30_000)).status).toBe('FAILED');
    const record = await driver.record(forged.runId);
    expect(record).toMatchObject({ phase: 'Failed', reason: 'Forbidden' });
    expect(record.message).toMatch(/namespace rival is not allowed for team demo/);
    expect(await jobsOf(forged.runId)).toEqual([]);
  });
});
