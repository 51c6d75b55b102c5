import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trialRunId } from '../../lib/run/ids.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';

/**
 * Same-parameter retry on the embedded default: one trial's first job never gets its pods
 * scheduled (the simulator's `podFailure` picks it by its `--lr` argument), so its run fails
 * `Unschedulable` — an infrastructure failure — and the sweep runs that trial again with the same
 * parameters as a new run, without counting it toward maxFailedTrials (0 here).
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const LOST_LR = '--lr=0.01';

describe('a trial lost to infrastructure is retried with the same parameters', () => {
  let env: Embedded;
  const unschedulable: string[] = [];

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 1200,
      sfnSpeed: 60,
      simulator: {
        defaultDurationSeconds: 3000,
        // The first job that trains with lr 0.01: its pods stay Pending, PodScheduled=False/Unschedulable.
        podFailure: (job) => {
          const spec = job.spec as { trainer?: { args?: string[] } } | undefined;
          const name = (job.metadata as { name: string }).name;
          if (!spec?.trainer?.args?.includes(LOST_LR) || unschedulable.length > 0) return undefined;
          unschedulable.push(name);
          return 'Unschedulable';
        },
      },
      // Fail an unschedulable run at the first look (the default waits 5 minutes).
      stack: { orphanGraceSeconds: 1, unschedulableGraceSeconds: 0 },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);

  it('the lost trial runs again as a new run of the same index (retryOf shown) and the sweep succeeds', async () => {
    const submitted = await call('POST', '/v1/sweeps', {
      template: {
        modelName: 'sweep-retry',
        team: 'demo',
        runtime: { name: 'torch-distributed' },
        image: 'registry.local/vision/train:1.0',
        numNodes: 1,
        resourcesPerNode: { gpu: 1 },
        queue: 'demo-queue',
        // No new attempt inside the run (by default an Unschedulable job gets one): the trial's run
        // fails, and the sweep's own retry is what is under test.
        retry: { infrastructure: 0 },
      },
      parameters: [{ name: 'lr', type: 'discrete', values: [0.1, 0.01, 0.001] }],
      objective: { metric: 'accuracy', direction: 'maximize' },
      algorithm: { name: 'grid' },
      maxTrials: 3,
      parallelTrials: 3,
      maxFailedTrials: 0,
    });
    expect(submitted.status).toBe(202);
    const sweepId = submitted.body.sweepId as string;
    let sweep: Body = submitted.body;
    const end = Date.now() + 120_000;
    while (!['Succeeded', 'Failed', 'Cancelled'].includes(sweep.phase) && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 200));
      sweep = (await call('GET', `/v1/sweeps/${sweepId}`)).body;
    }
    expect(sweep.phase).toBe('Succeeded');
    const lost = (sweep.trials as Body[]).find((t) => t.parameters.lr === 0.01) as Body;
    const first = trialRunId(sweepId, lost.index);
    expect(unschedulable).toEqual([first]);
    expect(lost).toMatchObject({
      phase: 'Succeeded',
      attempt: 1,
      retryOf: first,
      retryReason: 'Unschedulable',
      runId: trialRunId(sweepId, lost.index, 1),
      parameters: { lr: 0.01 },
    });
    expect(sweep.counts).toEqual({ Succeeded: 3 });
    // The lost run ended Failed/Unschedulable; the retry trained with the same argument.
    const lostRun = await call('GET', `/v1/runs/${first}`);
    expect(lostRun.body).toMatchObject({ phase: 'Failed', reason: 'Unschedulable' });
    const retry = await call('GET', `/v1/runs/${lost.runId}`);
    expect(retry.body.phase).toBe('Succeeded');
    expect(retry.body.trial).toMatchObject({ sweepId, trialIndex: lost.index });
    expect(retry.body.request.args).toContain(LOST_LR);
  }, 150_000);
});
