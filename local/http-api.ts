import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { config } from '../functions/_config.ts';
import type { TeamConfig } from '../lib/config.ts';
import { parsePrincipal } from '../lib/intake/principals.ts';
import { ROUTES, routeKey } from '../lib/intake/routes.ts';
import { DASHBOARD_ROUTES } from '../lib/web/assets.ts';
import { type LambdaHandler, localContext } from './lambda.ts';

/**
 * A local stand-in for API Gateway's HTTP API: node:http requests become HTTP API (payload v2)
 * events and go to the same handler exports Lambda runs. LOCAL ONLY: the caller's identity is
 * whatever the `x-gantry-principal` header (a team principal as the configuration names it:
 * `local:NAME`, an IAM ARN, `sso:A:SET` — see `localUserArn`) or the `x-gantry-jwt-claims`
 * header (a JSON object of JWT claims, as a JWT authorizer would pass them on) says, or what
 * `identity` returns — there is no authentication; on AWS the IAM or JWT authorizer fills
 * `requestContext.authorizer`. The handlers check JWT claims (issuer, scopes) themselves, so
 * forged claims meet the same checks as on AWS. The server binds 127.0.0.1 only.
 */

/** The identity a local request carries: an IAM principal ARN, or JWT claims. */
export type LocalIdentity = string | { claims: Record<string, string | string[]> } | undefined;

export const PRINCIPAL_HEADER = 'x-gantry-principal';
export const JWT_CLAIMS_HEADER = 'x-gantry-jwt-claims';

/** The session name the local host gives a role or Identity Center caller. */
export const LOCAL_SESSION = 'local-session';

/**
 * The `userArn` API Gateway would present for a caller who uses this principal: a role ARN
 * (`arn:aws:iam::A:role/[path/]NAME`) becomes a session of the role,
 * `arn:aws:sts::A:assumed-role/NAME/local-session` (the path dropped, as STS does); `sso:A:SET`
 * becomes a session of the permission set's reserved role; anything else (`local:NAME`, a user, a
 * session, a federated user) is presented as written. So the local host exercises the same
 * matching as AWS.
 */
export function localUserArn(principal: string): string {
  const p = parsePrincipal(principal);
  if (!('kind' in p)) return principal;
  if (p.kind === 'role') {
    return `arn:${p.partition}:sts::${p.account}:assumed-role/${p.name}/${LOCAL_SESSION}`;
  }
  if (p.kind === 'sso') {
    return `arn:aws:sts::${p.account}:assumed-role/AWSReservedSSO_${p.permissionSet}_0000000000000000/${LOCAL_SESSION}`;
  }
  return principal;
}

/**
 * What a member of the team sends as `x-gantry-principal`: its first `local:` principal, else its
 * first IAM one (a trailing `*` filled in), else undefined (a team of JWT values only).
 */
export function localPrincipalOf(team: Pick<TeamConfig, 'principals'>): string | undefined {
  const fill = (p: string) => (p.endsWith('*') ? `${p.slice(0, -1)}me` : p);
  const kinds = team.principals.map((text) => ({ text, parsed: parsePrincipal(text) }));
  const local = kinds.find((k) => 'kind' in k.parsed && k.parsed.kind === 'local');
  if (local) return local.text;
  const iam = kinds.find((k) => 'kind' in k.parsed && k.parsed.kind !== 'claim' && k.parsed.kind !== 'local');
  return iam ? fill(iam.text) : undefined;
}

/**
 * How to act as each team on this host, for a 403 that found the caller in no team: the header,
 * and the CLI's flag and variable.
 */
export function actAsHint(teams: readonly Pick<TeamConfig, 'name' | 'principals'>[]): string {
  const lines = teams.slice(0, 20).map((t) => {
    const p = localPrincipalOf(t);
    return p
      ? `team ${t.name}: header '${PRINCIPAL_HEADER}: ${p}', CLI --principal ${p} (or GANTRY_PRINCIPAL=${p})`
      : `team ${t.name}: JWT claims only (header ${JWT_CLAIMS_HEADER}); it has no IAM or local: principal`;
  });
  return ['act as a team on this local host:', ...lines].join('\n');
}

