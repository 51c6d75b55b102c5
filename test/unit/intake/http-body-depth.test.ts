import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  type ApiResult,
  httpApi,
  type JsonApiEvent,
  jsonBody,
  jsonDepthExceeds,
  MAX_BODY_DEPTH,
  respond,
} from '../../../functions/api/_http.ts';
import { apiRoutes, PRINCIPAL_HEADER, startHttpApi } from '../../../local/http-api.ts';

// Tests of functions/api/_http.ts: the nesting limit on request bodies (arrays and objects).

const context = { awsRequestId: 'req-1', getRemainingTimeInMillis: () => 10_000 } as unknown as Context;
const nested = (depth: number, inner = '1') => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
const nestedObjects = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

const echo = middy<JsonApiEvent, ApiResult>()
  .use(httpApi())
  .use(jsonBody())
  .handler(async (e) => respond(200, { got: e.json }));

function event(body: string): JsonApiEvent {
  return {
    version: '2.0',
    routeKey: 'POST /v1/runs',
    rawPath: '/v1/runs',
    rawQueryString: '',
    headers: { 'content-type': 'application/json' },
    isBase64Encoded: false,
    body,
    requestContext: {
      requestId: 'api-1',
      authorizer: { iam: { userArn: 'arn:aws:iam::1:user/u' } },
    } as unknown as JsonApiEvent['requestContext'],
  } as JsonApiEvent;
}

describe('jsonDepthExceeds', () => {
  it.each<[string, string, boolean]>([
    ['at the limit', nested(MAX_BODY_DEPTH), false],
    ['one past it', nested(MAX_BODY_DEPTH + 1), true],
    ['objects past it', nestedObjects(MAX_BODY_DEPTH + 1), true],
    ['siblings do not add up', `[${Array.from({ length: 100 }, () => nested(60)).join(',')}]`, false],
    ['brackets in strings do not count', JSON.stringify({ a: '['.repeat(500), b: '\\"[[[[' }), false],
    ['an escaped quote does not end the string', `["\\"${'['.repeat(100)}"]`, false],
  ])('%s', (_name, text, exceeds) => {
    expect(jsonDepthExceeds(text, MAX_BODY_DEPTH)).toBe(exceeds);
  });
});

describe('a deeply nested request body', () => {
  it.each([
    ['arrays', nested(100_000)],
    ['objects', nestedObjects(20_000)],
    ['just past the limit', nested(MAX_BODY_DEPTH + 1)],
  ])('%s: 400 InvalidJson naming the rule, before anything recurses into it', async (_name, text) => {
    vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const r = await echo(event(text), context);
    expect(r.statusCode).toBe(400);
    expect(JSON.parse(r.body ?? '{}')).toEqual({
      error: 'InvalidJson',
      message: `body: nested deeper than ${MAX_BODY_DEPTH} levels (arrays and objects)`,
    });
    vi.restoreAllMocks();
  });

  it('a body at the limit is parsed', async () => {
    vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const r = await echo(event(nested(MAX_BODY_DEPTH)), context);
    expect(r.statusCode).toBe(200);
    vi.restoreAllMocks();
  });
});

describe('the local HTTP host', () => {
  let api: Awaited<ReturnType<typeof startHttpApi>>;
  beforeAll(async () => {
    api = await startHttpApi({ routes: apiRoutes(), port: 0 });
  });
  afterAll(async () => {
    await api?.close();
  });

  it('answers a deeply nested POST /v1/runs with the same 400 (the production handler)', async () => {
    vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const res = await fetch(`${api.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [PRINCIPAL_HEADER]: 'local-demo' },
      body: `{"team":${nested(50_000, '"demo"')}}`,
    });
    vi.restoreAllMocks();
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      error: 'InvalidJson',
      message: `body: nested deeper than ${MAX_BODY_DEPTH} levels (arrays and objects)`,
    });
  });
});
