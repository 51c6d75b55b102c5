import { describe, expect, it } from 'vitest';
import { makeReconciler, WATCH_FAILURE_LOG_EVERY_MS } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { jobApi } from '../../../lib/trainjob/build.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * A job deleted outside Gantry while its run waits on it: the run fails JobVanished within a pass
 * (from the watch's DELETED event between passes, or from the next LIST when that event was
 * missed), not after the state machine's heartbeat timeout. And a failing watch is logged per
 * occurrence, at most once a minute per cluster. Object-literal fakes; the DELETED event of a real
 * apiserver is in the ClusterGateway contract.
 */
const API: JobApi = jobApi('trainer-v2.2');
const RUN_ID = 'run-cccccccccccccccccccc';
const running: K8sObject = {
  apiVersion: 'trainer.kubeflow.org/v1alpha1',
  kind: 'TrainJob',
  metadata: {
    name: RUN_ID,
    namespace: 'team-a',
    uid: 'u1',
    creationTimestamp: '2026-01-01T00:00:00Z',
    labels: { [LABEL.runId]: RUN_ID },
    annotations: { [ANNOTATION.completionToken]: 'tok-c' },
  },
  spec: { suspend: false },
  status: {},
};

function setup(o: {
  lists: K8sObject[][];
  watch?: (onJob: (job: K8sObject, deleted?: boolean) => 'stop' | undefined) => Promise<'stopped' | 'ended'>;
  now?: () => Date;
}) {
  const calls: string[] = [];
  let listed = 0;
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: async () => [],
    listManagedJobs: async () => o.lists[Math.min(listed++, o.lists.length - 1)] ?? [],
    ...(o.watch ? { watchManagedJobs: async (_a: JobApi, _t: number, onJob: never) => o.watch!(onJob) } : {}),
    annotateJob: async () => running,
    recordEvent: async () => undefined,
  } as Partial<ClusterGateway> as ClusterGateway;
  const workflow = {
    status: async () => 'RUNNING',
    sendTaskSuccess: async () => true,
    sendTaskFailure: async (token: string, error: string) => {
      calls.push(`failure ${token} ${error}`);
      return true;
    },
    sendTaskHeartbeat: async (token: string) => {
      calls.push(`heartbeat ${token}`);
      return true;
    },
  } as unknown as WorkflowEngine;
  const records = {
    get: async () => undefined,
    getMany: async () => new Map(),
    update: async () => ({}),
  } as unknown as RunRecords;
  const lines: Array<Record<string, unknown>> = [];
  const reconciler = makeReconciler({
    clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
    workflow,
    records,
    clock: { now: o.now ?? (() => new Date('2026-01-02T00:00:00Z')) },
    log: (line) => lines.push(line),
  });
  return { reconciler, calls, lines };
}

describe('reconciler: a job deleted outside Gantry', () => {
  it('a DELETED event of a job with a waiting token fails the run JobVanished between passes', async () => {
    const { reconciler, calls } = setup({
      lists: [[running], []],
      watch: async (onJob) => (onJob(running, true) === 'stop' ? 'stopped' : 'ended'),
    });
    await reconciler.tick();
    calls.length = 0;

    await reconciler.waitForJobChange(50);

    expect(calls).toEqual(['failure tok-c JobVanishedError']);
    // Counted in the next pass's report, and not failed twice by that pass's LIST
    const report = await reconciler.tick();
    expect(report.failed).toBe(1);
    expect(calls).toEqual(['failure tok-c JobVanishedError']);
  });

  it('a job the last pass listed with a token and this pass does not find fails JobVanished (no watch)', async () => {
    const { reconciler, calls } = setup({ lists: [[running], []] });
    await reconciler.tick();
    calls.length = 0;

    const report = await reconciler.tick();

    expect(calls).toEqual(['failure tok-c JobVanishedError']);
    expect(report.failed).toBe(1);
  });

  it('a deleted job without a waiting token changes nothing', async () => {
    const quiet = { ...running, metadata: { ...running.metadata, annotations: {} } };
    const { reconciler, calls } = setup({
      lists: [[quiet], []],
      watch: async (onJob) => (onJob(quiet, true) === 'stop' ? 'stopped' : 'ended'),
    });
    await reconciler.tick();
    await reconciler.waitForJobChange(20);
    await reconciler.tick();

    expect(calls.filter((c) => c.startsWith('failure'))).toEqual([]);
  });
});

describe('reconciler: a failing watch is logged per occurrence, rate-limited', () => {
  it('logs the first failure, then one line a minute counting the failures since', async () => {
    let nowMs = Date.parse('2026-01-02T00:00:00Z');
    const { reconciler, lines } = setup({
      lists: [[running]],
      now: () => new Date(nowMs),
      watch: async () => {
        throw Object.assign(new Error('HTTP 504 Gateway Timeout'), { statusCode: 504 });
      },
    });
    await reconciler.tick();
    const watchLines = () => lines.filter((l) => String(l.msg).startsWith('jobs not watched'));

    for (let i = 0; i < 3; i++) {
      await reconciler.waitForJobChange(5);
      nowMs += 10_000;
    }
    expect(watchLines()).toHaveLength(1);
    nowMs += WATCH_FAILURE_LOG_EVERY_MS;
    await reconciler.waitForJobChange(5);

    expect(watchLines().map((l) => l.failures)).toEqual([1, 3]);
    expect(watchLines()[1]?.error).toContain('504');
  });
});
