import { toRunSummary } from '../../lib/intake/views.ts';
import { respond, route } from './_http.ts';
import { listRuns } from './_intake.ts';

/** GET /v1/runs?phase=&sweepId=&model=&limit=&nextToken= — a page of the caller's runs. */
export const handler = route(async ({ event, caller, signal }) => {
  const page = await listRuns()({ caller, query: event.queryStringParameters ?? {} }, { signal });
  const more = page.nextToken ? { nextToken: page.nextToken } : {};
  return respond(200, { runs: page.runs.map(toRunSummary), ...more });
});
