import type { Post } from '../events/deliver.ts';

/**
 * Webhook POSTs with the platform's fetch: a receiver gets `timeoutMs` to answer (a slow receiver
 * is a failed delivery, retried later); redirects are not followed (a signed event goes only to
 * the configured URL). The response body is read and dropped.
 */
export function makeFetchPost(opts: { timeoutMs?: number } = {}): Post {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return async (url, request, call) => {
    const signals = [AbortSignal.timeout(timeoutMs), ...(call?.signal ? [call.signal] : [])];
    const res = await fetch(url, {
      method: 'POST',
      headers: request.headers,
      body: request.body,
      redirect: 'manual',
      signal: AbortSignal.any(signals),
    });
    await res.arrayBuffer().catch(() => undefined);
    return { status: res.status };
  };
}
