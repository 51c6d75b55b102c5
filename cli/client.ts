import { SignatureV4 } from '@smithy/signature-v4';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { NodeSha256 } from '../lib/adapters/kubernetes/eks-token.ts';
import { LOCAL_PRINCIPAL_HEADER, type Target } from './profiles.ts';

/**
 * The HTTP client of the CLI: JSON in and out, the target's auth on every call. IAM targets are
 * signed with SigV4 (service `execute-api`) using the standard AWS credential chain (env, shared
 * config and SSO, process, container and instance roles) as the AWS SDK resolves it.
 */

export interface ApiResponse {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: views are read field by field by the commands
  body: any;
}

/** The API answered with an error status. */
export class ApiError extends Error {
  override readonly name = 'ApiError' as const;
  readonly status: number;
  readonly body: unknown;
  constructor(status: number, body: unknown) {
    super(`HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** The API could not be reached, or the call could not be signed. */
export class UnreachableError extends Error {
  override readonly name = 'UnreachableError' as const;
}

export type Fetch = typeof fetch;

export interface Client {
  call(
    method: 'GET' | 'POST',
    path: string,
    opts?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<ApiResponse>;
  target: Target;
}

/** The standard credential chain, through the SDK client Gantry already depends on. */
export async function defaultCredentials(
  region: string,
  awsProfile?: string,
): Promise<AwsCredentialIdentityProvider> {
  const { SQSClient } = await import('@aws-sdk/client-sqs');
  const client = new SQSClient({ region, ...(awsProfile ? { profile: awsProfile } : {}) });
  return () => client.config.credentials();
}

export function makeClient(
  target: Target,
  deps: { fetch?: Fetch; credentials?: AwsCredentialIdentityProvider } = {},
): Client {
  const doFetch = deps.fetch ?? fetch;
  let signer: Promise<SignatureV4> | undefined;

  async function sign(
    url: URL,
    method: string,
    headers: Record<string, string>,
    body: string | undefined,
    region: string,
    awsProfile: string | undefined,
  ): Promise<Record<string, string>> {
    signer ??= (async () =>
      new SignatureV4({
        service: 'execute-api',
        region,
        credentials: deps.credentials ?? (await defaultCredentials(region, awsProfile)),
        sha256: NodeSha256,
      }))();
    const query: Record<string, string> = {};
    for (const [k, v] of url.searchParams) query[k] = v;
    const signed = await (await signer).sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query,
      headers: { ...headers, host: url.host },
      ...(body !== undefined ? { body } : {}),
    });
    const out = { ...(signed.headers as Record<string, string>) };
    delete out.host;
    return out;
  }

  return {
    target,
    async call(method, path, opts = {}) {
      const url = new URL(`${target.endpoint}${path}`);
      const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
      let headers: Record<string, string> = {
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...opts.headers,
      };
      const auth = target.auth;
      if (auth.type === 'local') headers[LOCAL_PRINCIPAL_HEADER] = auth.principal;
      if (auth.type === 'jwt') headers.authorization = `Bearer ${auth.token}`;
      if (auth.type === 'iam') {
        try {
          headers = await sign(url, method, headers, body, auth.region, auth.awsProfile);
        } catch (err) {
          throw new UnreachableError(
            `cannot sign the request for ${target.profile}: ${(err as Error).message}`,
          );
        }
      }
      let res: Response;
      try {
        res = await doFetch(url, { method, headers, ...(body !== undefined ? { body } : {}) });
      } catch (err) {
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        throw new UnreachableError(
          `cannot reach ${target.endpoint} (profile ${target.profile}): ${cause?.code ?? cause?.message ?? (err as Error).message}`,
        );
      }
      const text = await res.text();
      let parsed: unknown = {};
      if (text) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = { message: text.slice(0, 500) };
        }
      }
      if (res.status >= 400) throw new ApiError(res.status, parsed);
      return { status: res.status, headers: res.headers, body: parsed };
    },
  };
}
