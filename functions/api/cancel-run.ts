import { toSubmitResponse } from '../../lib/intake/views.ts';
import { respond, route } from './_http.ts';
import { cancelRun } from './_intake.ts';

/**
 * POST /v1/runs/{id}/cancel — 202 once the execution is stopped and the run is Cancelled (the
 * Kubernetes client loads only when the run has a job to delete); 409 when the run already ended.
 */
export const handler = route(async ({ event, caller, signal }) => {
  const record = await cancelRun()({ caller, runId: event.pathParameters?.id }, { signal });
  return respond(202, toSubmitResponse(record));
});