/** The default local identity: JWT claims from `x-gantry-jwt-claims`, else the principal header. */
export function headerIdentity(req: IncomingMessage): LocalIdentity {
  const claims = req.headers[JWT_CLAIMS_HEADER];
  if (typeof claims === 'string') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(claims);
    } catch {
      parsed = undefined;
    }
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(parsed)) {
      if (typeof v === 'string') out[k] = v;
      else if (Array.isArray(v)) out[k] = v.map(String);
      else if (typeof v === 'number' || typeof v === 'boolean') out[k] = String(v);
    }
    return { claims: out };
  }
  return req.headers[PRINCIPAL_HEADER] as string | undefined;
}

export interface HttpApiOptions {
  /**
   * The configured teams, read when a 403 finds the caller in no team: the answer then says how to
   * act as each (default: the handlers' own configuration, GANTRY_CONFIG; none → no hint).
   */
  teams?: () => readonly Pick<TeamConfig, 'name' | 'principals'>[];
  /** Route key (`POST /v1/runs/{id}/cancel`) → handler. */
  routes: Record<string, LambdaHandler>;
  port?: number;
  /** Who the caller is (default: `headerIdentity`, the JWT claims or the principal header). */
  identity?: (req: IncomingMessage) => LocalIdentity;
  /** Bodies above this are refused before a handler sees them, as API Gateway does (10 MB). */
  maxBodyBytes?: number;
  /** Lambda timeout given to the handler's context. */
  timeoutMs?: number;
  /**
   * Until this settles every request answers 503 with `Retry-After` (a restart of `npm run dev`
   * restores the runs it found in flight first: no caller reads a run that is about to change).
   */
  ready?: Promise<unknown>;
}

/** Every route of lib/intake/routes.ts → its handler in functions/api/ (loaded on first request). */
export function apiRoutes(): Record<string, LambdaHandler> {
  return Object.fromEntries(
    ROUTES.map((route) => {
      let loaded: Promise<LambdaHandler> | undefined;
      const handler: LambdaHandler = async (event, context) => {
        loaded ??= import(`../functions/api/${route.handler}.ts`).then(
          (m: { handler: LambdaHandler }) => m.handler,
        );
        return (await loaded)(event, context);
      };
      return [routeKey(route), handler];
    }),
  );
}

/**
 * The dashboard's routes (`GET /`, `GET /ui/{proxy+}`) → functions/web/dashboard.ts, the handler
 * JWT stacks deploy. Its files need no identity; the page's API calls carry one.
 */
export function dashboardRoutes(): Record<string, LambdaHandler> {
  let loaded: Promise<LambdaHandler> | undefined;
  const handler: LambdaHandler = async (event, context) => {
    loaded ??= import('../functions/web/dashboard.ts').then((m: { handler: LambdaHandler }) => m.handler);
    return (await loaded)(event, context);
  };
  return Object.fromEntries(DASHBOARD_ROUTES.map((key) => [key, handler]));
}

interface CompiledRoute {
  key: string;
  method: string;
  pattern: RegExp;
  params: string[];
  handler: LambdaHandler;
}

function compile(key: string, handler: LambdaHandler): CompiledRoute {
  const [method = '', path = ''] = key.split(' ');
  const params: string[] = [];
  const source = path
    .split(/(\{[^}]+\})/)
    .map((part) => {
      const m = /^\{([^}+]+)(\+)?\}$/.exec(part);
      if (!m) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      params.push(m[1] as string);
      return m[2] ? '(.+)' : '([^/]+)';
    })
    .join('');
  return { key, method, pattern: new RegExp(`^${source}$`), params, handler };
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** Header names lower-cased; repeated headers joined with commas, as HTTP API v2 does. */
function headersOf(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  }
  return out;
}

function authorizerOf(identity: LocalIdentity): Record<string, unknown> | undefined {
  if (identity === undefined) return undefined;
  if (typeof identity === 'string') {
    const userArn = localUserArn(identity);
    return {
      iam: {
        accessKey: 'LOCAL',
        accountId: (userArn.startsWith('arn:') ? userArn.split(':')[4] : undefined) || '000000000000',
        callerId: 'LOCAL',
        cognitoIdentity: null,
        principalOrgId: null,
        userArn,
        userId: 'LOCAL',
      },
    };
  }
  // HTTP API JWT authorizers hand array claims over as one "[a b]" string.
  const claims = Object.fromEntries(
    Object.entries(identity.claims).map(([k, v]) => [k, Array.isArray(v) ? `[${v.join(' ')}]` : v]),
  );
  return { jwt: { claims, scopes: null } };
}

/**
 * A 403 body that found the caller in no team (or without identity), its message followed by how
 * to act as a team on this host (in the message: the body keeps the documented error shape).
 */
