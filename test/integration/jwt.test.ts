import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { JWT_CLAIMS_HEADER } from '../../local/http-api.ts';
import { DEMO_TEAM } from '../../local/stack.ts';

/**
 * JWT callers on the embedded default: two teams matched from configured claims (principal from
 * `email`, groups from `groups` only), the issuer pinned, read vs write scopes per route. The local
 * host passes the claims on as API Gateway's JWT authorizer would; the production handlers decide.
 */

const ISSUER = 'https://idp.example.com/realms/acme';
const DEMO = { ...DEMO_TEAM, principals: ['demo-group'] };
const RIVAL = {
  ...DEMO_TEAM,
  name: 'rival',
  principals: ['rival@acme.io'],
  namespaces: ['rival'],
  queues: [],
  imagePrefixes: ['registry.local/rival/'],
};

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field in assertions
type Body = Record<string, any>;

const request = {
  modelName: 'jwt-model',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  resourcesPerNode: { gpu: 1 },
};

describe('JWT callers on the embedded default', () => {
  let env: Embedded;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 300, namespaces: ['demo', 'rival'] },
      stack: {
        teams: [DEMO, RIVAL],
        jwt: { issuer: ISSUER, principalClaim: 'email', groupsClaims: ['groups'] },
      },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  async function call(claims: Record<string, unknown>, method: string, path: string, body?: unknown) {
    const res = await fetch(`${env.api.url}${path}`, {
      method,
      headers: {
        [JWT_CLAIMS_HEADER]: JSON.stringify(claims),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : {}) as Body };
  }

  const demoWriter = {
    iss: ISSUER,
    sub: 'u-1',
    email: 'ann@acme.io',
    groups: ['demo-group'],
    scope: 'openid gantry/write',
  };
  const demoReader = { ...demoWriter, scope: undefined, scp: ['gantry/read'] };
  const rivalWriter = { iss: ISSUER, sub: 'u-2', email: 'rival@acme.io', scope: 'gantry/write' };

  let runId: string;

  it('accepts a token from the pinned issuer with the write scope: submit, then read it back', async () => {
    const submitted = await call(demoWriter, 'POST', '/v1/runs', request);
    expect(submitted.status, JSON.stringify(submitted.body)).toBe(202);
    runId = submitted.body.runId;
    const read = await call(demoReader, 'GET', `/v1/runs/${runId}`);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ runId, team: 'demo' });
  });

  it('refuses a token from another issuer with 401, on read and write routes alike', async () => {
    const forged = { ...demoWriter, iss: 'https://evil.example.com/' };
    const get = await call(forged, 'GET', `/v1/runs/${runId}`);
    const post = await call(forged, 'POST', '/v1/runs', { ...request, modelName: 'forged' });
    const spec = await call(forged, 'GET', '/v1/openapi.json');
    expect([get.status, post.status, spec.status]).toEqual([401, 401, 401]);
    expect(post.body).toEqual({
      error: 'Unauthenticated',
      message: `the token's issuer https://evil.example.com/ is not the configured issuer ${ISSUER}`,
    });
    expect(post.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    const noIss = await call({ ...demoWriter, iss: undefined }, 'GET', `/v1/runs/${runId}`);
    expect(noIss.status).toBe(401);
  });

  it('refuses POST routes to a read-only token (403 naming the scope) but serves it GET routes', async () => {
    const submit = await call(demoReader, 'POST', '/v1/runs', { ...request, modelName: 'read-only' });
    expect(submit.status).toBe(403);
    expect(submit.body.rule).toBe('write access needs the scope gantry/write; the token has gantry/read');
    const cancel = await call(demoReader, 'POST', `/v1/runs/${runId}/cancel`);
    expect(cancel.status).toBe(403);
    expect((await call(demoReader, 'GET', '/v1/runtimes')).status).toBe(200);
    const unscoped = await call({ ...demoReader, scp: undefined }, 'GET', `/v1/runs/${runId}`);
    expect(unscoped.status).toBe(403);
    expect(unscoped.body.rule).toBe(
      'read access needs the scope gantry/read or gantry/write; the token has no scopes',
    );
  });

  it('ignores a group in a claim that is not configured, and a sub when the principal claim is email', async () => {
    const viaCognito = { iss: ISSUER, sub: 'u-3', 'cognito:groups': ['demo-group'], scope: 'gantry/write' };
    const r1 = await call(viaCognito, 'GET', `/v1/runs/${runId}`);
    expect(r1.status).toBe(403);
    expect(r1.body.rule).toBe('the token has no email claim nor a group claim (groups) to match a team by');
    const viaSub = { iss: ISSUER, sub: 'rival@acme.io', scope: 'gantry/write' };
    const r2 = await call(viaSub, 'POST', '/v1/runs', {
      ...request,
      team: 'rival',
      image: 'registry.local/rival/x:1',
    });
    expect(r2.status).toBe(403);
  });

  it("matches the second team by its email principal; it sees the first team's run as unknown", async () => {
    const own = await call(rivalWriter, 'POST', '/v1/runs', {
      ...request,
      modelName: 'rival-model',
      team: 'rival',
      image: 'registry.local/rival/x:1',
    });
    expect(own.status, JSON.stringify(own.body)).toBe(202);
    const peek = await call(rivalWriter, 'GET', `/v1/runs/${runId}`);
    expect(peek.status).toBe(404);
    const steal = await call(rivalWriter, 'POST', '/v1/runs', { ...request, modelName: 'x' });
    expect(steal.status).toBe(403);
    expect(steal.body.rule).toMatch(
      /^team demo is not the caller's team \(JWT principal rival@acme.io belongs to rival\)/,
    );
  });
});
