import { describe, expect, it } from 'vitest';
import { listAll } from '../../../lib/adapters/kubernetes/calls.ts';
import { trimGate, trimJob, trimPod } from '../../../lib/adapters/kubernetes/trim.ts';
import { interpretAdmission } from '../../../lib/admission/interpret.ts';
import { attemptOf, podDisruption } from '../../../lib/trainjob/disruption.ts';
import { DEFAULT_POD_HEALTH, podHealth, podsByRun } from '../../../lib/trainjob/pod-health.ts';
import { toRunPhase } from '../../../lib/trainjob/status.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

/**
 * What the gateway keeps of listed objects (lib/adapters/kubernetes/trim.ts): whatever Gantry reads
 * of a pod, a Workload or a job gives the same answer on the trimmed object as on the whole one,
 * and the bulk (specs, pod templates, managedFields) is gone.
 */

const T = '2026-12-01T08:00:00Z';
const managedFields = [
  { manager: 'kubelet', operation: 'Update', fieldsV1: { 'f:status': { 'f:phase': {} } } },
];

function pod(over: { status?: Record<string, unknown>; labels?: Record<string, string> } = {}): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'run-a-node-0-0',
      namespace: 'team-a',
      uid: 'p1',
      creationTimestamp: T,
      labels: { 'gantry.dev/run-id': 'run-a', 'gantry.dev/attempt': '2', ...over.labels },
      annotations: { big: 'x'.repeat(1000) },
      managedFields,
      ...({ deletionTimestamp: T } as object),
    } as K8sObject['metadata'],
    spec: {
      nodeName: 'ip-10-0-1-2',
      containers: [{ name: 'node', image: 'train:1', env: [{ name: 'A', value: 'b' }], resources: {} }],
      volumes: [{ name: 'data', emptyDir: {} }],
    },
    status: over.status ?? {
      phase: 'Pending',
      conditions: [
        {
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message: '0/4 nodes',
          lastTransitionTime: T,
        },
        { type: 'DisruptionTarget', status: 'True', reason: 'PreemptionByScheduler', message: 'preempted' },
        { type: 'Initialized', status: 'True', lastProbeTime: null, lastTransitionTime: T },
      ],
      containerStatuses: [
        {
          name: 'node',
          ready: false,
          restartCount: 6,
          image: 'train:1',
          imageID: 'sha256:abc',
          containerID: 'containerd://1',
          state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off 5m' } },
          lastState: { terminated: { exitCode: 1, reason: 'Error' } },
        },
      ],
      initContainerStatuses: [
        { name: 'init', state: { waiting: { reason: 'ErrImagePull' } }, image: 'init:1' },
      ],
      hostIP: '10.0.0.1',
      podIPs: [{ ip: '10.0.0.2' }],
    },
  };
}

function workload(): K8sObject {
  return {
    apiVersion: 'kueue.x-k8s.io/v1beta2',
    kind: 'Workload',
    metadata: {
      name: 'trainjob-run-a-1',
      namespace: 'team-a',
      uid: 'w1',
      labels: { 'kueue.x-k8s.io/job-uid': 'j1' },
      ownerReferences: [
        { apiVersion: 'trainer.kubeflow.org/v1alpha1', kind: 'TrainJob', name: 'run-a', uid: 'j1' },
      ],
      managedFields,
    } as K8sObject['metadata'],
    spec: {
      active: false,
      queueName: 'team-a-queue',
      podSets: [
        { name: 'node', count: 4, template: { spec: { containers: [{ name: 'node', image: 'x' }] } } },
      ],
    },
    status: {
      conditions: [
        { type: 'QuotaReserved', status: 'True', reason: 'QuotaReserved', lastTransitionTime: T },
        {
          type: 'Evicted',
          status: 'True',
          reason: 'Deactivated',
          message: 'by an admin',
          lastTransitionTime: T,
        },
      ],
      admissionChecks: [{ name: 'prov', state: 'Pending', message: 'waiting for capacity' }],
    },
  };
}

