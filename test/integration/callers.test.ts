import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { JWT_CLAIMS_HEADER, PRINCIPAL_HEADER } from '../../local/http-api.ts';
import { localContext } from '../../local/lambda.ts';
import { DEMO_TEAM } from '../../local/stack.ts';

/**
 * Every caller shape API Gateway presents, against the production API handlers: invoked directly
 * with HTTP API (payload 2.0) events shaped as API Gateway sends them (IAM authorizer:
 * `requestContext.authorizer.iam` with accessKey, accountId, callerId, cognitoIdentity,
 * principalOrgId, userArn, userId; JWT authorizer: `requestContext.authorizer.jwt` with claims
 * and scopes), and through the local HTTP host with its identity headers.
 */

const A = '111122223333';
const ISSUER = 'https://idp.example.com/realms/acme';
const team = (name: string, principals: string[]) => ({
  ...DEMO_TEAM,
  name,
  principals,
  namespaces: [name],
  queues: [],
  imagePrefixes: [`registry.local/${name}/`],
});
const TEAMS = [
  team('users', [`arn:aws:iam::${A}:user/alice`]),
  team('vision', [`arn:aws:iam::${A}:role/vision-mlops`]),
  team('nlp', [`arn:aws:iam::${A}:role/teams/nlp-mlops`]),
  team('science', [`sso:${A}:DataScience`]),
  team('infra', [
    `arn:aws:iam::${A}:role/aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_Infra_0a1b2c3d4e5f6789`,
  ]),
  team('partners', [`arn:aws:sts::${A}:federated-user/bob`]),
  team('web', ['web-group']),
];

interface Shape {
  name: string;
  /** The IAM authorizer's `iam` object, or the JWT claims. */
  iam?: { userArn: string; callerId: string; accessKey: string };
  jwt?: Record<string, string>;
  status: number;
}

const SHAPES: Shape[] = [
  {
    name: 'IAM user',
    iam: { userArn: `arn:aws:iam::${A}:user/alice`, callerId: 'AIDAEXAMPLEUSERID', accessKey: 'AKIAEXAMPLE' },
    status: 200,
  },
  {
    name: 'role session',
    iam: {
      userArn: `arn:aws:sts::${A}:assumed-role/vision-mlops/botocore-session-1733300000`,
      callerId: 'AROAEXAMPLEROLEID:botocore-session-1733300000',
      accessKey: 'ASIAEXAMPLE',
    },
    status: 200,
  },
  {
    name: 'role-with-path session',
    iam: {
      userArn: `arn:aws:sts::${A}:assumed-role/nlp-mlops/ci-deploy`,
      callerId: 'AROAEXAMPLENLPID:ci-deploy',
      accessKey: 'ASIAEXAMPLE',
    },
    status: 200,
  },
  {
    name: 'Identity Center session (sso: form)',
    iam: {
      userArn: `arn:aws:sts::${A}:assumed-role/AWSReservedSSO_DataScience_0123456789abcdef/carol@example.com`,
      callerId: 'AROAEXAMPLESSOID:carol@example.com',
      accessKey: 'ASIAEXAMPLE',
    },
    status: 200,
  },
  {
    name: 'Identity Center session (reserved role ARN form)',
    iam: {
      userArn: `arn:aws:sts::${A}:assumed-role/AWSReservedSSO_Infra_0a1b2c3d4e5f6789/dave@example.com`,
      callerId: 'AROAEXAMPLEINFRA:dave@example.com',
      accessKey: 'ASIAEXAMPLE',
    },
    status: 200,
  },
  {
    name: 'federated user',
    iam: {
      userArn: `arn:aws:sts::${A}:federated-user/bob`,
      callerId: `${A}:bob`,
      accessKey: 'ASIAEXAMPLE',
    },
    status: 200,
  },
  {
    name: 'JWT caller',
    jwt: { iss: ISSUER, sub: 'u-1', groups: '[web-group]', scope: 'openid gantry/read' },
    status: 200,
  },
  {
    name: 'a session of the same role name in another account',
    iam: {
      userArn: 'arn:aws:sts::444455556666:assumed-role/vision-mlops/x',
      callerId: 'AROAOTHER:x',
      accessKey: 'ASIAEXAMPLE',
    },
    status: 403,
  },
];

