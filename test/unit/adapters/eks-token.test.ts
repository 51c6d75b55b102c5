import { createHash, createHmac } from 'node:crypto';
import type { RequestOptions } from 'node:https';
import type { EKSClient } from '@aws-sdk/client-eks';
import type { AwsCredentialIdentity } from '@smithy/types';
import { describe, expect, it } from 'vitest';
import { makeEksTokenProvider, stsHost } from '../../../lib/adapters/kubernetes/eks-token.ts';
import { eksConnection, eksKubeConfig } from '../../../lib/adapters/kubernetes/kubeconfig.ts';

/**
 * The EKS token is checked against a SigV4 presigned URL computed here from the specification
 * (canonical request → string to sign → HMAC chain, node:crypto only), not against the signer the
 * code uses. Fixed clock and credentials make every byte predictable.
 */

const T0 = new Date('2026-08-20T10:00:00Z');
const REGION = 'us-west-2';
const CLUSTER = 'gantry-prod';
const CREDS: AwsCredentialIdentity = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  sessionToken: 'IQoJb3JpZ2luX2VjEJ//////////wEaCXVzLXdlc3QtMiJHMEUCIQD+example/token==',
};

// ----- an independent SigV4 query presigner ------------------------------------------------------

/** RFC 3986 unreserved characters stay, everything else is %XX (SigV4 "UriEncode"). */
function uriEncode(s: string): string {
  return Array.from(Buffer.from(s, 'utf8'))
    .map((b) => {
      const c = String.fromCharCode(b);
      return /[A-Za-z0-9\-._~]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
    })
    .join('');
}

const sha256Hex = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const hmac = (key: Buffer | string, s: string) => createHmac('sha256', key).update(s, 'utf8').digest();

function expectedPresignedParams(at: Date, creds: AwsCredentialIdentity, region: string, cluster: string) {
  const amzDate = at
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, ''); // 20260820T100000Z
  const date = amzDate.slice(0, 8);
  const host = `sts.${region}.amazonaws.com`;
  const scope = `${date}/${region}/sts/aws4_request`;
  const params: Record<string, string> = {
    Action: 'GetCallerIdentity',
    Version: '2011-06-15',
    'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
    'X-Amz-Credential': `${creds.accessKeyId}/${scope}`,
    'X-Amz-Date': amzDate,
    'X-Amz-Expires': '60',
    'X-Amz-SignedHeaders': 'host;x-k8s-aws-id',
    ...(creds.sessionToken ? { 'X-Amz-Security-Token': creds.sessionToken } : {}),
  };
  const canonicalQuery = Object.entries(params)
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const canonicalHeaders = `host:${host}\nx-k8s-aws-id:${cluster}\n`;
  const canonicalRequest = [
    'GET',
    '/',
    canonicalQuery,
    canonicalHeaders,
    'host;x-k8s-aws-id',
    sha256Hex(''),
  ].join('\n');
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const kDate = hmac(`AWS4${creds.secretAccessKey}`, date);
  const kSigning = hmac(hmac(hmac(kDate, region), 'sts'), 'aws4_request');
  const signature = hmac(kSigning, stringToSign).toString('hex');
  return { host, params: { ...params, 'X-Amz-Signature': signature } };
}

// ----- helpers ------------------------------------------------------------------------------------

function decode(token: string): URL {
  expect(token.startsWith('k8s-aws-v1.')).toBe(true);
  return new URL(Buffer.from(token.slice('k8s-aws-v1.'.length), 'base64url').toString('utf8'));
}

function fixture(opts: { creds?: AwsCredentialIdentity; cluster?: string; region?: string } = {}) {
  let now = T0.getTime();
  let credentialCalls = 0;
  const provider = makeEksTokenProvider({
    clusterName: opts.cluster ?? CLUSTER,
    region: opts.region ?? REGION,
    credentials: async () => {
      credentialCalls++;
      return opts.creds ?? CREDS;
    },
    clock: { now: () => new Date(now) },
  });
  return {
    provider,
    advance: (ms: number) => {
      now += ms;
    },
    credentialCalls: () => credentialCalls,
  };
}

