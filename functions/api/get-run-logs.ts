import { respond, route } from './_http.ts';
import { getRunLogs } from './_intake.ts';

/** GET /v1/runs/{id}/logs — the tail of a node's trainer container (loads the Kubernetes client). */
export const handler = route(async ({ event, caller, signal }) => {
  const query = event.queryStringParameters ?? {};
  return respond(200, await getRunLogs()({ caller, runId: event.pathParameters?.id, query }, { signal }));
});
