import { describe, expect, it } from 'vitest';
import { countingCalls, NO_REQUESTS } from '../../../lib/observability/metrics.ts';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import { newRecord, type RunRecord } from '../../../lib/run/record.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { memoryTable } from '../../helpers/intake-fakes.ts';

/**
 * Stall detection in the reconciler, on an in-memory state table (the real RunRecords over the
 * StateTable fake) and object-literal fakes of the cluster and Step Functions: a running job whose
 * run asks for `stallAfterSeconds` 60 is found stalled at the first tick at or past the threshold,
 * the store is read only when a run's check is due, and a report (as the metric channel's consumer
 * writes it) clears the stall.
 */
const API = {
  group: 'trainer.kubeflow.org',
  version: 'v1alpha1',
  plural: 'trainjobs',
  kind: 'TrainJob',
} as JobApi;
const RUN = 'run-aaaaaaaaaaaaaaaaaaaa';
const T0 = Date.parse('2026-01-02T00:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000);

async function setup(request: { stallAfterSeconds?: number; restartOnStall?: boolean }) {
  let now = T0;
  const clock = { now: () => new Date(now) };
  const counts = { ...NO_REQUESTS };
  const table = memoryTable();
  const records = makeRunRecords({ table, clock });
  const counted = makeRunRecords({ table: countingCalls(table, 'Store', counts), clock });
  // The run went Running at T0 (as the reconciler records it).
  const spec = aRunSpec({ runId: RUN, request: { ...request, numNodes: 1 } });
  const created = newRecord(spec, 'fp', at(-120));
  await records.create({
    ...created,
    phase: 'Running',
    transitions: [
      ...created.transitions,
      { phase: 'Pending', at: at(-60).toISOString() },
      { phase: 'Running', at: at(0).toISOString() },
    ],
  });
  const job: K8sObject = {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: RUN,
      namespace: 'team-vision',
      uid: 'u1',
      creationTimestamp: at(-60).toISOString(),
      labels: { [LABEL.runId]: RUN },
      annotations: { [ANNOTATION.completionToken]: 'tok' },
    },
    spec: {},
    status: { conditions: [] },
  };
  const calls: string[] = [];
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: async () => [],
    listManagedJobs: async () => [job],
    annotateJob: async (_api: JobApi, _ns: string, _name: string, patch: Record<string, string | null>) => {
      calls.push(`annotate ${JSON.stringify(patch)}`);
      for (const [k, v] of Object.entries(patch)) {
        if (v === null) delete job.metadata.annotations?.[k];
      }
    },
    deleteJob: async () => calls.push('deleteJob'),
    createEvent: async (e: K8sObject) => {
      const ev = e as unknown as { reason: string; type: string; action: string };
      calls.push(`event ${ev.type} ${ev.reason} ${ev.action}`);
    },
  } as unknown as ClusterGateway;
  const workflow = {
    status: async () => 'RUNNING',
    sendTaskSuccess: async () => true,
    sendTaskFailure: async (token: string, error: string, cause: string) => {
      calls.push(`failure ${token} ${error} ${cause}`);
      return true;
    },
    sendTaskHeartbeat: async () => true,
  } as unknown as WorkflowEngine;
  const reconciler = makeReconciler({
    clusters: () => [{ name: 'c', gateway, jobApis: async () => [API] }],
    workflow,
    records: counted,
    clock,
  });
  return {
    calls,
    /** One tick at `s` seconds after the run went Running: its report and the store calls it made. */
    async tickAt(s: number) {
      now = T0 + s * 1000;
      Object.assign(counts, NO_REQUESTS);
      const report = await reconciler.tick();
      expect(report.errors).toBe(0);
      return { report, store: counts.Store };
    },
    /** What the metric channel's consumer writes when the training reports at `s`. */
    async reportAt(s: number) {
      now = T0 + s * 1000;
      await records.update(RUN, { lastProgressAt: at(s).toISOString(), metrics: { loss: 1 / (s + 1) } });
    },
    record: async () => (await records.get(RUN)) as RunRecord,
    job,
  };
}

