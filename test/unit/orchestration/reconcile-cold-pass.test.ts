import { describe, expect, it } from 'vitest';
import { HEARTBEAT_RESERVE_MS, sinceTokenPhase } from '../../../lib/orchestration/heartbeats.ts';
import { tokenBucket } from '../../../lib/orchestration/pacing.ts';
import { HEARTBEAT_EVERY_SECONDS, makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * A cold reconciler (a new container: no token's last heartbeat known) under the production pacing
 * (750 burst, 150/s) on a fake clock that the pacer's waits advance: answers first, then record
 * writes, then heartbeats, longest since their phase first, stopped HEARTBEAT_RESERVE_MS before the
 * invocation ends; the next pass sends the rest. Object-literal fakes for the cluster, the run
 * records and Step Functions: what is under test is the order and number of their calls.
 */
const API = {
  group: 'trainer.kubeflow.org',
  version: 'v1alpha1',
  plural: 'trainjobs',
  kind: 'TrainJob',
} as JobApi;
const T0 = Date.parse('2026-01-02T00:00:00Z');
const EVERY_MS = HEARTBEAT_EVERY_SECONDS * 1000;

function job(i: number, state: 'queued' | 'running' | 'finished'): K8sObject {
  const runId = `run-${i}`;
  const token = `${state === 'queued' ? 'adm' : 'cmp'}-${i}-${(i * 2654435761) % 1e9}`;
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: runId,
      namespace: 'team-a',
      uid: `u${i}`,
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { [LABEL.runId]: runId },
      annotations: { [state === 'queued' ? ANNOTATION.admissionToken : ANNOTATION.completionToken]: token },
    },
    spec: { suspend: state === 'queued' },
    status:
      state === 'finished'
        ? { conditions: [{ type: 'Complete', status: 'True', reason: 'JobsCompleted' }] }
        : state === 'queued'
          ? { conditions: [{ type: 'Suspended', status: 'True', reason: 'Suspended' }] }
          : {},
  };
}

function setup(n: { queued: number; running: number; finished: number }) {
  const jobs = [
    ...Array.from({ length: n.queued }, (_, i) => job(i, 'queued')),
    ...Array.from({ length: n.running }, (_, i) => job(n.queued + i, 'running')),
    // Finished jobs last in the LIST: behind every waiting one.
    ...Array.from({ length: n.finished }, (_, i) => job(n.queued + n.running + i, 'finished')),
  ];
  let now = T0;
  const calls: string[] = [];
  const heartbeats: Array<{ token: string; at: number }> = [];
  const logs: Array<Record<string, unknown>> = [];
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: async () => [],
    listManagedJobs: async () => jobs,
    annotateJob: async (_api: JobApi, _ns: string, name: string, patch: Record<string, string | null>) => {
      const annotations = jobs.find((j) => j.metadata.name === name)?.metadata.annotations ?? {};
      for (const [k, v] of Object.entries(patch)) if (v === null) delete annotations[k];
    },
  } as unknown as ClusterGateway;
  const workflow = {
    status: async () => 'RUNNING',
    sendTaskSuccess: async (token: string) => {
      calls.push(`success ${token}`);
      return true;
    },
    sendTaskFailure: async () => {
      throw new Error('not expected');
    },
    sendTaskHeartbeat: async (token: string) => {
      calls.push('heartbeat');
      heartbeats.push({ token, at: now });
      return true;
    },
  } as unknown as WorkflowEngine;
  // A record per run: Pending, so a running job's pass writes phase Running into it.
  const records = {
    getMany: async (ids: string[]) =>
      new Map(ids.map((id) => [id, { value: { runId: id, phase: 'Pending' }, version: '1' }])),
    updateFrom: async (read: { value: { runId: string } }) => {
      calls.push(`write ${read.value.runId}`);
      return { record: { runId: read.value.runId, phase: 'Running' }, changed: true };
    },
  } as unknown as RunRecords;
  const container = () =>
    makeReconciler({
      clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
      workflow,
      records,
      clock: { now: () => new Date(now) },
      // The production pacing, on the fake clock: its waits are the time that passes.
      pacing: {
        answers: tokenBucket({
          capacity: 750,
          perSecond: 150,
          now: () => now,
          sleep: async (ms) => {
            now += ms;
          },
        }),
      },
      log: (line) => logs.push(line),
    });
  return {
    calls,
    heartbeats,
    logs,
    now: () => now,
    /** The clock moved on to `ms` (when it is not there yet). */
    at(ms: number) {
      now = Math.max(now, ms);
    },
    container,
    /** One pass of an invocation with `invocationMs` left at its start. */
    async pass(reconciler: ReturnType<typeof container>, invocationMs: number) {
      const start = now;
      const report = await reconciler.tick({ remainingMs: () => invocationMs - (now - start) });
      return { report, tookMs: now - start };
    },
  };
}

