import { respond, route } from './_http.ts';
import { getRunEvents } from './_intake.ts';

/** GET /v1/runs/{id}/events — the run's lifecycle events, if it belongs to one of the caller's teams. */
export const handler = route(async ({ event, caller, signal }) =>
  respond(200, await getRunEvents()({ caller, runId: event.pathParameters?.id }, { signal })),
);
