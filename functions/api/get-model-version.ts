import { respond, route } from './_http.ts';
import { registry } from './_registry.ts';

/** GET /v1/models/{name}/versions/{version} — the version's manifest and the aliases at it. */
export const handler = route(async ({ event, caller, signal }) =>
  respond(
    200,
    await registry().getVersion(
      { caller, name: event.pathParameters?.name, version: event.pathParameters?.version },
      { signal },
    ),
  ),
);
