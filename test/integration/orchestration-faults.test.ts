import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { runDriver } from '../helpers/runs.ts';

/**
 * Transient and terminal Kubernetes errors through the real ASL: the cluster simulator fails
 * chosen requests with 429/503 (as an overloaded apiserver would), and the state machine's Retry
 * (ClusterUnavailableError, backoff with jitter) must carry the run through; a 422 must not be
 * retried.
 */
describe('orchestration under Kubernetes faults', () => {
  let env: Embedded;
  let driver: ReturnType<typeof runDriver>;

  beforeAll(async () => {
    // Retry intervals of 2 s (×2 backoff) run 60× faster here.
    env = await startEmbedded({ simSpeed: 600, sfnSpeed: 60, simulator: { defaultDurationSeconds: 120 } });
    driver = runDriver(env.stack);
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const retriesOf = async (arn: string, state: string) => {
    const history = await driver.history(arn);
    let current = '';
    let failures = 0;
    for (const e of history) {
      if (e.stateEnteredEventDetails?.name) current = e.stateEnteredEventDetails.name;
      if (current === state && e.type === 'LambdaFunctionFailed') failures++;
    }
    return failures;
  };

  it('retries 429 and 503 from the apiserver on create and still succeeds', async () => {
    // Prepare: the next three job creations fail, first throttled, then unavailable.
    env.sim.inject({
      path: /\/trainjobs(\?|$)/,
      method: 'POST',
      status: 429,
      times: 2,
      retryAfterSeconds: 1,
    });
    env.sim.inject({ path: /\/trainjobs(\?|$)/, method: 'POST', status: 503, times: 1 });
    const run = driver.spec({ queue: 'demo-queue', resourcesPerNode: { gpu: 1 } }, 'demo');
    // Act
    const arn = await driver.start(run);
    const ended = await driver.finished(arn, 60_000);
    // Assess
    expect(ended.status).toBe('SUCCEEDED');
    expect(await retriesOf(arn, 'CreateJob')).toBe(3);
    expect((await driver.record(run.runId)).phase).toBe('Succeeded');
  });

  it('retries a flaky status read in the wait step', async () => {
    env.sim.inject({ path: /\/workloads/, method: 'GET', status: 503, times: 2 });
    const run = driver.spec({ queue: 'demo-queue', resourcesPerNode: { gpu: 1 } }, 'demo');
    const arn = await driver.start(run);
    const ended = await driver.finished(arn, 60_000);
    expect(ended.status).toBe('SUCCEEDED');
  });

  it('does not retry a terminal rejection', async () => {
    // An image the schema accepts but a runtime the cluster does not have: InvalidRuntime, once.
    const run = driver.spec({ queue: 'demo-queue', runtime: { name: 'missing-runtime' } }, 'demo');
    const arn = await driver.start(run);
    const ended = await driver.finished(arn, 60_000);
    expect(ended.status).toBe('FAILED');
    expect(await retriesOf(arn, 'CreateJob')).toBe(1);
    expect(await driver.record(run.runId)).toMatchObject({ phase: 'Failed', reason: 'InvalidRuntime' });
  });
});