const MIN = 60_000;

// ----- tests --------------------------------------------------------------------------------------

describe('EKS token', () => {
  it('is the presigned STS GetCallerIdentity URL a SigV4 implementation from the spec computes', async () => {
    const { provider } = fixture();

    const url = decode(await provider.getToken());

    const expected = expectedPresignedParams(T0, CREDS, REGION, CLUSTER);
    expect(url.protocol).toBe('https:');
    expect(url.host).toBe(expected.host);
    expect(url.pathname).toBe('/');
    expect(Object.fromEntries(url.searchParams)).toEqual(expected.params);
  });

  it('matches without a session token too (long-term keys)', async () => {
    const creds = { accessKeyId: CREDS.accessKeyId, secretAccessKey: CREDS.secretAccessKey };
    const { provider } = fixture({ creds });

    const url = decode(await provider.getToken());

    expect(Object.fromEntries(url.searchParams)).toEqual(
      expectedPresignedParams(T0, creds, REGION, CLUSTER).params,
    );
  });

  it('percent-encodes the query exactly as it was signed (RFC 3986)', async () => {
    const { provider } = fixture();

    const raw = Buffer.from((await provider.getToken()).slice('k8s-aws-v1.'.length), 'base64url').toString(
      'utf8',
    );

    expect(raw).toContain('X-Amz-Credential=AKIDEXAMPLE%2F20260820%2Fus-west-2%2Fsts%2Faws4_request');
    expect(raw).toContain('X-Amz-SignedHeaders=host%3Bx-k8s-aws-id');
    expect(raw).toContain(`X-Amz-Security-Token=${uriEncode(CREDS.sessionToken as string)}`);
  });

  it.each(['a', 'ab', 'abc', 'gantry-prod', 'gantry-prod-1', 'gantry-prod-12'])(
    'is base64url without padding (cluster %s)',
    async (cluster) => {
      const { provider } = fixture({ cluster });

      const token = await provider.getToken();

      expect(token).toMatch(/^k8s-aws-v1\.[A-Za-z0-9_-]+$/);
      expect(decode(token).searchParams.get('X-Amz-SignedHeaders')).toBe('host;x-k8s-aws-id');
    },
  );

  it('uses the regional STS endpoint, under amazonaws.com.cn in China', () => {
    expect(stsHost('eu-central-1')).toBe('sts.eu-central-1.amazonaws.com');
    expect(stsHost('cn-north-1')).toBe('sts.cn-north-1.amazonaws.com.cn');
  });
});

describe('EKS token cache', () => {
  it('reuses the token until 13 minutes after signing, then signs a new one', async () => {
    const f = fixture();
    const first = await f.provider.getTokenWithExpiry();

    f.advance(13 * MIN); // exactly one minute of its 14 left
    const at13 = await f.provider.getToken();
    f.advance(1);
    const after13 = await f.provider.getTokenWithExpiry();

    expect(first.expiresAt).toEqual(new Date(T0.getTime() + 14 * MIN));
    expect(at13).toBe(first.token);
    expect(after13.token).not.toBe(first.token);
    expect(decode(after13.token).searchParams.get('X-Amz-Date')).toBe('20260820T101300Z');
    expect(f.credentialCalls()).toBe(2);
  });

  it('signs once for concurrent callers', async () => {
    const f = fixture();

    const tokens = await Promise.all([f.provider.getToken(), f.provider.getToken(), f.provider.getToken()]);

    expect(new Set(tokens).size).toBe(1);
    expect(f.credentialCalls()).toBe(1);
  });

  it('ends the token with session credentials that expire sooner', async () => {
    const f = fixture({ creds: { ...CREDS, expiration: new Date(T0.getTime() + 5 * MIN) } });

    const first = await f.provider.getTokenWithExpiry();
    f.advance(4 * MIN + 1);
    const second = await f.provider.getToken();

    expect(first.expiresAt).toEqual(new Date(T0.getTime() + 5 * MIN));
    expect(second).not.toBe(first.token);
  });

  it('does not cache a failure to get credentials', async () => {
    let calls = 0;
    const provider = makeEksTokenProvider({
      clusterName: CLUSTER,
      region: REGION,
      credentials: async () => {
        calls++;
        if (calls === 1) throw new Error('IMDS unavailable');
        return CREDS;
      },
      clock: { now: () => T0 },
    });

    await expect(provider.getToken()).rejects.toThrow('IMDS unavailable');
    await expect(provider.getToken()).resolves.toMatch(/^k8s-aws-v1\./);
  });
});

