import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { SIM_ANNOTATIONS, startClusterSimulator } from '../../local/simulator/index.ts';

/** TrainJob's group, version and plural, for CustomObjectsApi calls. */
export const TRAINER = { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs' };

/**
 * The cluster simulator (by default Trainer 2.3 and one 8-GPU ClusterQueue for team-a; `opts`
 * override) and a CustomObjectsApi client that reaches it through its kubeconfig, as Gantry's
 * gateway does.
 */
export async function startSimulatorWithClient(opts: Parameters<typeof startClusterSimulator>[0]) {
  const sim = await startClusterSimulator({
    trainerVersion: '2.3',
    log: () => {},
    queues: [
      { name: 'team-a', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '512Gi' } },
    ],
    ...opts,
  });
  const kc = new KubeConfig();
  kc.loadFromString(sim.kubeconfigYaml());
  return { sim, custom: kc.makeApiClient(CustomObjectsApi) };
}

/**
 * A Gantry-managed TrainJob of one 1-GPU node in team-a's queue, its training `durationSeconds`
 * long on the simulator's clock, with `env` and the trainer's `args`.
 */
export function simTrainJob(
  name: string,
  env: Record<string, string>,
  { durationSeconds, args }: { durationSeconds: number; args?: string[] },
) {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'TrainJob',
    metadata: {
      name,
      labels: { 'app.kubernetes.io/managed-by': 'gantry', 'kueue.x-k8s.io/queue-name': 'team-a' },
      annotations: { [SIM_ANNOTATIONS.duration]: String(durationSeconds) } as Record<string, string>,
    },
    spec: {
      runtimeRef: { name: 'torch-distributed' },
      trainer: {
        image: 'ghcr.io/acme/train:1.0',
        numNodes: 1,
        resourcesPerNode: { requests: { 'nvidia.com/gpu': 1 } },
        env: Object.entries(env).map(([n, value]) => ({ name: n, value })),
        ...(args ? { args } : {}),
      },
    },
  };
}
