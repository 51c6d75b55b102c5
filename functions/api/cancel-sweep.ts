import { toSweepView } from '../../lib/intake/views.ts';
import { respond, route } from './_http.ts';
import { cancelSweep } from './_sweeps.ts';

/**
 * POST /v1/sweeps/{id}/cancel — 202 once no trial runs any more (each stopped, its job deleted)
 * and the sweep is Cancelled; 409 when the sweep already ended.
 */
export const handler = route(async ({ event, caller, signal }) => {
  const record = await cancelSweep()({ caller, sweepId: event.pathParameters?.id }, { signal });
  return respond(202, toSweepView(record));
});
