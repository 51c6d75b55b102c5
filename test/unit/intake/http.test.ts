import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  type ApiEvent,
  type ApiResult,
  errorResponse,
  httpApi,
  type JsonApiEvent,
  jsonBody,
  respond,
} from '../../../functions/api/_http.ts';
import {
  AwsUnavailableError,
  ClusterUnavailableError,
  ConcurrentUpdateError,
  ForbiddenError,
  IdempotencyConflictError,
  NotFoundError,
  ValidationError,
} from '../../../lib/errors.ts';
import {
  InvalidJsonError,
  PayloadTooLargeError,
  RunFinishedError,
  UnauthenticatedError,
  UnsupportedMediaTypeError,
} from '../../../lib/intake/errors.ts';

// Tests of functions/api/_http.ts: the shared middlewares of the API handlers.

const context = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 10_000 } as unknown as Context;

function event(overrides: Partial<ApiEvent> = {}): JsonApiEvent {
  return {
    version: '2.0',
    routeKey: 'POST /v1/runs',
    rawPath: '/v1/runs',
    rawQueryString: '',
    headers: { 'content-type': 'application/json' },
    isBase64Encoded: false,
    requestContext: {
      requestId: 'api-1',
      authorizer: { iam: { userArn: 'arn:aws:iam::1:user/u' } },
    } as unknown as ApiEvent['requestContext'],
    ...overrides,
  } as JsonApiEvent;
}

const echo = middy<JsonApiEvent, ApiResult>()
  .use(httpApi())
  .use(jsonBody(64))
  .handler(async (e) => respond(200, { got: e.json }));

const body = (r: ApiResult) => JSON.parse(r.body ?? '{}');