describe('trimmed listed objects', () => {
  it('a pod keeps what health, disruption evidence, attempts and the logs route read; not its spec or managedFields', () => {
    const whole = pod();
    const kept = trimPod(whole);
    const now = new Date('2026-12-01T09:00:00Z');

    expect(podHealth([kept], now, DEFAULT_POD_HEALTH)).toEqual(podHealth([whole], now, DEFAULT_POD_HEALTH));
    expect(podDisruption([kept], 2)).toEqual(podDisruption([whole], 2));
    expect(podDisruption([kept], 2)?.message).toContain('on node ip-10-0-1-2');
    expect(attemptOf(kept)).toBe(2);
    expect([...podsByRun([kept]).keys()]).toEqual(['run-a']);
    expect(kept.spec).toEqual({ containers: [{ name: 'node' }], nodeName: 'ip-10-0-1-2' });
    expect(kept.metadata).toMatchObject({
      name: 'run-a-node-0-0',
      namespace: 'team-a',
      deletionTimestamp: T,
    });
    expect(kept.metadata).not.toHaveProperty('managedFields');
    expect(kept.metadata).not.toHaveProperty('annotations');
    const status = kept.status as {
      conditions: Array<{ type: string }>;
      containerStatuses: object[];
      initContainerStatuses: object[];
    };
    // What is wrong, and DisruptionTarget, stay; a condition that is simply True does not.
    expect(status.conditions.map((c) => c.type)).toEqual(['PodScheduled', 'DisruptionTarget']);
    expect(status).not.toHaveProperty('podIPs');
    expect(status.containerStatuses[0]).not.toHaveProperty('imageID');
    expect(status.containerStatuses[0]).toMatchObject({
      restartCount: 6,
      lastState: { terminated: { exitCode: 1 } },
    });
    expect(status.initContainerStatuses[0]).toEqual({
      name: 'init',
      state: { waiting: { reason: 'ErrImagePull' } },
    });
  });

  it('a Workload keeps its owners, spec.active and status; not its pod templates or managedFields', () => {
    const whole = workload();
    const kept = trimGate(whole);

    expect(interpretAdmission(kept)).toEqual(interpretAdmission(whole));
    expect(interpretAdmission(kept).state).not.toBe('Unknown');
    expect(kept.metadata.ownerReferences).toEqual(whole.metadata.ownerReferences);
    expect(kept.spec).toEqual({ active: false, queueName: 'team-a-queue' });
    // Its priority (the WorkloadPriorityClass value Kueue copied) stays: Gantry's queue order reads it.
    expect(trimGate({ ...whole, spec: { ...whole.spec, priority: 100 } }).spec).toMatchObject({
      priority: 100,
    });
    expect(kept.status).toEqual(whole.status);
    expect(kept.metadata).not.toHaveProperty('managedFields');
  });

  it('a PodGroup keeps spec.minMember and its phase', () => {
    const whole: K8sObject = {
      apiVersion: 'scheduling.x-k8s.io/v1alpha1',
      kind: 'PodGroup',
      metadata: { name: 'run-a', namespace: 'team-a', uid: 'g1' },
      spec: { minMember: 4, minResources: { cpu: '32' } },
      status: { phase: 'Pending', scheduled: 1 },
    };
    const kept = trimGate(whole);
    expect(interpretAdmission(kept)).toEqual(interpretAdmission(whole));
    expect(kept.spec).toEqual({ minMember: 4 });
  });

  it('a job keeps everything but its managedFields', () => {
    const whole: K8sObject = {
      apiVersion: 'trainer.kubeflow.org/v1alpha1',
      kind: 'TrainJob',
      metadata: {
        name: 'run-a',
        namespace: 'team-a',
        uid: 'j1',
        annotations: { a: 'b' },
        managedFields,
      } as K8sObject['metadata'],
      spec: { suspend: false, trainer: { numNodes: 4 } },
      status: { conditions: [{ type: 'Complete', status: 'True' }] },
    };
    const kept = trimJob(whole);
    const { managedFields: _dropped, ...metadata } = whole.metadata as K8sObject['metadata'] & {
      managedFields: unknown;
    };
    expect(kept).toEqual({ ...whole, metadata });
    expect(toRunPhase(kept)).toEqual(toRunPhase(whole));
  });

  it('listAll trims each page as it arrives and drops what the trimmer refuses', async () => {
    const pages = [
      {
        items: [{ metadata: { name: 'a' }, spec: { big: 1 } }, { metadata: { name: 'x' } }],
        metadata: { continue: '1' },
      },
      { items: [{ metadata: { name: 'b' }, spec: { big: 2 } }], metadata: {} },
    ];
    const seen: string[] = [];
    let served = 0;
    const out = await listAll(
      'list things',
      async (cont) => {
        // The page before this one was already trimmed: nothing waits for the whole list.
        expect(seen).toHaveLength(cont === undefined ? 0 : 2);
        return pages[served++] as (typeof pages)[number];
      },
      'v1',
      'Thing',
      undefined,
      (o) => {
        seen.push(o.metadata.name);
        return o.metadata.name === 'x' ? undefined : { ...o, spec: {} };
      },
    );
    expect(out).toEqual([
      { apiVersion: 'v1', kind: 'Thing', metadata: { name: 'a' }, spec: {} },
      { apiVersion: 'v1', kind: 'Thing', metadata: { name: 'b' }, spec: {} },
    ]);
  });
});
