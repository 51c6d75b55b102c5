import { respond, route } from './_http.ts';
import { registry } from './_registry.ts';

/** GET /v1/models — the caller's teams' models, their latest version and aliases. */
export const handler = route(async ({ caller, signal }) =>
  respond(200, await registry().listModels({ caller }, { signal })),
);
