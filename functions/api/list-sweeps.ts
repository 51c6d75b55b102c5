import { toSweepSummary } from '../../lib/intake/views.ts';
import { respond, route } from './_http.ts';
import { listSweeps } from './_sweeps.ts';

/** GET /v1/sweeps?team=&phase=&since=&limit=&nextToken= — a page of the caller's team's sweeps. */
export const handler = route(async ({ event, caller, signal }) => {
  const page = await listSweeps()({ caller, query: event.queryStringParameters ?? {} }, { signal });
  const more = page.nextToken ? { nextToken: page.nextToken } : {};
  return respond(200, { sweeps: page.sweeps.map(toSweepSummary), ...more });
});