/** An HTTP API payload 2.0 event for `GET /v1/runs`, as API Gateway builds it. */
function apiEvent(shape: Shape) {
  const authorizer = shape.iam
    ? {
        iam: {
          accessKey: shape.iam.accessKey,
          accountId: A,
          callerId: shape.iam.callerId,
          cognitoIdentity: null,
          principalOrgId: 'o-exampleorgid',
          userArn: shape.iam.userArn,
          userId: shape.iam.callerId,
        },
      }
    : { jwt: { claims: shape.jwt, scopes: null } };
  return {
    version: '2.0',
    routeKey: 'GET /v1/runs',
    rawPath: '/v1/runs',
    rawQueryString: '',
    headers: { accept: 'application/json', host: 'abc123.execute-api.eu-west-1.amazonaws.com' },
    requestContext: {
      accountId: A,
      apiId: 'abc123',
      authorizer,
      domainName: 'abc123.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc123',
      http: {
        method: 'GET',
        path: '/v1/runs',
        protocol: 'HTTP/1.1',
        sourceIp: '203.0.113.7',
        userAgent: 'gantry-cli',
      },
      requestId: 'JKJaXmPLvHcESHA=',
      routeKey: 'GET /v1/runs',
      stage: '$default',
      time: '04/Dec/2026:23:30:00 +0000',
      timeEpoch: 1796427000000,
    },
    isBase64Encoded: false,
  };
}

describe('caller shapes on the API handlers and the local host', () => {
  let env: Embedded;
  let listRuns: (event: unknown, context: Context) => Promise<{ statusCode: number; body: string }>;

  beforeAll(async () => {
    env = await startEmbedded({
      simulator: { namespaces: TEAMS.map((t) => t.name) },
      stack: { teams: TEAMS, jwt: { issuer: ISSUER } },
    });
    ({ handler: listRuns } = (await import('../../functions/api/list-runs.ts')) as never);
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  it.each(SHAPES)('$name → $status on the handler', async (shape) => {
    const res = await listRuns(apiEvent(shape), localContext('gantry-list-runs', 10_000));
    expect(res.statusCode, res.body).toBe(shape.status);
    if (shape.status === 403) expect(JSON.parse(res.body).message).toMatch(/belongs to no team/);
    else expect(JSON.parse(res.body)).toHaveProperty('runs');
  });

  // The local host presents a configured role or permission set as a session of it, as AWS does.
  it.each([
    [`arn:aws:iam::${A}:role/vision-mlops`, 200],
    [`arn:aws:iam::${A}:role/teams/nlp-mlops`, 200],
    [`sso:${A}:DataScience`, 200],
    [`sso:${A}:Other`, 403],
    [`arn:aws:iam::${A}:role/other`, 403],
  ])('the principal %s as written → %i on the local host', async (principal, status) => {
    const res = await fetch(`${env.api.url}/v1/runs`, { headers: { [PRINCIPAL_HEADER]: principal } });
    expect(res.status, await res.clone().text()).toBe(status);
  });

  it.each(SHAPES)('$name → $status on the local host', async (shape) => {
    const identity = shape.iam
      ? { [PRINCIPAL_HEADER]: shape.iam.userArn }
      : { [JWT_CLAIMS_HEADER]: JSON.stringify({ ...shape.jwt, groups: ['web-group'] }) };
    const res = await fetch(`${env.api.url}/v1/runs`, { headers: identity });
    expect(res.status, await res.clone().text()).toBe(shape.status);
  });
});
