import { respond, route } from './_http.ts';
import { registry } from './_registry.ts';

/** GET /v1/models/{name}?limit= — versions (newest first), aliases with history and pending approvals. */
export const handler = route(async ({ event, caller, signal }) =>
  respond(
    200,
    await registry().getModel(
      { caller, name: event.pathParameters?.name, limit: event.queryStringParameters?.limit },
      { signal },
    ),
  ),
);
