import { describe, expect, it } from 'vitest';
import type { JobKind } from '../../../lib/trainjob/kinds.ts';
import { type NodePod, nodePod, POD_LABEL } from '../../../lib/trainjob/node-pods.ts';
import type { K8sObject } from '../../../lib/trainjob/types.ts';

const JOB = 'run-aaaaaaaaaaaaaaaaaaaa';

function pod(
  name: string,
  labels: Record<string, string>,
  extra: { containers?: string[]; created?: string; deleting?: boolean } = {},
): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'team',
      labels,
      creationTimestamp: extra.created ?? '2026-12-01T10:00:00Z',
      ...(extra.deleting ? { deletionTimestamp: '2026-12-01T10:05:00Z' } : {}),
    },
    spec: { containers: (extra.containers ?? ['node']).map((n) => ({ name: n })) },
  } as K8sObject;
}

const trainer = (i: number, extra: Parameters<typeof pod>[2] = {}, job = JOB, set = 'node') =>
  pod(
    `${job}-${set}-0-${i}-x${extra.created?.slice(-3, -1) ?? ''}`,
    {
      [POD_LABEL.jobsetName]: job,
      [POD_LABEL.replicatedJob]: set,
      [POD_LABEL.completionIndex]: String(i),
    },
    extra,
  );

const legacy = (type: string, i: number, container: string) =>
  pod(
    `${JOB}-${type}-${i}`,
    { [POD_LABEL.operatorJobName]: JOB, [POD_LABEL.replicaType]: type, [POD_LABEL.replicaIndex]: String(i) },
    { containers: [container] },
  );

describe('nodePod', () => {
  it.each<[string, JobKind, K8sObject[], number, NodePod | undefined]>([
    [
      'TrainJob node 0',
      'TrainJob',
      [trainer(1), trainer(0)],
      0,
      { pod: `${JOB}-node-0-0-x`, container: 'node' },
    ],
    [
      'TrainJob node 1',
      'TrainJob',
      [trainer(1), trainer(0)],
      1,
      { pod: `${JOB}-node-0-1-x`, container: 'node' },
    ],
    ['TrainJob: no pod for the node yet', 'TrainJob', [trainer(0)], 1, undefined],
    [
      'TrainJob: another job’s pod is not ours',
      'TrainJob',
      [trainer(0, {}, 'run-bbbbbbbbbbbbbbbbbbbb')],
      0,
      undefined,
    ],
    [
      'TrainJob: an initializer pod is no node',
      'TrainJob',
      [trainer(0, {}, JOB, 'dataset-initializer')],
      0,
      undefined,
    ],
    [
      'TrainJob: a replaced pod (newer) wins',
      'TrainJob',
      [trainer(0, { created: '2026-12-01T10:00:01Z' }), trainer(0, { created: '2026-12-01T10:03:09Z' })],
      0,
      { pod: `${JOB}-node-0-0-x09`, container: 'node' },
    ],
    [
      'TrainJob: a pod being deleted loses to one that is not',
      'TrainJob',
      [
        trainer(0, { created: '2026-12-01T10:09:09Z', deleting: true }),
        trainer(0, { created: '2026-12-01T10:01:01Z' }),
      ],
      0,
      { pod: `${JOB}-node-0-0-x01`, container: 'node' },
    ],
    [
      'TrainJob: a custom runtime with one container named otherwise',
      'TrainJob',
      [trainer(0, { containers: ['trainer'] })],
      0,
      { pod: `${JOB}-node-0-0-x`, container: 'trainer' },
    ],
    [
      'TrainJob: several containers, the trainer one is node',
      'TrainJob',
      [trainer(0, { containers: ['sidecar', 'node'] })],
      0,
      { pod: `${JOB}-node-0-0-x`, container: 'node' },
    ],
    [
      'PyTorchJob node 0 is the master',
      'PyTorchJob',
      [legacy('worker', 0, 'pytorch'), legacy('master', 0, 'pytorch')],
      0,
      { pod: `${JOB}-master-0`, container: 'pytorch' },
    ],
    [
      'PyTorchJob node 2 is worker 1',
      'PyTorchJob',
      [legacy('master', 0, 'pytorch'), legacy('worker', 0, 'pytorch'), legacy('worker', 1, 'pytorch')],
      2,
      { pod: `${JOB}-worker-1`, container: 'pytorch' },
    ],
    [
      'PyTorchJob: replica types in upper case too',
      'PyTorchJob',
      [legacy('Master', 0, 'pytorch')],
      0,
      { pod: `${JOB}-Master-0`, container: 'pytorch' },
    ],
    ['PyTorchJob: no master yet is no node 0', 'PyTorchJob', [legacy('worker', 0, 'pytorch')], 0, undefined],
    [
      'MPIJob node 0 is the launcher',
      'MPIJob',
      [legacy('launcher', 0, 'mpi'), legacy('worker', 0, 'mpi')],
      0,
      { pod: `${JOB}-launcher-0`, container: 'mpi' },
    ],
    [
      'TFJob node 1 is worker 1',
      'TFJob',
      [legacy('worker', 0, 'tensorflow'), legacy('worker', 1, 'tensorflow')],
      1,
      { pod: `${JOB}-worker-1`, container: 'tensorflow' },
    ],
  ])('%s', (_name, kind, pods, node, expected) => {
    expect(nodePod(kind, JOB, pods, node)).toEqual(expected);
  });
});