function withHint(
  body: string | undefined,
  teams: () => readonly Pick<TeamConfig, 'name' | 'principals'>[],
): string | undefined {
  let parsed: { message?: unknown };
  try {
    parsed = JSON.parse(body ?? '');
  } catch {
    return body;
  }
  const message = typeof parsed.message === 'string' ? parsed.message : '';
  if (!/belongs to no team|carries no caller identity/.test(message)) return body;
  let configured: readonly Pick<TeamConfig, 'name' | 'principals'>[];
  try {
    configured = teams();
  } catch {
    return body;
  }
  return JSON.stringify({ ...parsed, message: `${message}\n${actAsHint(configured)}` });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

export async function startHttpApi(opts: HttpApiOptions) {
  const routes = Object.entries(opts.routes).map(([key, handler]) => compile(key, handler));
  const identity = opts.identity ?? headerIdentity;
  const teams = opts.teams ?? (() => config().teams);
  const maxBody = opts.maxBodyBytes ?? 10 * 1024 * 1024;

  let starting = opts.ready !== undefined;
  void opts.ready?.then(
    () => {
      starting = false;
    },
    () => {
      starting = false;
    },
  );

  async function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
    if (starting) {
      res.setHeader('Retry-After', '1');
      send(res, 503, {
        message: 'starting: restoring the runs found in flight at the last stop; retry in a moment',
      });
      return;
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const rawPath = url.pathname;
    const method = req.method ?? 'GET';
    let route: CompiledRoute | undefined;
    let match: RegExpExecArray | null = null;
    let pathMatched = false;
    for (const r of routes) {
      const m = r.pattern.exec(rawPath);
      if (!m) continue;
      pathMatched = true;
      if (r.method === method) {
        route = r;
        match = m;
        break;
      }
    }
    if (!route || !match) {
      send(res, pathMatched ? 405 : 404, { message: pathMatched ? 'Method Not Allowed' : 'Not Found' });
      return;
    }
    const pathParameters = Object.fromEntries(
      route.params.map((p, i) => [p, decode(match[i + 1] as string)]),
    );
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) query[k] = k in query ? `${query[k]},${v}` : v;
    const headers = headersOf(req);
    const now = new Date();
    const requestId = randomUUID();
    const authorizer = authorizerOf(identity(req));
    const event = {
      version: '2.0',
      routeKey: route.key,
      rawPath,
      rawQueryString: url.search.slice(1),
      headers,
      ...(Object.keys(query).length ? { queryStringParameters: query } : {}),
      ...(route.params.length ? { pathParameters } : {}),
      requestContext: {
        accountId: '000000000000',
        apiId: 'local',
        ...(authorizer ? { authorizer } : {}),
        domainName: headers.host ?? 'localhost',
        domainPrefix: 'local',
        http: {
          method,
          path: rawPath,
          protocol: `HTTP/${req.httpVersion}`,
          sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
          userAgent: headers['user-agent'] ?? '',
        },
        requestId,
        routeKey: route.key,
        stage: '$default',
        time: now.toUTCString(),
        timeEpoch: now.getTime(),
      },
      ...(body.length ? { body: body.toString('utf8') } : {}),
      isBase64Encoded: false,
    };
    const context = localContext(
      `gantry-api-${route.key.replace(/[^A-Za-z0-9]+/g, '-')}`,
      opts.timeoutMs ?? 29_000,
    );
    let result: APIGatewayProxyStructuredResultV2;
    try {
      result = (await route.handler(event as never, context)) as APIGatewayProxyStructuredResultV2;
    } catch {
      // Lambda's unhandled error through API Gateway: a bare 500.
      send(res, 500, { message: 'Internal Server Error' });
      return;
    }
    const outHeaders = Object.fromEntries(
      Object.entries(result.headers ?? {}).map(([k, v]) => [k, String(v)]),
    );
    const out = result.statusCode === 403 ? withHint(result.body, teams) : result.body;
    res.writeHead(result.statusCode ?? 200, outHeaders);
    res.end(result.isBase64Encoded ? Buffer.from(out ?? '', 'base64') : (out ?? ''));
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBody && !refused) {
        refused = true;
        send(res, 413, { message: 'Request Entity Too Large' });
        req.resume();
      }
      if (!refused) chunks.push(chunk);
    });
    req.on('end', () => {
      if (refused) return;
      handle(req, res, Buffer.concat(chunks)).catch(() => {
        if (!res.headersSent) send(res, 500, { message: 'Internal Server Error' });
        else res.end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
