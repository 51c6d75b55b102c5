import type { Agent } from 'node:http';
import type { RequestOptions } from 'node:https';
import type { KubeHttp, KubeHttpRequest, KubeHttpResponse } from './custom-objects.ts';

/**
 * The gateway's transport: node:https (node:http for a plain-HTTP server) with TLS material and
 * credentials from the KubeConnection, one keep-alive agent per gateway, built from the TLS material
 * of the first call. Why not client-node's own transport:
 * it imports undici (≈0.7 MB minified, most of the cold start of a bundle) and builds a new undici
 * Agent — a new TCP + TLS connection — for every request (see bench/results/gateway-coldstart.md
 * and function-bundles.md).
 *
 * Cancellation: every call takes the caller's signal; the transport aborts the request with it, or
 * after `timeoutMs`, whichever comes first.
 */

/**
 * What the gateway needs from a KubeConfig. A @kubernetes/client-node `KubeConfig` satisfies it (its
 * `applyToHTTPSOptions` adds TLS material, the bearer token / exec / client-cert credentials and
 * `Impersonate-User`); so does the EKS connection from eks-connection.ts, without loading client-node's
 * config module.
 */
export interface KubeConnection {
  getCurrentCluster(): { server: string; proxyUrl?: string } | null;
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
}

/** node:https / node:http transport with TLS and credentials from the KubeConnection, one keep-alive agent. */
export function makeTransport(conn: KubeConnection, timeoutMs: number): KubeHttp {
  let agent: Agent | undefined;

  async function agentFor(url: URL, tls: RequestOptions): Promise<Agent | undefined> {
    if (tls.agent && conn.getCurrentCluster()?.proxyUrl) return tls.agent as Agent; // KubeConfig's proxy agent
    if (agent) return agent;
    if (url.protocol === 'http:') {
      const http = await import('node:http');
      agent = new http.Agent({ keepAlive: true });
    } else {
      const https = await import('node:https');
      agent = new https.Agent({
        keepAlive: true,
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        pfx: tls.pfx,
        passphrase: tls.passphrase,
        servername: tls.servername,
        ...(tls.rejectUnauthorized === undefined ? {} : { rejectUnauthorized: tls.rejectUnauthorized }),
      });
    }
    return agent;
  }

  return async function send(request: KubeHttpRequest): Promise<KubeHttpResponse> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const caller = request.signal;
    const signal = caller ? AbortSignal.any([caller, timeout]) : timeout;
    signal.throwIfAborted();
    const { url, body } = request;
    const tls: RequestOptions = {};
    await conn.applyToHTTPSOptions(tls); // credentials per call: tokens expire and are refreshed
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(tls.headers ?? {})) if (v !== undefined) headers[k] = String(v);
    Object.assign(headers, request.headers);
    if (body !== undefined) headers['Content-Length'] = String(Buffer.byteLength(body));
    const mod = url.protocol === 'http:' ? await import('node:http') : await import('node:https');
    const useAgent = await agentFor(url, tls);
    return new Promise<KubeHttpResponse>((resolve, reject) => {
      const req = mod.request(
        url,
        { method: request.method, headers, agent: useAgent, signal, auth: tls.auth ?? undefined },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('close', () => {
            if (!res.complete)
              reject(signal.reason ?? new Error('connection closed before the response ended'));
          });
          res.on('end', () => {
            const out: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers)) {
              if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
            }
            resolve({ status: res.statusCode ?? 0, headers: out, body: Buffer.concat(chunks) });
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  };
}