describe('EKS connection (kubeconfig.ts)', () => {
  const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
  const CA_DATA = Buffer.from(CA_PEM).toString('base64');
  const ENDPOINT = { server: 'https://ABC.gr7.us-west-2.eks.amazonaws.com', caData: CA_DATA };

  it('presents the token as a bearer and trusts the cluster CA', async () => {
    const conn = eksConnection({
      clusterName: CLUSTER,
      region: REGION,
      endpoint: ENDPOINT,
      credentials: async () => CREDS,
      clock: { now: () => T0 },
    });
    const opts: RequestOptions = {};

    await conn.applyToHTTPSOptions(opts);

    expect(conn.getCurrentCluster()?.server).toBe(ENDPOINT.server);
    expect(opts.ca?.toString()).toBe(CA_PEM);
    const auth = String((opts.headers as Record<string, string>).Authorization);
    expect(auth).toMatch(/^Bearer k8s-aws-v1\./);
    expect(Object.fromEntries(decode(auth.slice('Bearer '.length)).searchParams)).toEqual(
      expectedPresignedParams(T0, CREDS, REGION, CLUSTER).params,
    );
  });

  it('reads endpoint and CA with DescribeCluster and signs with the EKS client credentials', async () => {
    const sent: unknown[] = [];
    const eks = {
      config: { credentials: async () => CREDS },
      send: async (cmd: { input: unknown }) => {
        sent.push(cmd.input);
        return {
          cluster: { status: 'ACTIVE', endpoint: ENDPOINT.server, certificateAuthority: { data: CA_DATA } },
        };
      },
    } as unknown as Pick<EKSClient, 'send' | 'config'>;

    const conn = await eksKubeConfig({ clusterName: CLUSTER, region: REGION, eks, clock: { now: () => T0 } });

    expect(sent).toEqual([{ name: CLUSTER }]);
    expect(conn.endpoint).toEqual(ENDPOINT);
    expect(await conn.tokens.getToken()).toMatch(/^k8s-aws-v1\./);
  });

  it.each([
    [
      'a cluster still CREATING (no endpoint yet)',
      async () => ({ cluster: { status: 'CREATING' } }),
      'ClusterUnavailableError',
    ],
    [
      'an unknown cluster',
      async () => {
        throw Object.assign(new Error('No cluster found'), {
          name: 'ResourceNotFoundException',
          $metadata: { httpStatusCode: 404 },
        });
      },
      'NotFoundError',
    ],
    [
      'EKS throttling',
      async () => {
        throw Object.assign(new Error('Rate exceeded'), {
          name: 'ThrottlingException',
          $metadata: { httpStatusCode: 429 },
        });
      },
      'AwsUnavailableError',
    ],
  ])('DescribeCluster: %s → %s', async (_label, send, name) => {
    const eks = { config: { credentials: async () => CREDS }, send } as unknown as Pick<
      EKSClient,
      'send' | 'config'
    >;

    await expect(eksKubeConfig({ clusterName: CLUSTER, region: REGION, eks })).rejects.toMatchObject({
      name,
    });
  });
});
