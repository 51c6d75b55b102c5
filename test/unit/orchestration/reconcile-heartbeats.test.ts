import { describe, expect, it } from 'vitest';
import { AwsUnavailableError } from '../../../lib/errors.ts';
import { HEARTBEAT_EVERY_SECONDS, makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * Heartbeat pacing: 1,000 jobs each waiting for admission (suspended, Kueue has not admitted them),
 * ticks every 60 s. Object-literal fakes for the cluster and Step Functions: what is under test is
 * which SendTaskHeartbeat calls the reconciler makes, tick by tick.
 */
const API = {
  group: 'trainer.kubeflow.org',
  version: 'v1alpha1',
  plural: 'trainjobs',
  kind: 'TrainJob',
} as JobApi;
const N = 1000;
const T0 = Date.parse('2026-01-02T00:00:00Z');

function waitingJob(i: number): K8sObject {
  const runId = `run-${String(i).padStart(20, '0')}`;
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: runId,
      namespace: 'team-a',
      uid: `u${i}`,
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { [LABEL.runId]: runId },
      annotations: { [ANNOTATION.admissionToken]: `token-${i}` },
    },
    spec: { suspend: true },
    status: { conditions: [{ type: 'Suspended', status: 'True', reason: 'Suspended' }] },
  };
}

/** A job that finished: its completion token is answered (sendTaskSuccess). */
function finishedJob(i: number): K8sObject {
  const job = waitingJob(i);
  job.metadata.annotations = { [ANNOTATION.completionToken]: `done-${i}` };
  job.spec = { suspend: false };
  job.status = { conditions: [{ type: 'Complete', status: 'True', reason: 'JobsCompleted' }] };
  return job;
}

function setup(opts: { expired?: Set<string>; throttleAt?: number | undefined; finished?: number } = {}) {
  const jobs = Array.from({ length: N }, (_, i) => waitingJob(i));
  // Finished jobs last in the LIST: behind every waiting one.
  for (let i = 0; i < (opts.finished ?? 0); i++) jobs.push(finishedJob(N + i));
  let now = T0;
  const beats: string[] = [];
  const calls: string[] = [];
  const unused = () => Promise.reject(new Error('not expected'));
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: async () => [],
    listManagedJobs: async () => jobs,
    // Clears the annotation as the apiserver would (a null value in a merge patch deletes the key).
    annotateJob: async (_api: JobApi, _ns: string, name: string, patch: Record<string, string | null>) => {
      const annotations = jobs.find((j) => j.metadata.name === name)?.metadata.annotations ?? {};
      for (const [k, v] of Object.entries(patch)) {
        if (v === null) delete annotations[k];
        else annotations[k] = v;
      }
    },
  } as unknown as ClusterGateway;
  const workflow = {
    status: async () => 'RUNNING',
    sendTaskSuccess: async (token: string) => {
      calls.push(`success ${token}`);
      return true;
    },
    sendTaskFailure: unused,
    sendTaskHeartbeat: async (token: string) => {
      calls.push('heartbeat');
      if (opts.throttleAt !== undefined && beats.length === opts.throttleAt) {
        opts.throttleAt = undefined; // throttled once
        throw new AwsUnavailableError('send task heartbeat: ThrottlingException (may pass)');
      }
      beats.push(token);
      return !opts.expired?.has(token);
    },
  } as unknown as WorkflowEngine;
  const records = {
    get: async () => undefined,
    getMany: async () => new Map(),
    // The finished runs' records: not under test here.
    update: async () => ({ phase: 'Running' }),
    create: unused,
  } as unknown as RunRecords;
  const reconciler = makeReconciler({
    clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
    workflow,
    records,
    clock: { now: () => new Date(now) },
  });
  return {
    beats,
    /** Every Step Functions call, in order (`success <token>` or `heartbeat`). */
    calls,
    /** One tick at `seconds` after T0; the tokens it heartbeated. */
    async tickAt(seconds: number, errors = 0) {
      now = T0 + seconds * 1000;
      const from = beats.length;
      const report = await reconciler.tick();
      expect(report.errors).toBe(errors);
      return beats.slice(from);
    },
  };
}

describe('reconciler: heartbeats paced per token', () => {
  it('a cold tick heartbeats every waiting token; then about N/5 per 60 s tick, each token at most 360 s apart', async () => {
    // Prepare
    const r = setup();
    const last = new Map<string, number>();
    const perTick: number[] = [];

    // Act: 30 minutes of ticks, a minute apart
    for (let t = 0; t <= 1800; t += 60) {
      const beaten = await r.tickAt(t);
      perTick.push(beaten.length);
      for (const token of beaten) last.set(token, t);
      // Assess (each tick): no token waits longer than an interval and a tick for a heartbeat
      for (const [token, at] of last) expect(t - at, token).toBeLessThanOrEqual(HEARTBEAT_EVERY_SECONDS + 60);
    }

    // Assess
    expect(perTick[0]).toBe(N);
    const steady = perTick.slice(1);
    const mean = steady.reduce((a, b) => a + b, 0) / steady.length;
    // One heartbeat per token per 300 s interval: N × 60/300 = N/5 a tick on average, evenly spread
    expect(mean).toBeGreaterThan(N / 5 - 20);
    expect(mean).toBeLessThan(N / 5 + 20);
    expect(Math.max(...steady)).toBeLessThan(1.5 * (N / 5));
    expect(last.size).toBe(N);
  });

  it('a token whose execution is gone is cleared from the job on its heartbeat and never heartbeated again', async () => {
    // Prepare
    const r = setup({ expired: new Set(['token-7']) });

    // Act
    const first = await r.tickAt(0);
    const later = [await r.tickAt(300), await r.tickAt(600), await r.tickAt(900)].flat();

    // Assess
    expect(first).toContain('token-7');
    expect(later).not.toContain('token-7');
    expect(later.length).toBeGreaterThan(N - 1); // the other 999 were heartbeated again
  });

  it('a cold tick answers every finished job before it sends the heartbeats all its tokens are due', async () => {
    // Prepare: 1,000 waiting tokens (all due on a cold start), then 3 finished jobs at the end of the LIST
    const r = setup({ finished: 3 });

    // Act
    await r.tickAt(0);

    // Assess: the answers go out first, whatever their place in the LIST; then the N heartbeats
    expect(r.calls.slice(0, 3).sort()).toEqual([
      `success done-${N}`,
      `success done-${N + 1}`,
      `success done-${N + 2}`,
    ]);
    expect(r.calls.slice(3)).toEqual(Array(N).fill('heartbeat'));
  });

  it('throttled: the rest of the tick heartbeats nothing, the next tick sends the ones still due', async () => {
    // Prepare: Step Functions throttles the 101st heartbeat of the cold tick
    const r = setup({ throttleAt: 100 });

    // Act
    const cold = await r.tickAt(0, 1);
    const next = await r.tickAt(10);

    // Assess
    // 100 before the throttle, plus those already in flight (the reconciler runs 32 jobs at a time)
    expect(cold.length).toBeGreaterThanOrEqual(100);
    expect(cold.length).toBeLessThan(100 + 32);
    expect(next).toHaveLength(N - cold.length);
    expect(new Set([...cold, ...next]).size).toBe(N);
  });
});
