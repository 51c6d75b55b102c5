import { respond, route } from './_http.ts';
import { getRunMetrics } from './_intake.ts';

/** GET /v1/runs/{id}/metrics — the run's metric history, if it belongs to one of the caller's teams. */
export const handler = route(async ({ event, caller, signal }) =>
  respond(200, await getRunMetrics()({ caller, runId: event.pathParameters?.id }, { signal })),
);
