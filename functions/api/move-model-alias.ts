import { respond, route } from './_http.ts';
import { registry } from './_registry.ts';

/**
 * POST /v1/models/{name}/aliases/{alias} {version, expectedVersion?, reason?} — 200 with the alias
 * as moved (and an alias-moved event to the serving stage); 409 when it no longer points at
 * `expectedVersion`.
 */
export const handler = route(
  async ({ event, caller, signal }) =>
    respond(
      200,
      await registry().moveAlias(
        { caller, name: event.pathParameters?.name, alias: event.pathParameters?.alias, body: event.json },
        { signal },
      ),
    ),
  { json: true },
);
