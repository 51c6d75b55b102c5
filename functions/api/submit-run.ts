import { makeInFlight } from '../../lib/intake/in-flight.ts';
import { makeSubmitRun } from '../../lib/intake/submit-run.ts';
import { toSubmitResponse } from '../../lib/intake/views.ts';
import { makeUsedInMonth } from '../../lib/usage/usage.ts';
import { clock, modelOwners, records, runQueue, table } from '../_deps.ts';
import { header, respond, route } from './_http.ts';
import { lazy, settings } from './_intake.ts';

const submitRun = lazy(() =>
  makeSubmitRun({
    ...settings(),
    records: records(),
    owners: modelOwners(),
    queue: runQueue(),
    clock,
    inFlight: makeInFlight(table()),
    usedInMonth: makeUsedInMonth(table()),
  }),
);

/**
 * POST /v1/runs — 202 and a Location for a new run; 200 with the same body for a replay (same
 * Idempotency-Key, same request); 400 / 403 / 409 / 413 / 415, or 429 with Retry-After at the team's caps, otherwise (see _http.ts).
 */
export const handler = route(
  async ({ event, caller, signal }) => {
    const idempotencyKey = header(event, 'idempotency-key');
    const { record, created, budgetWarning } = await submitRun()(
      { caller, body: event.json, idempotencyKey },
      { signal },
    );
    const body = toSubmitResponse(record);
    const warning = budgetWarning ? { 'gantry-budget-warning': budgetWarning } : {};
    return respond(created ? 202 : 200, body, { location: body.links.self, ...warning });
  },
  { json: true },
);
