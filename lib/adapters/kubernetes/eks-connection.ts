import type { RequestOptions } from 'node:https';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import type { Clock } from '../../ports.ts';
import { type EksTokenProvider, makeEksTokenProvider } from './eks-token.ts';
import type { KubeConnection } from './gateway.ts';

/**
 * The connection to an EKS cluster whose endpoint and CA are known (Gantry's cluster configuration
 * `eks.endpoint` / `eks.caData`): a bearer token presigned locally, no AWS call. Kept apart from
 * kubeconfig.ts so that this path loads neither the EKS SDK (DescribeCluster) nor client-node's
 * KubeConfig module: for-cluster.ts imports those only when the configuration lacks endpoint and CA.
 */

export interface EksClusterEndpoint {
  /** https://… API server endpoint. */
  server: string;
  /** Base64 PEM of the cluster CA (DescribeCluster `certificateAuthority.data`). */
  caData: string;
}

/** A KubeConnection for an EKS cluster; also exposes its token provider (e.g. to write a kubeconfig). */
export interface EksConnection extends KubeConnection {
  readonly clusterName: string;
  readonly endpoint: EksClusterEndpoint;
  readonly tokens: EksTokenProvider;
}

export interface EksConnectionDeps {
  clusterName: string;
  region: string;
  /** Endpoint and CA, e.g. from Gantry's cluster configuration (resolved at deploy time). */
  endpoint: EksClusterEndpoint;
  /** Credentials that sign the token (in Lambda: the execution role's, e.g. `fromEnv()`). */
  credentials: AwsCredentialIdentityProvider;
  clock?: Clock;
}

/** The connection to an EKS cluster whose endpoint and CA are known: no AWS call, no EKS SDK. */
export function eksConnection(deps: EksConnectionDeps): EksConnection {
  const { clusterName, endpoint } = deps;
  const tokens = makeEksTokenProvider({
    clusterName,
    region: deps.region,
    credentials: deps.credentials,
    ...(deps.clock ? { clock: deps.clock } : {}),
  });
  const ca = Buffer.from(endpoint.caData, 'base64');
  const cluster = {
    name: clusterName,
    server: endpoint.server,
    caData: endpoint.caData,
    skipTLSVerify: false,
  };
  return {
    clusterName,
    endpoint,
    tokens,
    getCurrentCluster: () => cluster,
    async applyToHTTPSOptions(opts: RequestOptions) {
      opts.ca = ca;
      opts.headers = { ...opts.headers, Authorization: `Bearer ${await tokens.getToken()}` };
    },
  };
}
