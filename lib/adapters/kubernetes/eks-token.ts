import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentityProvider, Checksum, SourceData } from '@smithy/types';
import type { Clock } from '../../ports.ts';

/**
 * The EKS bearer token, computed locally the way `aws eks get-token` does
 * (awscli/customizations/eks/get_token.py): a presigned STS GetCallerIdentity URL with the signed
 * header `x-k8s-aws-id: <cluster>`, `X-Amz-Expires=60`, encoded as `k8s-aws-v1.` + base64url (no
 * padding). EKS accepts it for 15 minutes after signing; the CLI and this provider treat it as valid
 * for 14 and sign a new one when less than a minute of that remains. No AWS call is made here.
 */

export const TOKEN_PREFIX = 'k8s-aws-v1.';
/** How long a token is used, counted from its signing time (the CLI's `expirationTimestamp`). */
export const TOKEN_LIFETIME_MS = 14 * 60_000;
/** A cached token is replaced when less than this remains of its life (so at 13 minutes). */
export const TOKEN_REFRESH_MARGIN_MS = 60_000;
/** `X-Amz-Expires` of the presigned URL, as the CLI sets it (`URL_TIMEOUT`). */
export const PRESIGN_EXPIRES_SECONDS = 60;
export const CLUSTER_ID_HEADER = 'x-k8s-aws-id';

export interface EksTokenProviderDeps {
  clusterName: string;
  region: string;
  credentials: AwsCredentialIdentityProvider;
  clock?: Clock;
}

export interface EksToken {
  token: string;
  /** When the provider stops using it (signing time + 14 min, or earlier if the credentials expire). */
  expiresAt: Date;
}

export interface EksTokenProvider {
  /** A valid bearer token; signs a new one only when the cached one is within a minute of its end. */
  getToken(): Promise<string>;
  /** The same, with its expiry (for a kubeconfig exec credential or logs). */
  getTokenWithExpiry(): Promise<EksToken>;
}

/** SHA-256 / HMAC-SHA-256 on node:crypto in the shape @smithy/signature-v4 expects. */
export class NodeSha256 implements Checksum {
  private readonly secret: Uint8Array | undefined;
  private hash: Hash | Hmac;
  constructor(secret?: SourceData) {
    this.secret = secret === undefined ? undefined : toBytes(secret);
    this.hash = this.fresh();
  }
  update(chunk: Uint8Array): void {
    this.hash.update(chunk);
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {
    this.hash = this.fresh();
  }
  private fresh(): Hash | Hmac {
    return this.secret ? createHmac('sha256', this.secret) : createHash('sha256');
  }
}

function toBytes(data: SourceData): Uint8Array {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
}

/** The regional STS host (the CLI uses the regional endpoint); China regions live under amazonaws.com.cn. */
export function stsHost(region: string): string {
  return `sts.${region}.amazonaws.com${region.startsWith('cn-') ? '.cn' : ''}`;
}

/** RFC 3986 encoding as SigV4 canonicalises query values (so the URL carries exactly what was signed). */
function uriEscape(value: string): string {
  return encodeURIComponent(value).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** Turn a presigned URL into the bearer token. */
export function tokenFromUrl(url: string): string {
  return TOKEN_PREFIX + Buffer.from(url, 'utf8').toString('base64url');
}

export function makeEksTokenProvider(deps: EksTokenProviderDeps): EksTokenProvider {
  const clock = deps.clock ?? { now: () => new Date() };
  const host = stsHost(deps.region);

  let cached: EksToken | undefined;
  let inFlight: Promise<EksToken> | undefined;

  async function sign(): Promise<EksToken> {
    const signingDate = clock.now();
    const credentials = await deps.credentials();
    // One resolution of the credentials per token: the signer gets exactly what the expiry is based on.
    const signer = new SignatureV4({ service: 'sts', region: deps.region, credentials, sha256: NodeSha256 });
    const presigned = await signer.presign(
      {
        method: 'GET',
        protocol: 'https:',
        hostname: host,
        path: '/',
        query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
        headers: { host, [CLUSTER_ID_HEADER]: deps.clusterName },
      },
      { expiresIn: PRESIGN_EXPIRES_SECONDS, signingDate },
    );
    const params = presigned.query ?? {};
    const query = Object.keys(params)
      .sort()
      .map((k) => `${uriEscape(k)}=${uriEscape(String(params[k]))}`)
      .join('&');
    const url = `https://${host}/?${query}`;
    let expiresAt = signingDate.getTime() + TOKEN_LIFETIME_MS;
    // Session credentials that end sooner make the URL invalid sooner.
    if (credentials.expiration) expiresAt = Math.min(expiresAt, credentials.expiration.getTime());
    return { token: tokenFromUrl(url), expiresAt: new Date(expiresAt) };
  }

  function fresh(t: EksToken | undefined): t is EksToken {
    return t !== undefined && t.expiresAt.getTime() - clock.now().getTime() >= TOKEN_REFRESH_MARGIN_MS;
  }

  async function getTokenWithExpiry(): Promise<EksToken> {
    if (fresh(cached)) return cached;
    // Concurrent callers share one signing.
    inFlight ??= sign().then(
      (t) => {
        cached = t;
        inFlight = undefined;
        return t;
      },
      (err: unknown) => {
        inFlight = undefined;
        throw err;
      },
    );
    return inFlight;
  }

  return {
    getTokenWithExpiry,
    getToken: async () => (await getTokenWithExpiry()).token,
  };
}
