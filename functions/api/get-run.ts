import { toRunView } from '../../lib/intake/views.ts';
import { respond, route } from './_http.ts';
import { getRun } from './_intake.ts';

/** GET /v1/runs/{id} — the run, if it belongs to one of the caller's teams. */
export const handler = route(async ({ event, caller, signal }) =>
  respond(
    200,
    toRunView(await getRun()({ caller, runId: event.pathParameters?.id }, { signal }), new Date()),
  ),
);