describe('reconciler: a cold pass under production pacing', () => {
  it('answers, then writes the records, then heartbeats', async () => {
    // Prepare: 900 queued and 100 running jobs waiting, 3 finished at the end of the LIST
    const r = setup({ queued: 900, running: 100, finished: 3 });

    // Act
    const { report } = await r.pass(r.container(), 55_000);

    // Assess
    const firstHeartbeat = r.calls.indexOf('heartbeat');
    const lastWrite = r.calls.findLastIndex((c) => c.startsWith('write '));
    expect(r.calls.slice(0, 3).every((c) => c.startsWith('success '))).toBe(true);
    expect(r.calls.filter((c) => c.startsWith('write '))).toHaveLength(100);
    expect(lastWrite).toBeLessThan(firstHeartbeat);
    expect(report.heartbeats).toBe(1000);
    expect(report.answered).toBe(3);
  });

  it('stops heartbeating before the invocation ends; the next pass sends the rest, none twice', async () => {
    // Prepare: 3,000 tokens, an invocation of 20 s: 750 at once, then 150/s for 12 s (8 s kept back)
    const r = setup({ queued: 3000, running: 0, finished: 0 });
    const reconciler = r.container();

    // Act
    const cold = await r.pass(reconciler, 20_000);
    const sentCold = r.heartbeats.map((h) => h.token);
    const next = await r.pass(reconciler, 55_000);

    // Assess: the cold pass ended inside its invocation, with the reserve left
    expect(cold.tookMs).toBeLessThanOrEqual(20_000 - HEARTBEAT_RESERVE_MS + 1000);
    expect(sentCold.length).toBeGreaterThanOrEqual(750 + 150 * 11);
    expect(sentCold.length).toBeLessThanOrEqual(750 + 150 * 12 + 1);
    expect(r.logs).toContainEqual(
      expect.objectContaining({ msg: 'heartbeats left for the next pass', deferred: 3000 - sentCold.length }),
    );
    // The rest in the next pass, and no token twice
    const sentNext = r.heartbeats.slice(sentCold.length).map((h) => h.token);
    expect(next.report.heartbeats).toBe(3000 - sentCold.length);
    expect(new Set([...sentCold, ...sentNext]).size).toBe(3000);
    // Longest since their phase first: every token left for later came round more recently than any sent
    const since = (t: string) => sinceTokenPhase(t, T0, EVERY_MS);
    expect(Math.max(...sentNext.map(since))).toBeLessThanOrEqual(Math.min(...sentCold.map(since)));
  });

  it('a heartbeat sent just before its phase counts for the window that starts there: no second one seconds later', async () => {
    // Prepare
    const r = setup({ queued: 2000, running: 0, finished: 0 });
    const reconciler = r.container();

    // Act: a cold pass, then passes 10 s apart for a minute
    await r.pass(reconciler, 55_000);
    const cold = r.heartbeats.length;
    for (let k = 1; k <= 6; k++) {
      r.at(T0 + k * 10_000);
      await r.pass(reconciler, 55_000);
    }

    // Assess: each token once in the cold pass; none again within 30 s, about N/30 a pass after it
    expect(cold).toBe(2000);
    expect(r.heartbeats.length - cold).toBeLessThan((2000 / 30) * 6 * 1.5);
    const last = new Map<string, number>();
    for (const { token, at } of r.heartbeats) {
      const before = last.get(token);
      if (before !== undefined) expect(at - before, token).toBeGreaterThan(30_000);
      last.set(token, at);
    }
  });
});
