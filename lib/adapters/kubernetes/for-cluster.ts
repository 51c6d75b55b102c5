import type { ClusterConfig } from '../../config.ts';
import type { ClusterGateway } from '../../ports.ts';
import { eksConnection } from './eks-connection.ts';
import { makeKubernetesGateway } from './gateway.ts';
import type { KubeConnection } from './transport.ts';

/**
 * The gateway for one configured cluster: a kubeconfig (local use, non-EKS clusters) or EKS
 * (endpoint and CA from the configuration, or DescribeCluster; an STS-presigned bearer token). The
 * connection is made on first use. With `eks.endpoint` and `eks.caData` configured (the deployed
 * case, see deploy/serverless/config/dev.json) neither the EKS SDK nor kubeconfig.ts is loaded: both
 * are dynamic imports on the other paths only.
 */
export function gatewayForCluster(cluster: ClusterConfig): ClusterGateway {
  return makeKubernetesGateway({ kubeConfig: connectionFor(cluster) });
}

/** The connection factory of a configured cluster (called on first use); shared by every client of it. */
export function connectionFor(cluster: ClusterConfig): () => Promise<KubeConnection> {
  const { eks, kubeconfig } = cluster;
  if (kubeconfig) {
    return async () => (await import('./kubeconfig.ts')).kubeConfigFromYaml(kubeconfig);
  }
  if (!eks) throw new Error(`cluster ${cluster.name} has neither eks nor kubeconfig`);
  const { endpoint, caData } = eks;
  if (endpoint && caData) {
    // Known endpoint and CA: no AWS call and no EKS SDK; the token is signed with the function's own credentials.
    return async () => {
      const { fromEnv } = await import('@aws-sdk/credential-provider-env');
      return eksConnection({
        clusterName: eks.clusterName,
        region: eks.region,
        endpoint: { server: endpoint, caData },
        credentials: fromEnv(),
      });
    };
  }
  return async () => {
    const [{ EKSClient }, { eksKubeConfig }] = await Promise.all([
      import('@aws-sdk/client-eks'),
      import('./kubeconfig.ts'),
    ]);
    return eksKubeConfig({
      clusterName: eks.clusterName,
      region: eks.region,
      eks: new EKSClient({ region: eks.region }),
    });
  };
}
