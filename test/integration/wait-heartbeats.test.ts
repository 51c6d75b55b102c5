import { GetExecutionHistoryCommand, SFNClient } from '@aws-sdk/client-sfn';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient } from '../helpers/api-client.ts';

/**
 * The waits' heartbeats stay below their timeouts (the ASL spec requires HeartbeatSeconds <
 * TimeoutSeconds) when the run's deadlines are shorter than the 600 s heartbeat window: the real
 * ASL on the local engine, the execution history read through the Step Functions API.
 */

describe('wait heartbeats under short deadlines', () => {
  let env: Embedded;
  const demo = apiClient(() => env.api.url, DEMO_TEAM.principals[0] as string);

  beforeAll(async () => {
    // Real-time deadlines in the state machine (sfnSpeed 1), so a 120 s admission deadline cannot
    // run out while the 30 s simulated training (0.5 s at 60×) runs.
    env = await startEmbedded({ sfnSpeed: 1, simSpeed: 60, simulator: { defaultDurationSeconds: 30 } });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  it('schedules AwaitAdmission and AwaitCompletion with a heartbeat under each timeout', async () => {
    const submitted = await demo(
      'POST',
      '/v1/runs',
      {
        modelName: 'short-deadlines',
        team: 'demo',
        runtime: { name: 'torch-distributed' },
        image: 'registry.local/vision/train:1.0',
        resourcesPerNode: { gpu: 1 },
        admissionDeadlineSeconds: 120,
        runDeadlineSeconds: 580,
      },
      { 'idempotency-key': 'short-deadlines' },
    );
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    const runId = submitted.body.runId as string;
    const end = Date.now() + 60_000;
    let phase = '';
    while (Date.now() < end) {
      phase = (await demo('GET', `/v1/runs/${runId}`)).body.phase;
      if (['Succeeded', 'Failed', 'Cancelled'].includes(phase)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(phase).toBe('Succeeded');

    const sfn = new SFNClient({
      endpoint: env.stack.endpoints.sfn,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    const history = await sfn.send(
      new GetExecutionHistoryCommand({
        executionArn: `${env.stack.stateMachineArn.replace(':stateMachine:', ':execution:')}:${runId}`,
        maxResults: 1000,
      }),
    );
    const waits = (history.events ?? [])
      .filter((e) => e.type === 'TaskScheduled')
      .map((e) => e.taskScheduledEventDetails)
      .filter((d) => d?.resource === 'invoke.waitForTaskToken');
    // One admission wait, one completion wait.
    expect(waits.length).toBeGreaterThanOrEqual(2);
    for (const d of waits) {
      expect(d?.timeoutInSeconds).toBeGreaterThan(1);
      expect(d?.timeoutInSeconds).toBeLessThanOrEqual(580);
      expect(d?.heartbeatInSeconds).toBeGreaterThanOrEqual(1);
      expect(d?.heartbeatInSeconds as number).toBeLessThan(d?.timeoutInSeconds as number);
    }
  }, 90_000);
});
