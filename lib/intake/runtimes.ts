import type { GantryConfig } from '../config.ts';
import type { CallOptions, ClusterGateway } from '../ports.ts';
import type { K8sObject } from '../trainjob/types.ts';
import { type Caller, requireTeams } from './tenancy.ts';

export const FRAMEWORK_LABEL = 'trainer.kubeflow.org/framework';

export interface RuntimeSummary {
  cluster: string;
  name: string;
  kind: 'ClusterTrainingRuntime';
  framework?: string;
}

/** The ClusterTrainingRuntimes of a cluster; a cluster without Trainer v2 has none. */
export async function clusterRuntimes(gateway: ClusterGateway, opts?: CallOptions): Promise<K8sObject[]> {
  try {
    return await gateway.listClusterTrainingRuntimes(opts);
  } catch (err) {
    // 404 from the apiserver: the ClusterTrainingRuntime resource is not served (no Trainer v2).
    if (err instanceof Error && err.name === 'NotFoundError') return [];
    throw err;
  }
}

/**
 * The runtimes the caller's teams may use: the ClusterTrainingRuntimes of each team's cluster,
 * narrowed to the team's `runtimes` when the team lists any. The gateway is passed as a function
 * so the Kubernetes client loads only when this runs.
 */
export function makeListRuntimes(deps: {
  config: GantryConfig;
  gateway: (cluster: string) => Promise<ClusterGateway>;
}) {
  return async function listRuntimes(
    input: { caller: Caller },
    opts?: CallOptions,
  ): Promise<{ runtimes: RuntimeSummary[] }> {
    const teams = requireTeams(input.caller, deps.config);
    const byCluster = new Map<string, Array<readonly string[]>>();
    for (const team of teams) {
      const cluster = team.cluster ?? deps.config.defaultCluster ?? (deps.config.clusters[0]?.name as string);
      byCluster.set(cluster, [...(byCluster.get(cluster) ?? []), team.runtimes]);
    }
    const runtimes: RuntimeSummary[] = [];
    for (const [cluster, allowLists] of byCluster) {
      const objects = await clusterRuntimes(await deps.gateway(cluster), opts);
      for (const o of objects) {
        const name = o.metadata.name;
        if (!allowLists.some((allowed) => allowed.length === 0 || allowed.includes(name))) continue;
        const framework = o.metadata.labels?.[FRAMEWORK_LABEL];
        runtimes.push({ cluster, name, kind: 'ClusterTrainingRuntime', ...(framework ? { framework } : {}) });
      }
    }
    runtimes.sort((a, b) => a.cluster.localeCompare(b.cluster) || a.name.localeCompare(b.name));
    return { runtimes };
  };
}