beforeEach(() => {
  // Keep the request log lines out of the test output (the last test reads them).
  vi.spyOn(console, 'log').mockImplementation(() => undefined);
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe('errorResponse', () => {
  it.each<[string, unknown, number, Record<string, unknown>]>([
    [
      'ValidationError',
      new ValidationError([{ field: 'a', rule: 'r' }]),
      400,
      { error: 'ValidationError', issues: [{ field: 'a', rule: 'r' }] },
    ],
    ['InvalidJson', new InvalidJsonError('bad'), 400, { error: 'InvalidJson', message: 'bad' }],
    ['Unauthenticated', new UnauthenticatedError('who'), 401, { error: 'Unauthenticated', message: 'who' }],
    ['Forbidden', new ForbiddenError('no'), 403, { error: 'ForbiddenError', rule: 'no' }],
    ['NotFound', new NotFoundError('gone'), 404, { error: 'NotFoundError' }],
    ['conflict', new IdempotencyConflictError('k'), 409, { error: 'IdempotencyConflictError' }],
    [
      'finished',
      new RunFinishedError('run-x', 'Succeeded'),
      409,
      { error: 'RunFinishedError', phase: 'Succeeded' },
    ],
    ['too large', new PayloadTooLargeError(10), 413, { error: 'PayloadTooLarge' }],
    ['media type', new UnsupportedMediaTypeError('text'), 415, { error: 'UnsupportedMediaType' }],
    ['AWS down', new AwsUnavailableError('s3'), 503, { error: 'ServiceUnavailable', requestId: 'r' }],
    ['cluster down', new ClusterUnavailableError('k8s'), 503, { error: 'ServiceUnavailable' }],
    ['lost races', new ConcurrentUpdateError('x'), 503, { error: 'ServiceUnavailable' }],
  ])('%s → %i', (_name, err, status, expected) => {
    const r = errorResponse(err, 'r');
    expect(r.statusCode).toBe(status);
    expect(body(r)).toMatchObject(expected);
    if (status === 503) expect(r.headers?.['retry-after']).toBe('5');
  });

  it('answers anything else with 500, a request id and no internals', () => {
    const err = new Error('connect ECONNREFUSED 10.0.0.1:443 secret-host');
    const r = errorResponse(err, 'req-9');
    expect(r.statusCode).toBe(500);
    expect(body(r)).toEqual({ error: 'InternalError', message: 'internal error', requestId: 'req-9' });
    expect(r.body).not.toContain('secret');
  });
});

describe('jsonBody', () => {
  it('parses a JSON body into event.json', async () => {
    const r = await echo(event({ body: '{"a":[1,true]}' }), context);
    expect(r).toMatchObject({ statusCode: 200 });
    expect(body(r)).toEqual({ got: { a: [1, true] } });
  });

  it.each<[string, Partial<ApiEvent>, number, string]>([
    ['no content type', { headers: {}, body: '{}' }, 415, 'UnsupportedMediaType'],
    ['text/plain', { headers: { 'content-type': 'text/plain' }, body: '{}' }, 415, 'UnsupportedMediaType'],
    [
      'latin-1',
      { headers: { 'content-type': 'application/json; charset=latin1' }, body: '{}' },
      415,
      'UnsupportedMediaType',
    ],
    ['too large', { body: `{"a":"${'x'.repeat(100)}"}` }, 413, 'PayloadTooLarge'],
    [
      'too large in base64',
      { body: Buffer.from('x'.repeat(65)).toString('base64'), isBase64Encoded: true },
      413,
      'PayloadTooLarge',
    ],
    ['empty', { body: '' }, 400, 'InvalidJson'],
    ['malformed', { body: '{"a":' }, 400, 'InvalidJson'],
    ['a __proto__ key', { body: '{"__proto__":{"x":1}}' }, 400, 'InvalidJson'],
    [
      'invalid UTF-8',
      { body: Buffer.from([0x7b, 0xff, 0x7d]).toString('base64'), isBase64Encoded: true },
      400,
      'InvalidJson',
    ],
  ])('refuses %s', async (_name, overrides, status, error) => {
    const r = await echo(event(overrides), context);
    expect(r.statusCode).toBe(status);
    expect(body(r).error).toBe(error);
  });

  it('leaves event.json undefined on an optional body sent without one; a body sent is checked as ever', async () => {
    const optional = middy<JsonApiEvent, ApiResult>()
      .use(httpApi())
      .use(jsonBody(64, true))
      .handler(async (e) => respond(200, { sent: e.json !== undefined, got: e.json ?? null }));
    // No body at all, as API Gateway sends a POST without one: no `body` field, no content type.
    const noBody = () => {
      const e = event({ headers: {} });
      delete e.body;
      return e;
    };
    const none = await optional(noBody(), context);
    expect(none.statusCode).toBe(200);
    expect(body(none)).toEqual({ sent: false, got: null });
    expect(body(await optional(event({ body: '{"a":1}' }), context))).toEqual({ sent: true, got: { a: 1 } });
    expect((await optional(event({ headers: {}, body: '{}' }), context)).statusCode).toBe(415);
    expect((await optional(event({ body: '' }), context)).statusCode).toBe(400);
    // A required body is still required.
    expect((await echo(noBody(), context)).statusCode).toBe(415);
  });

  it('accepts application/json with a UTF-8 charset, in any case', async () => {
    const r = await echo(
      event({ headers: { 'content-type': 'Application/JSON; Charset=UTF-8' }, body: '[]' }),
      context,
    );
    expect(r.statusCode).toBe(200);
  });
});

describe('httpApi', () => {
  it('logs one JSON line per request with the route, status, request id and run id', async () => {
    vi.stubEnv('GANTRY_LOG_LEVEL', 'info');
    const lines: string[] = [];
    vi.spyOn(console, 'log').mockImplementation((line: string) => {
      lines.push(line);
    });
    const handler = middy<ApiEvent, ApiResult>()
      .use(httpApi())
      .handler(async () => respond(202, { runId: 'run-abcdefghijklmnopqrst' }));
    await handler(event(), context);
    const failing = middy<ApiEvent, ApiResult>()
      .use(httpApi())
      .handler(async () => {
        throw new Error('boom');
      });
    const r = await failing(event({ pathParameters: { id: 'run-x' } }), context);
    expect(r.statusCode).toBe(500);
    const parsed = lines.map((l) => JSON.parse(l));
    expect(parsed).toHaveLength(2);
    expect(parsed[0]).toMatchObject({
      level: 'INFO',
      msg: 'request',
      route: 'POST /v1/runs',
      status: 202,
      requestId: 'req-1',
      runId: 'run-abcdefghijklmnopqrst',
      caller: 'arn:aws:iam::1:user/u',
    });
    expect(parsed[1]).toMatchObject({
      level: 'ERROR',
      status: 500,
      runId: 'run-x',
      error: 'Error',
      detail: 'boom',
    });
    vi.unstubAllEnvs();
  });

  it('checks a JWT caller before the handler runs: pinned issuer (401), the route scope (403)', async () => {
    // Prepare: the configuration and the stack's issuer, as the Lambda environment gives them.
    vi.stubEnv('GANTRY_BUCKET', 'bucket');
    vi.stubEnv('GANTRY_STATE_MACHINE_ARN', 'arn:aws:states:us-east-1:1:stateMachine:m');
    vi.stubEnv('GANTRY_CONFIG', JSON.stringify({ clusters: [{ name: 'c', kubeconfig: '/dev/null' }] }));
    vi.stubEnv('GANTRY_JWT_ISSUER', 'https://idp.example.com/');
    const seen: string[] = [];
    const handler = middy<ApiEvent, ApiResult>()
      .use(httpApi())
      .handler(async (e) => {
        seen.push(e.routeKey);
        return respond(200, {});
      });
    const jwt = (routeKey: string, claims: Record<string, unknown>) =>
      event({
        routeKey,
        requestContext: {
          requestId: 'api-2',
          http: { method: routeKey.split(' ')[0] },
          authorizer: { jwt: { claims, scopes: null } },
        },
      } as unknown as Partial<ApiEvent>);
    const reader = { iss: 'https://idp.example.com/', sub: 'u', scope: 'gantry/read' };
    // Act
    const other = await handler(jwt('GET /v1/runs', { ...reader, iss: 'https://evil/' }), context);
    const post = await handler(jwt('POST /v1/runs', reader), context);
    const get = await handler(jwt('GET /v1/runs', reader), context);
    // Assess
    expect([other.statusCode, post.statusCode, get.statusCode]).toEqual([401, 403, 200]);
    expect(seen).toEqual(['GET /v1/runs']);
    vi.unstubAllEnvs();
  });
});
