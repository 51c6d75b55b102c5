import { PRINCIPAL_HEADER } from '../../local/http-api.ts';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field in assertions
export type Body = Record<string, any>;

/**
 * A caller of the local HTTP API as a principal (the local host reads the identity from a
 * header; on AWS, API Gateway's authorizer sets it). Returns status, headers and the JSON body.
 */
export function apiClient(baseUrl: () => string, principal: string) {
  return async function call(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) {
    const res = await fetch(`${baseUrl()}${path}`, {
      method,
      headers: {
        [PRINCIPAL_HEADER]: principal,
        ...(body ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : {}) as Body };
  };
}
