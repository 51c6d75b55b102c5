import { describe, expect, it } from 'vitest';
import { makeReconciler } from '../../../lib/orchestration/reconcile.ts';
import type { ClusterGateway, JobApi, WorkflowEngine } from '../../../lib/ports.ts';
import type { RunRecords } from '../../../lib/run/records.ts';
import { ANNOTATION, LABEL } from '../../../lib/trainjob/labels.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * Several clusters in one tick: a slow cluster (its LIST hangs until released) must not delay the
 * answers of another. Object-literal fakes for the clusters and Step Functions.
 */
const API = {
  group: 'trainer.kubeflow.org',
  version: 'v1alpha1',
  plural: 'trainjobs',
  kind: 'TrainJob',
} as JobApi;

/** A finished TrainJob waiting on its completion token: the reconciler answers it at once. */
function finishedJob(cluster: string): K8sObject {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name: `run-${cluster}`,
      namespace: 'team-a',
      uid: `u-${cluster}`,
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { [LABEL.runId]: `run-${cluster}` },
      annotations: { [ANNOTATION.completionToken]: `token-${cluster}` },
    },
    spec: { suspend: false },
    status: { conditions: [{ type: 'Complete', status: 'True', reason: 'JobsCompleted' }] },
  };
}

describe('reconciler: clusters in parallel', () => {
  it("answers a fast cluster's runs while a slow cluster's LIST is still out", async () => {
    // Prepare
    const events: string[] = [];
    let releaseSlow: () => void = () => undefined;
    const slowListed = new Promise<void>((resolve) => {
      releaseSlow = resolve;
    });
    const gatewayOf = (name: string, hang: boolean) =>
      ({
        listAdmissionGates: async () => [],
        listPods: async () => [],
        listManagedJobs: async () => {
          if (hang) await Promise.race([slowListed, new Promise((r) => setTimeout(r, 2000))]);
          events.push(`listed ${name}`);
          return [finishedJob(name)];
        },
        annotateJob: async () => undefined,
      }) as unknown as ClusterGateway;
    const workflow = {
      sendTaskSuccess: async (token: string) => {
        events.push(`answered ${token}`);
        if (token === 'token-fast') releaseSlow();
        return true;
      },
      sendTaskFailure: async () => true,
      sendTaskHeartbeat: async () => true,
      status: async () => 'RUNNING',
    } as unknown as WorkflowEngine;
    const records = { getMany: async () => new Map() } as unknown as RunRecords;
    const reconciler = makeReconciler({
      clusters: () => [
        { name: 'slow', gateway: gatewayOf('slow', true), jobApis: async () => [API] },
        { name: 'fast', gateway: gatewayOf('fast', false), jobApis: async () => [API] },
      ],
      workflow,
      records,
      clock: { now: () => new Date('2026-01-02T00:00:00Z') },
    });

    // Act
    const report = await reconciler.tick();

    // Assess: the slow cluster was listed only after the fast one's run was answered
    expect(events).toEqual(['listed fast', 'answered token-fast', 'listed slow', 'answered token-slow']);
    expect(report).toMatchObject({ answered: 2, errors: 0 });
  });
});