describe('reconciler: stall detection', () => {
  it('is found at the first tick at the threshold, reads the store only when due, and clears on a report', async () => {
    // Prepare
    const r = await setup({ stallAfterSeconds: 60 });

    // Act + Assess: a cold tick reads the record once (it writes Running anyway)
    expect((await r.tickAt(0)).store).toBeGreaterThan(0);
    // Steady ticks before the threshold: no store call at all
    for (const s of [10, 20, 30]) expect((await r.tickAt(s)).store, `tick at ${s}`).toBe(0);
    await r.reportAt(40);
    expect((await r.tickAt(50)).store).toBe(0);
    // Due at 60 (went Running at 0): one batched read learns of the report at 40 — not stalled
    const due = await r.tickAt(60);
    expect(due.store).toBe(1);
    expect(due.report.stalled).toBe(0);
    expect((await r.tickAt(90)).store).toBe(0);
    // 100 = 40 + 60: stalled at this tick, not one later
    const found = await r.tickAt(100);
    expect(found.report.stalled).toBe(1);
    expect((await r.record()).stalls).toEqual([
      { n: 0, since: at(100).toISOString(), lastProgressAt: at(40).toISOString() },
    ]);
    expect(r.calls).toEqual(['event Warning Stalled RecordStall']);
    // While stalled: no store call until a threshold later, and no second event
    for (const s of [110, 130, 150]) expect((await r.tickAt(s)).store, `tick at ${s}`).toBe(0);
    // The training reports again: the record's stall resumes (the consumer's write alone)
    await r.reportAt(155);
    expect((await r.record()).stalls?.[0]?.resumedAt).toBe(at(155).toISOString());
    const after = await r.tickAt(160);
    expect(after.report.stalled).toBe(0);
    // A second stall 60 s after the last report is n 1
    expect((await r.tickAt(214)).report.stalled).toBe(0);
    expect((await r.tickAt(215)).report.stalled).toBe(1);
    expect((await r.record()).stalls?.map((s) => [s.n, s.lastProgressAt])).toEqual([
      [0, at(40).toISOString()],
      [1, at(155).toISOString()],
    ]);
    // Nothing was failed: the run only shows it
    expect(r.calls.filter((c) => c.startsWith('failure'))).toEqual([]);
  });

  it('a run without stallAfterSeconds is read once, then never for stalls', async () => {
    const r = await setup({});
    await r.tickAt(0);
    for (const s of [60, 600, 6000]) {
      const t = await r.tickAt(s);
      expect(t.store).toBe(0);
      expect(t.report.stalled).toBe(0);
    }
    expect((await r.record()).stalls).toBeUndefined();
  });

  it('restartOnStall fails the completion wait with InfrastructureFailureError, reason Stalled', async () => {
    // Prepare
    const r = await setup({ stallAfterSeconds: 60, restartOnStall: true });
    await r.tickAt(0);
    // Act
    const found = await r.tickAt(61);
    // Assess
    expect(found.report).toMatchObject({ stalled: 1, failed: 1 });
    expect(r.calls[0]).toBe('event Warning Stalled RestartRun');
    const failure = r.calls[1] as string;
    expect(failure).toMatch(/^failure tok InfrastructureFailureError /);
    const cause = JSON.parse(failure.replace(/^failure tok InfrastructureFailureError /, ''));
    expect(cause).toEqual({
      reason: 'Stalled',
      message: expect.stringContaining('no progress or metric reported for 61 s'),
    });
    expect(r.calls[2]).toBe(`annotate {"${ANNOTATION.completionToken}":null}`);
    // The token is gone: later ticks do not fail it again
    await r.tickAt(200);
    expect(r.calls.filter((c) => c.startsWith('failure'))).toHaveLength(1);
  });

  it('restartOnStall before the completion wait stored its token: looked at again within 10 s, then failed', async () => {
    // Prepare: the job runs but the state machine has not stored its completion token yet
    const r = await setup({ stallAfterSeconds: 60, restartOnStall: true });
    delete r.job.metadata.annotations?.[ANNOTATION.completionToken];
    await r.tickAt(0);
    expect((await r.tickAt(61)).report).toMatchObject({ stalled: 1, failed: 0 });
    // Act: the token appears
    (r.job.metadata.annotations as Record<string, string>)[ANNOTATION.completionToken] = 'tok';
    expect((await r.tickAt(65)).store).toBe(0);
    const again = await r.tickAt(71);
    // Assess
    expect(again.store).toBe(1);
    expect(again.report).toMatchObject({ stalled: 0, failed: 1 });
    expect(r.calls.filter((c) => c.startsWith('failure tok InfrastructureFailureError'))).toHaveLength(1);
  });
});
