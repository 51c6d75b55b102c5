/**
 * What every HTTP API handler shares: the event types, the JSON body middleware, the error →
 * response mapping and one structured log line per request. Written here rather than taken from
 * middy's packages (only @middy/core is installed): each piece is a few lines.
 */

import middy, { type MiddlewareObj } from '@middy/core';
import type {
  APIGatewayProxyEventV2WithIAMAuthorizer,
  APIGatewayProxyEventV2WithJWTAuthorizer,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import { JWT_DEFAULTS } from '../../lib/config.ts';
import {
  ForbiddenError,
  IdempotencyConflictError,
  NotFoundError,
  ValidationError,
} from '../../lib/errors.ts';
import {
  InvalidJsonError,
  PayloadTooLargeError,
  RunFinishedError,
  RunLogsUnavailableError,
  SweepFinishedError,
  TeamLimitError,
  UnauthenticatedError,
  UnsupportedMediaTypeError,
} from '../../lib/intake/errors.ts';
import { accessOf, type JwtSettings, jwtClaimsOf, jwtSettings } from '../../lib/intake/jwt.ts';
import { authenticate, type Caller, callerFromAuthorizer } from '../../lib/intake/tenancy.ts';
import { AliasConflictError } from '../../lib/registry/aliases.ts';
import { config, env } from '../_config.ts';
import { log, withLogKeys } from '../_log.ts';

/** An HTTP API (payload v2) event with the IAM or the JWT authorizer. */
export type ApiEvent = APIGatewayProxyEventV2WithIAMAuthorizer | APIGatewayProxyEventV2WithJWTAuthorizer;
/** An ApiEvent after `jsonBody()`: `json` is the parsed body (untrusted). */
export type JsonApiEvent = ApiEvent & { json?: unknown };
export type ApiResult = APIGatewayProxyStructuredResultV2;

/** middy options of the API functions: abort the work 1 s before the Lambda timeout. */
export const apiOptions = { timeoutEarlyInMillis: 1000 };

/** Larger bodies are refused with 413 before they are parsed. */
export const MAX_BODY_BYTES = 256 * 1024;
/** Seconds a client should wait after a 503. */
export const RETRY_AFTER_SECONDS = 5;

/** The JWT settings in force (configuration + the stack's issuer); a mismatch is a 500, logged. */
function jwtInForce(): JwtSettings {
  try {
    return jwtSettings(config(), env().GANTRY_JWT_ISSUER);
  } catch (err) {
    throw new Error('Gantry is misconfigured (environment, GANTRY_CONFIG or GANTRY_JWT_ISSUER)', {
      cause: err,
    });
  }
}

const callers = new WeakMap<ApiEvent, Caller>();

/**
 * The authenticated caller (lib/intake/tenancy.ts `authenticate`): a JWT caller is refused
 * (401/403) unless its issuer is the pinned one and its scopes grant the route's access (GET
 * read, POST write). `httpApi()` calls it before every handler, so no route skips the check.
 */
export function callerOf(event: ApiEvent): Caller {
  let caller = callers.get(event);
  if (!caller) {
    const authorizer = event.requestContext.authorizer;
    const jwt = jwtClaimsOf(authorizer) ? jwtInForce() : JWT_DEFAULTS;
    // Unknown method: write, the stricter access.
    const method = event.requestContext.http?.method ?? event.routeKey?.split(' ')[0] ?? 'POST';
    caller = authenticate(authorizer, jwt, accessOf(method));
    callers.set(event, caller);
  }
  return caller;
}

/** A header by its lower-case name (HTTP API v2 lower-cases header names). */
export function header(event: ApiEvent, name: string): string | undefined {
  return event.headers?.[name];
}

export function respond(statusCode: number, body: unknown, headers: Record<string, string> = {}): ApiResult {
  return {
    statusCode,
    headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers },
    body: JSON.stringify(body),
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Arrays and objects nested in a body: a request nests a few levels, far fewer than this. */
export const MAX_BODY_DEPTH = 64;

/**
 * The nesting depth of JSON text (arrays and objects), counted without recursion and stopping at
 * the first level past `max`: the parser's reviver and every schema after it recurse, and a body
 * nested 100,000 deep would overflow their stack. Brackets inside strings do not count; text
 * that is not JSON is the parser's to refuse.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/** Parse JSON text; `__proto__` keys are refused (zod would drop them silently from records). */
export function parseJsonText(text: string): unknown {
  // Before the parser: its reviver recurses once per level.
  if (jsonDepthExceeds(text, MAX_BODY_DEPTH))
    throw new InvalidJsonError(`body: nested deeper than ${MAX_BODY_DEPTH} levels (arrays and objects)`);
  try {
    return JSON.parse(text, (key, value) => {
      if (key === '__proto__') throw new InvalidJsonError('the key "__proto__" is not allowed');
      return value;
    });
  } catch (err) {
    if (err instanceof InvalidJsonError) throw err;
    throw new InvalidJsonError(`the body is not valid JSON: ${(err as Error).message.slice(0, 200)}`);
  }
}

/**
 * Parse a JSON body into `event.json`: `application/json` (UTF-8) or 415, at most `limitBytes`
 * or 413, well-formed or 400 `InvalidJson`.
 */
export function jsonBody(
  limitBytes = MAX_BODY_BYTES,
  optional = false,
): MiddlewareObj<JsonApiEvent, ApiResult> {
  return {
    name: 'jsonBody',
    before: (request) => {
      const event = request.event;
      const contentType = header(event, 'content-type') ?? '';
      // A route whose body is optional: no body at all (and no content type) leaves `json` undefined.
      if (optional && !event.body && !contentType) return;
      const [mediaType = '', ...params] = contentType.split(';').map((p) => p.trim().toLowerCase());
      const charset = params
        .find((p) => p.startsWith('charset='))
        ?.slice('charset='.length)
        .replace(/"/g, '');
      if (
        mediaType !== 'application/json' ||
        (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
      ) {
        throw new UnsupportedMediaTypeError(
          `the body must be application/json in UTF-8 (got ${contentType ? JSON.stringify(contentType.slice(0, 100)) : 'no content-type'})`,
        );
      }
      const raw = event.body ?? '';
      if (raw.length > limitBytes * 2) throw new PayloadTooLargeError(limitBytes);
      const bytes = event.isBase64Encoded ? Buffer.from(raw, 'base64') : Buffer.from(raw, 'utf8');
      if (bytes.length > limitBytes) throw new PayloadTooLargeError(limitBytes);
      if (bytes.length === 0) throw new InvalidJsonError('the body is empty; send a JSON object');
      let text: string;
      try {
        text = utf8.decode(bytes);
      } catch {
        throw new InvalidJsonError('the body is not valid UTF-8');
      }
      event.json = parseJsonText(text);
    },
  };
}

/** The HTTP answer to an error. Unknown errors are a 500 that names the request id and nothing else. */
export function errorResponse(err: unknown, requestId: string): ApiResult {
  const e = err as Error;
  if (err instanceof ValidationError) {
    return respond(400, { error: 'ValidationError', message: 'the request is invalid', issues: err.issues });
  }
  if (err instanceof InvalidJsonError) return respond(400, { error: 'InvalidJson', message: e.message });
  if (err instanceof UnauthenticatedError) {
    return respond(
      401,
      { error: 'Unauthenticated', message: e.message },
      { 'www-authenticate': 'Bearer error="invalid_token"' },
    );
  }
  if (err instanceof ForbiddenError)
    return respond(403, { error: 'ForbiddenError', message: e.message, rule: err.rule });
  if (err instanceof NotFoundError) return respond(404, { error: 'NotFoundError', message: e.message });
  if (err instanceof IdempotencyConflictError) {
    return respond(409, { error: 'IdempotencyConflictError', message: e.message });
  }
  if (err instanceof RunFinishedError) {
    return respond(409, { error: 'RunFinishedError', message: e.message, phase: err.phase });
  }
  if (err instanceof RunLogsUnavailableError) {
    return respond(409, { error: 'RunLogsUnavailableError', message: e.message, phase: err.phase });
  }
  if (err instanceof AliasConflictError) {
    return respond(409, { error: 'AliasConflictError', message: e.message, currentVersion: err.current });
  }
  if (err instanceof SweepFinishedError) {
    return respond(409, { error: 'SweepFinishedError', message: e.message, phase: err.phase });
  }
  if (err instanceof TeamLimitError) {
    return respond(
      429,
      { error: 'TeamLimitError', message: e.message, limit: err.limit },
      { 'retry-after': String(err.retryAfterSeconds) },
    );
  }
  if (err instanceof PayloadTooLargeError)
    return respond(413, { error: 'PayloadTooLarge', message: e.message });
  if (err instanceof UnsupportedMediaTypeError) {
    return respond(415, { error: 'UnsupportedMediaType', message: e.message });
  }
  if (isUnavailable(err)) {
    return respond(
      503,
      { error: 'ServiceUnavailable', message: 'a backing service is unavailable; retry later', requestId },
      { 'retry-after': String(RETRY_AFTER_SECONDS) },
    );
  }
  return respond(500, { error: 'InternalError', message: 'internal error', requestId });
}

/** AWS or the cluster is overloaded or unreachable, a write kept losing races, or time ran out. */
function isUnavailable(err: unknown): boolean {
  const name = (err as { name?: string } | undefined)?.name;
  return (
    name === 'AwsUnavailableError' ||
    name === 'ClusterUnavailableError' ||
    name === 'ConcurrentUpdateError' ||
    name === 'TimeoutError'
  );
}

function requestIdOf(event: ApiEvent, context: Context | undefined): string {
  return context?.awsRequestId || event.requestContext?.requestId || 'unknown';
}

function runIdOf(event: ApiEvent, response: ApiResult | null | undefined): string | undefined {
  const fromPath = event.pathParameters?.id;
  if (fromPath) return fromPath;
  if (typeof response?.body !== 'string' || !response.body.startsWith('{"runId"')) return undefined;
  try {
    return (JSON.parse(response.body) as { runId?: string }).runId;
  } catch {
    return undefined;
  }
}

/**
 * Errors → responses, and one log line per request: route, status, duration, request id, the run
 * id (from the path or the response), the caller. 5xx lines carry the error; responses never do.
 * Use it first (outermost), so it sees what the other middlewares threw.
 */
export function httpApi(): MiddlewareObj<ApiEvent, ApiResult, Error, Context, { startedAt?: number }> {
  const finish = (request: {
    event: ApiEvent;
    context: Context;
    response: ApiResult | null | undefined;
    error: Error | null | undefined;
    internal: { startedAt?: number };
  }) => {
    const { event, context, response, error } = request;
    const status = response?.statusCode ?? 500;
    const caller = callers.get(event) ?? callerFromAuthorizer(event.requestContext.authorizer);
    const id = runIdOf(event, response);
    const idField = id?.startsWith('swp-') ? 'sweepId' : 'runId';
    log(status >= 500 ? 'error' : 'info', {
      msg: 'request',
      service: 'gantry-api',
      route: event.routeKey,
      status,
      durationMs: Date.now() - (request.internal.startedAt ?? Date.now()),
      requestId: requestIdOf(event, context),
      ...(id ? { [idField]: id } : {}),
      caller: caller.iamArn ?? caller.sub ?? null,
      ...(error
        ? {
            error: error.name,
            ...(status >= 500
              ? { detail: error.message, stack: error.stack, cause: describeCause(error) }
              : {}),
          }
        : {}),
    });
  };
  return {
    name: 'httpApi',
    before: (request) => {
      request.internal.startedAt = Date.now();
      callerOf(request.event);
    },
    after: (request) => finish(request),
    onError: (request) => {
      request.response = errorResponse(request.error, requestIdOf(request.event, request.context));
      finish(request);
    },
  };
}

function describeCause(err: Error): string | undefined {
  const cause = (err as { cause?: unknown }).cause;
  if (cause === undefined) return undefined;
  return cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
}

/**
 * An API handler whose every log line carries the Lambda request id and the run or sweep id of
 * its path (`/v1/runs/{id}`, `/v1/sweeps/{id}`); wrap the whole middy handler.
 */
export function apiHandler<C extends { awsRequestId?: string }, R>(
  handler: (event: ApiEvent, context: C) => Promise<R>,
): (event: ApiEvent, context: C) => Promise<R> {
  return withLogKeys((event: ApiEvent) => {
    const id = event.pathParameters?.id;
    return id?.startsWith('swp-') ? { sweepId: id } : { runId: id };
  }, handler);
}

/** What a route's code gets: the event, its authenticated caller, and the invocation's abort signal. */
export interface RouteRequest<E extends ApiEvent = ApiEvent> {
  event: E;
  caller: Caller;
  signal: AbortSignal;
}

/**
 * An API route's Lambda handler: `apiHandler(middy(apiOptions).use(httpApi())[.use(jsonBody())]
 * .handler(...))`, so every route logs, maps errors, authenticates and (with `json`) reads its
 * body the same way (`json: 'optional'`: a body may be left out). `options` replaces middy's (default `apiOptions`: abort 1 s before the
 * Lambda timeout).
 */
export function route(
  run: (req: RouteRequest) => Promise<ApiResult>,
  opts?: { json?: false; options?: { timeoutEarlyInMillis?: number } },
): (event: ApiEvent, context: Context) => Promise<ApiResult>;
export function route(
  run: (req: RouteRequest<JsonApiEvent>) => Promise<ApiResult>,
  opts: { json: true | 'optional'; options?: { timeoutEarlyInMillis?: number } },
): (event: ApiEvent, context: Context) => Promise<ApiResult>;
export function route(
  run: (req: RouteRequest<JsonApiEvent>) => Promise<ApiResult>,
  opts: { json?: boolean | 'optional'; options?: { timeoutEarlyInMillis?: number } } = {},
): (event: ApiEvent, context: Context) => Promise<ApiResult> {
  const base = middy<JsonApiEvent, ApiResult>(opts.options ?? apiOptions).use(httpApi());
  // `optional`: a JSON body when one is sent (checked as any other), none at all accepted.
  const withBody = opts.json ? base.use(jsonBody(MAX_BODY_BYTES, opts.json === 'optional')) : base;
  return apiHandler(
    withBody.handler(async (event, _context, { signal }) => run({ event, caller: callerOf(event), signal })),
  );
}
