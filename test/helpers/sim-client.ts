import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { startClusterSimulator } from '../../local/simulator/index.ts';

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
