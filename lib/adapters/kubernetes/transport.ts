import type { Agent } from 'node:http';
import type { RequestOptions } from 'node:https';
import type { KubeHttp, KubeHttpRequest, KubeHttpResponse, KubeLines } from './custom-objects.ts';

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

/**
 * node:https / node:http transport with TLS and credentials from the KubeConnection, one keep-alive
 * agent. `lines` streams a response line by line (a watch) until the reader stops it.
 */
export function makeTransport(conn: KubeConnection, timeoutMs: number): KubeHttp & { lines: KubeLines } {
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

  /** The request's URL module, headers (credentials per call: tokens expire and are refreshed) and agent. */
  async function prepare(request: KubeHttpRequest) {
    const tls: RequestOptions = {};
    await conn.applyToHTTPSOptions(tls);
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(tls.headers ?? {})) if (v !== undefined) headers[k] = String(v);
    Object.assign(headers, request.headers);
    if (request.body !== undefined) headers['Content-Length'] = String(Buffer.byteLength(request.body));
    const mod = request.url.protocol === 'http:' ? await import('node:http') : await import('node:https');
    return { mod, headers, agent: await agentFor(request.url, tls), auth: tls.auth ?? undefined };
  }

  function signalOf(request: KubeHttpRequest, ms: number): AbortSignal {
    const timeout = AbortSignal.timeout(ms);
    return request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
  }

  async function send(request: KubeHttpRequest): Promise<KubeHttpResponse> {
    const signal = signalOf(request, timeoutMs);
    signal.throwIfAborted();
    const { mod, headers, agent: useAgent, auth } = await prepare(request);
    return new Promise<KubeHttpResponse>((resolve, reject) => {
      const req = mod.request(
        request.url,
        { method: request.method, headers, agent: useAgent, signal, auth },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('close', () => {
            if (!res.complete)
              reject(signal.reason ?? new Error('connection closed before the response ended'));
          });
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: lowerCase(res.headers),
              body: Buffer.concat(chunks),
            }),
          );
        },
      );
      req.on('error', reject);
      req.end(request.body);
    });
  }

  /**
   * A streamed GET (a watch): each complete line of a 2xx body goes to `onLine` until it answers
   * `'stop'` (the request is then ended) or the server ends the response. A non-2xx response is read
   * whole and returned as `send` returns it. `maxMs` bounds the whole stream (on top of the caller's signal).
   */
  const lines: KubeLines = async (request, onLine, maxMs) => {
    const own = new AbortController();
    const signal = AbortSignal.any([signalOf(request, maxMs), own.signal]);
    signal.throwIfAborted();
    const { mod, headers, agent: useAgent, auth } = await prepare(request);
    return new Promise((resolve, reject) => {
      let stopped = false;
      const req = mod.request(
        request.url,
        { method: request.method, headers, agent: useAgent, signal, auth },
        (res) => {
          const status = res.statusCode ?? 0;
          const chunks: Buffer[] = [];
          let pending = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            if (stopped) return;
            if (status < 200 || status > 299) {
              chunks.push(Buffer.from(c));
              return;
            }
            pending += c;
            for (let nl = pending.indexOf('\n'); nl >= 0 && !stopped; nl = pending.indexOf('\n')) {
              const line = pending.slice(0, nl).trim();
              pending = pending.slice(nl + 1);
              try {
                if (line && onLine(line) === 'stop') stopped = true;
              } catch (err) {
                // A line the reader cannot take (not JSON): the stream ends with that error.
                stopped = true;
                own.abort(err);
                reject(err);
                return;
              }
            }
            if (stopped) {
              resolve({ status, headers: lowerCase(res.headers), body: Buffer.alloc(0), stopped: true });
              own.abort(new Error('watch stopped by its reader'));
            }
          });
          res.on('error', fail);
          res.on('close', () => {
            if (stopped) return;
            // A stream the server ended (its timeoutSeconds), or ours ran out of time: both just end it.
            resolve({ status, headers: lowerCase(res.headers), body: Buffer.concat(chunks), stopped: false });
          });
        },
      );
      req.on('error', fail);
      req.end(request.body);
      /** Our own time bound ended the stream: an end like the server's; the caller's abort is an error. */
      function fail(err: Error) {
        if (stopped) return;
        if (signal.aborted && !request.signal?.aborted)
          resolve({ status: 0, headers: {}, body: Buffer.alloc(0), stopped: false });
        else reject(err);
      }
    });
  };

  return Object.assign(send, { lines });
}

function lowerCase(headers: import('node:http').IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}
