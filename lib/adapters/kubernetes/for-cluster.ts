import type { ClusterConfig } from '../../config.ts';
import type { ClusterGateway } from '../../ports.ts';
import { makeKubernetesGateway } from './gateway.ts';
import { eksKubeConfig, kubeConfigFromYaml } from './kubeconfig.ts';

/**
 * The gateway for one configured cluster: a kubeconfig (local use, non-EKS clusters) or EKS
 * (DescribeCluster + STS-presigned bearer token). The connection is made on first use.
 */
export function gatewayForCluster(cluster: ClusterConfig, opts: { region: string }): ClusterGateway {
  const { eks, kubeconfig } = cluster;
  if (kubeconfig) return makeKubernetesGateway({ kubeConfig: () => kubeConfigFromYaml(kubeconfig) });
  if (!eks) throw new Error(`cluster ${cluster.name} has neither eks nor kubeconfig`);
  return makeKubernetesGateway({
    kubeConfig: async () => {
      const { EKSClient } = await import('@aws-sdk/client-eks');
      return eksKubeConfig({
        clusterName: eks.clusterName,
        region: eks.region ?? opts.region,
        eks: new EKSClient({ region: eks.region }),
      });
    },
  });
}
