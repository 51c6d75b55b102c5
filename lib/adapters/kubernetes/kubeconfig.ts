import { type Cluster, DescribeClusterCommand, type EKSClient } from '@aws-sdk/client-eks';
import type { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import {
  AwsUnavailableError,
  ClusterAccessDeniedError,
  ClusterUnavailableError,
  NotFoundError,
} from '../../errors.ts';
import type { CallOptions, Clock } from '../../ports.ts';
import { type EksClusterEndpoint, type EksConnection, eksConnection } from './eks-connection.ts';

/**
 * Where the Kubernetes gateway connects, two ways:
 * - local use: a kubeconfig (YAML text or a file path) read by @kubernetes/client-node's KubeConfig,
 *   so exec plugins, client certificates, tokens and `as` (impersonation) work as in kubectl;
 * - EKS: `DescribeCluster` for the endpoint and CA, and a bearer token presigned locally
 *   (eks-token.ts). This path never loads client-node's KubeConfig module (its auth providers, YAML
 *   parser and undici weigh more than the rest of the gateway), so a Lambda bundle stays small.
 */

/** A kubeconfig from YAML text, or from the file at that path. Loads client-node's config module on demand. */
export async function kubeConfigFromYaml(
  source: string,
  opts: { context?: string } = {},
): Promise<KubeConfig> {
  const { KubeConfig } = await import('@kubernetes/client-node/dist/config.js');
  const kc = new KubeConfig();
  if (/\n/.test(source) || /^\s*(apiVersion|kind|clusters)\s*:/.test(source)) kc.loadFromString(source);
  else kc.loadFromFile(source);
  if (opts.context) kc.setCurrentContext(opts.context);
  if (!kc.getCurrentCluster()) throw new Error('kubeconfig has no current context / cluster');
  return kc;
}

export type { EksClusterEndpoint, EksConnection, EksConnectionDeps } from './eks-connection.ts';
export { eksConnection } from './eks-connection.ts';

export interface EksKubeConfigDeps {
  clusterName: string;
  region: string;
  /** The EKS client for DescribeCluster; its credentials sign the token unless `credentials` is given. */
  eks: Pick<EKSClient, 'send' | 'config'>;
  credentials?: AwsCredentialIdentityProvider;
  clock?: Clock;
}

/** Endpoint and CA of an ACTIVE cluster, translated to Gantry's errors. */
export async function describeEksCluster(
  eks: Pick<EKSClient, 'send'>,
  clusterName: string,
  opts?: CallOptions,
): Promise<EksClusterEndpoint> {
  let c: Cluster | undefined;
  try {
    const out = await eks.send(
      new DescribeClusterCommand({ name: clusterName }),
      opts?.signal ? { abortSignal: opts.signal } : {},
    );
    c = out.cluster;
  } catch (err) {
    throw awsError(err, `eks:DescribeCluster ${clusterName}`);
  }
  if (!c?.endpoint || !c.certificateAuthority?.data) {
    // Endpoint and CA exist only once the cluster is ACTIVE (CREATING: not yet).
    throw new ClusterUnavailableError(
      `EKS cluster ${clusterName} has no endpoint/CA yet (status ${c?.status ?? 'unknown'})`,
    );
  }
  return { server: c.endpoint, caData: c.certificateAuthority.data };
}

/**
 * The connection to an EKS cluster from `DescribeCluster` (endpoint + CA), then a bearer token
 * presigned per 14 minutes. Pass it to makeKubernetesGateway as a factory
 * (`kubeConfig: (opts) => eksKubeConfig({...}, opts)`) so the call happens on first use, not at import.
 */
export async function eksKubeConfig(deps: EksKubeConfigDeps, opts?: CallOptions): Promise<EksConnection> {
  const endpoint = await describeEksCluster(deps.eks, deps.clusterName, opts);
  return eksConnection({
    clusterName: deps.clusterName,
    region: deps.region,
    endpoint,
    credentials: deps.credentials ?? (deps.eks.config.credentials as AwsCredentialIdentityProvider),
    ...(deps.clock ? { clock: deps.clock } : {}),
  });
}

/** AWS SDK failure of DescribeCluster → Gantry's error (retryable only when AWS says it may pass). */
function awsError(err: unknown, what: string): Error {
  const e = err as {
    name?: string;
    message?: string;
    $metadata?: { httpStatusCode?: number };
    $retryable?: unknown;
  };
  const status = e.$metadata?.httpStatusCode;
  const message = `${what}: ${e.name ?? 'Error'}: ${e.message ?? String(err)}`;
  if (e.name === 'ResourceNotFoundException' || status === 404)
    return new NotFoundError(message, { cause: err });
  if (e.name === 'AccessDeniedException' || status === 401 || status === 403) {
    return new ClusterAccessDeniedError(message, { cause: err });
  }
  if (e.name === 'AbortError' || e.name === 'TimeoutError')
    return new ClusterUnavailableError(message, { cause: err });
  if (e.$retryable || status === undefined || status === 429 || status >= 500) {
    return new AwsUnavailableError(message, { cause: err });
  }
  return err instanceof Error ? err : new Error(message, { cause: err });
}
