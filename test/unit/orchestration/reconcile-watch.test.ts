import { describe, expect, it } from 'vitest';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { jobApi } from '../../../lib/trainjob/build.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * The reconciler between its passes (reconcile.ts answerFromWatch through wake.ts): a job that
 * completes is answered from its watch event. Object-literal fakes stand in for the cluster and
 * Step Functions (the watch runs against the simulator and a real kube-apiserver in the
 * ClusterGateway contract, and the whole path in test/e2e/reconcile-wake.test.ts).
 */
const API: JobApi = jobApi('trainer-v2.2');
const RUN_ID = 'run-bbbbbbbbbbbbbbbbbbbb';

function trainJob(over: {
  status?: Record<string, unknown>;
  annotations?: Record<string, string>;
}): K8sObject {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: RUN_ID,
      namespace: 'team-a',
      uid: 'u1',
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { [LABEL.runId]: RUN_ID },
      annotations: over.annotations ?? {},
    },
    spec: { suspend: false },
    status: over.status ?? {},
  };
}

const running = trainJob({ annotations: { [ANNOTATION.completionToken]: 'tok-c' } });
const complete = { conditions: [{ type: 'Complete', status: 'True', message: 'done' }] };
const failed = { conditions: [{ type: 'Failed', status: 'True', reason: 'TrainingFailed' }] };

function setup(events: K8sObject[], opts: { failSend?: boolean } = {}) {
  const calls: string[] = [];
  const gateway = {
    listAdmissionGates: async () => [],
    listPods: async () => [],
    listManagedJobs: async () => [running],
    async watchManagedJobs(_api, _timeout, onJob, callOpts) {
      for (const e of events) if (onJob(e) === 'stop') return 'stopped';
      await new Promise<void>((r) => callOpts?.signal?.addEventListener('abort', () => r(), { once: true }));
      return 'ended';
    },
    annotateJob: async (_api: JobApi, ns: string, name: string, ann: Record<string, string | null>) => {
      calls.push(`annotate ${ns}/${name} ${JSON.stringify(ann)}`);
      return running;
    },
    recordEvent: async () => undefined,
  } as Partial<ClusterGateway> as ClusterGateway;
  const workflow = {
    status: async () => 'RUNNING',
    sendTaskSuccess: async (token: string, output: { status: string; name: string }) => {
      if (opts.failSend) throw new Error('Step Functions unreachable');
      calls.push(`success ${token} ${output.status} ${output.name}`);
      return true;
    },
    sendTaskFailure: async (token: string) => {
      calls.push(`failure ${token}`);
      return true;
    },
    sendTaskHeartbeat: async () => true,
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
    clock: { now: () => new Date('2026-01-02T00:00:00Z') },
    log: (line) => lines.push(line),
  });
  return { reconciler, calls, lines };
}

describe('reconciler: answers between passes', () => {
  it("answers a completed job's wait from its watch event, clears the token, and counts it in the next pass", async () => {
    const { reconciler, calls } = setup([
      trainJob({ status: complete, annotations: { [ANNOTATION.completionToken]: 'tok-c' } }),
    ]);
    await reconciler.tick();
    calls.length = 0;

    const why = await reconciler.waitForJobChange(50);

    expect(why).toBe('period');
    expect(calls).toEqual([
      `success tok-c succeeded ${RUN_ID}`,
      `annotate team-a/${RUN_ID} {"${ANNOTATION.completionToken}":null}`,
    ]);
    const report = await reconciler.tick();
    expect(report.answered).toBe(1);
  });

  it('a failed job is left to the next pass (its pods tell what failed), which starts at once', async () => {
    const { reconciler, calls } = setup([
      trainJob({ status: failed, annotations: { [ANNOTATION.completionToken]: 'tok-c' } }),
    ]);
    await reconciler.tick();
    calls.length = 0;

    expect(await reconciler.waitForJobChange(60_000)).toBe('changed');
    expect(calls).toEqual([]);
  });

  it('an answer that cannot be sent is logged and ends the wait, so the next pass answers', async () => {
    const { reconciler, lines } = setup(
      [trainJob({ status: complete, annotations: { [ANNOTATION.completionToken]: 'tok-c' } })],
      { failSend: true },
    );
    await reconciler.tick();

    expect(await reconciler.waitForJobChange(60_000)).toBe('changed');
    expect(lines.filter((l) => l.level === 'ERROR').map((l) => l.msg)).toEqual([
      'answer between passes failed; the next pass answers',
    ]);
  });
});
