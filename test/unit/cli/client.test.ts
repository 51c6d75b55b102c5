import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { ApiError, type Fetch, makeClient, UnreachableError } from '../../../cli/client.ts';
import type { Target } from '../../../cli/profiles.ts';
import { NodeSha256 } from '../../../lib/adapters/kubernetes/eks-token.ts';

interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

function recorder(status = 200, body: unknown = { ok: true }) {
  const sent: Sent[] = [];
  const fetch = (async (url: URL, init: RequestInit) => {
    sent.push({
      url: String(url),
      method: String(init.method),
      headers: init.headers as Record<string, string>,
      ...(init.body !== undefined ? { body: String(init.body) } : {}),
    });
    return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
  }) as unknown as Fetch;
  return { sent, fetch };
}

const CREDENTIALS = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
};

describe('the CLI client', () => {
  it('says who the caller is on a local target with the identity header', async () => {
    const { sent, fetch } = recorder();
    const client = makeClient(
      { profile: 'local', endpoint: 'http://127.0.0.1:8080', auth: { type: 'local', principal: 'p-1' } },
      { fetch },
    );
    await client.call('POST', '/v1/runs', { body: { a: 1 }, headers: { 'idempotency-key': 'k' } });
    expect(sent[0]).toEqual({
      url: 'http://127.0.0.1:8080/v1/runs',
      method: 'POST',
      headers: {
        accept: 'application/json',
        'content-type': 'application/json',
        'idempotency-key': 'k',
        'x-gantry-principal': 'p-1',
      },
      body: '{"a":1}',
    });
  });

  it('sends a bearer token on a JWT target', async () => {
    const { sent, fetch } = recorder();
    const client = makeClient(
      { profile: 'web', endpoint: 'https://g.example.com', auth: { type: 'jwt', token: 'eyJ.a.b' } },
      { fetch },
    );
    await client.call('GET', '/v1/runs?limit=5');
    expect(sent[0]?.headers.authorization).toBe('Bearer eyJ.a.b');
    expect(sent[0]?.headers).not.toHaveProperty('x-gantry-principal');
  });

  it('signs with SigV4 for execute-api on an IAM target: what is sent is what was signed', async () => {
    const { sent, fetch } = recorder();
    const target: Target = {
      profile: 'prod',
      endpoint: 'https://abc123.execute-api.eu-west-1.amazonaws.com',
      auth: { type: 'iam', region: 'eu-west-1' },
    };
    const client = makeClient(target, { fetch, credentials: async () => CREDENTIALS });
    await client.call('POST', '/v1/runs/validate?x=a%20b', { body: { modelName: 'm' } });
    const req = sent[0] as Sent;
    expect(req.headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/execute-api\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=[0-9a-f]{64}$/,
    );
    expect(req.headers['x-amz-date']).toMatch(/^\d{8}T\d{6}Z$/);
    expect(req.headers).not.toHaveProperty('host');
    // Sign the request as it went out, at the same time: the same signature.
    const url = new URL(req.url);
    const { authorization, ...rest } = req.headers;
    const d = rest['x-amz-date'] as string;
    const signingDate = new Date(
      `${d.slice(0, 4)}-${d.slice(4, 6)}-${d.slice(6, 8)}T${d.slice(9, 11)}:${d.slice(11, 13)}:${d.slice(13, 15)}Z`,
    );
    const again = await new SignatureV4({
      service: 'execute-api',
      region: 'eu-west-1',
      credentials: CREDENTIALS,
      sha256: NodeSha256,
    }).sign(
      {
        method: req.method,
        protocol: url.protocol,
        hostname: url.hostname,
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        headers: { ...rest, host: url.host },
        body: req.body,
      },
      { signingDate },
    );
    expect(again.headers.authorization).toBe(authorization);
    expect(url.pathname).toBe('/v1/runs/validate');
  });

  it('turns error statuses into ApiError with the body, and a refused connection into UnreachableError', async () => {
    const { fetch } = recorder(400, { error: 'ValidationError', issues: [{ field: 'numNodes', rule: 'r' }] });
    const target: Target = {
      profile: 'local',
      endpoint: 'http://127.0.0.1:1',
      auth: { type: 'local', principal: 'p' },
    };
    const err = await makeClient(target, { fetch })
      .call('GET', '/v1/runs')
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 400, body: { error: 'ValidationError' } });

    await expect(makeClient(target).call('GET', '/v1/runs')).rejects.toThrow(UnreachableError);
    await expect(makeClient(target).call('GET', '/v1/runs')).rejects.toThrow(
      /^cannot reach http:\/\/127\.0\.0\.1:1 \(profile local\): /,
    );
  });

  it('says when credentials cannot be found for an IAM target', async () => {
    const client = makeClient(
      {
        profile: 'prod',
        endpoint: 'https://a.execute-api.eu-west-1.amazonaws.com',
        auth: { type: 'iam', region: 'eu-west-1' },
      },
      {
        credentials: async () => {
          throw new Error('Could not load credentials from any providers');
        },
      },
    );
    await expect(client.call('GET', '/v1/runs')).rejects.toThrow(
      /^cannot sign the request for prod: Could not load credentials from any providers$/,
    );
  });
});

describe('defaultCredentials', () => {
  it('resolves the standard chain (here: the environment)', async () => {
    const saved = { ...process.env };
    try {
      process.env.AWS_ACCESS_KEY_ID = 'AKIDFROMENV';
      process.env.AWS_SECRET_ACCESS_KEY = 'secret';
      process.env.AWS_SESSION_TOKEN = 'session';
      const { defaultCredentials } = await import('../../../cli/client.ts');
      const provider = await defaultCredentials('eu-west-1');
      await expect(provider()).resolves.toMatchObject({
        accessKeyId: 'AKIDFROMENV',
        secretAccessKey: 'secret',
        sessionToken: 'session',
      });
    } finally {
      process.env = saved;
    }
  });
});
