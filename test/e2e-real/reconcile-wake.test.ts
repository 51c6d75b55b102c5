import { describe, expect, it } from 'vitest';
import { DEMO_TEAM } from '../../local/stack.ts';
import { type RealStack, useRealStack, versionSetSuite } from '../helpers/real-stack.ts';
import { KWOK_ENV, NEWEST_SET } from '../helpers/realcp-heavy.ts';

/**
 * The reconciler between its passes (lib/orchestration/wake.ts) on the REAL controllers: Kueue
 * admits and unsuspends the TrainJob, Trainer and JobSet roll the pods' progress up and mark it
 * Complete, and each of those reaches Gantry only as a watch event of the TrainJob. The
 * reconciler's period here is 2 minutes and the state machine runs in real time (its heartbeat
 * fallback would come after 600 s), and the runs must end within 60 s, so every wait these runs
 * pass is answered because the watch
 * saw the change: a pass it started (admission: are the pods running?) or the answer from the
 * event itself (completion). One version set, the newest: the watch is the API server's, the same
 * for the three (the ClusterGateway contract runs it on a real kube-apiserver). Checked (with a
 * 10-minute period): with the wake option removed, the executions were still running at a 150 s
 * timeout; with it, both runs ended Succeeded in 7.8 s. The period is 2 minutes, not 10, because
 * the watch between passes asks the API server for up to one period: a stop caught in the middle
 * of one once held the file's teardown past its 400 s hook timeout in CI.
 */
const SET = NEWEST_SET;
const { label, available } = versionSetSuite(SET, 'e2e-real');

describe.runIf(available)(`reconciler woken by the real controllers' changes: ${label}`, () => {
  const real = useRealStack(
    {
      log: `e2e-real wake ${SET}`,
      controlPlane: { set: SET, nodes: 2, gpusPerNode: 8, gpuQuota: 8 },
      namespaces: ['demo'],
      stack: (nss) => ({
        speed: 1,
        reconcileEveryMs: 120_000,
        reconcileWakeGapMs: 200,
        teams: [{ ...DEMO_TEAM, namespaces: nss }],
      }),
    },
    () => {},
  );

  it('two runs are admitted by Kueue and end Succeeded well within one period', async () => {
    const { driver, namespaces } = real() as RealStack;
    const ns = namespaces[0] as string;
    const runs = [0, 1].map(() =>
      driver.spec(
        {
          queue: 'demo-queue',
          resourcesPerNode: { gpu: 1 },
          producesArtifacts: false,
          env: { [KWOK_ENV.runDuration]: '5s' },
        },
        ns,
      ),
    );
    const started = Date.now();

    const arns = await Promise.all(runs.map((run) => driver.start(run)));
    // Far under the 120 s period: without the watch these executions would still be waiting.
    const executions = await Promise.all(arns.map((arn) => driver.finished(arn, 60_000)));
    const records = await Promise.all(runs.map((run) => driver.record(run.runId)));

    expect(executions.map((e) => e.status)).toEqual(['SUCCEEDED', 'SUCCEEDED']);
    expect(records.map((r) => r.phase)).toEqual(['Succeeded', 'Succeeded']);
    for (const r of records) expect(r.transitions.map((t) => t.phase)).toContain('Running');
    console.log(`[e2e-real wake ${SET}] two runs Succeeded in ${Date.now() - started} ms (period 120000 ms)`);
  }, 240_000);
});
