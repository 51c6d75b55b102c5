import { toSweepView } from '../../lib/intake/views.ts';
import { respond, route } from './_http.ts';
import { getSweep } from './_sweeps.ts';

/** GET /v1/sweeps/{id} — the sweep, its trials and the best so far, if it belongs to one of the caller's teams. */
export const handler = route(async ({ event, caller, signal }) =>
  respond(200, toSweepView(await getSweep()({ caller, sweepId: event.pathParameters?.id }, { signal }))),
);
