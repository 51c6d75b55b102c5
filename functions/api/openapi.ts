import { buildOpenApiDocument } from '../../lib/intake/openapi.ts';
import { respond, route } from './_http.ts';

let document: unknown;

/** GET /v1/openapi.json — the OpenAPI 3.1 document, generated from the zod schemas on first call. */
export const handler = route(
  async () => {
    document ??= buildOpenApiDocument();
    return respond(200, document, { 'cache-control': 'public, max-age=300' });
  },
  { options: {} },
);
