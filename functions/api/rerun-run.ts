import { makeInFlight } from '../../lib/intake/in-flight.ts';
import { makeRerunRun } from '../../lib/intake/rerun-run.ts';
import { makeSubmitRun } from '../../lib/intake/submit-run.ts';
import { toSubmitResponse } from '../../lib/intake/views.ts';
import { clock, modelOwners, records, runQueue, table } from '../_deps.ts';
import { header, respond, route } from './_http.ts';
import { lazy, settings } from './_intake.ts';

const rerunRun = lazy(() =>
  makeRerunRun({
    ...settings(),
    records: records(),
    submit: makeSubmitRun({
      ...settings(),
      records: records(),
      owners: modelOwners(),
      queue: runQueue(),
      clock,
      inFlight: makeInFlight(table()),
    }),
  }),
);

/**
 * POST /v1/runs/{id}/rerun — the run's request again (with the body's `overrides`) as a new run:
 * 202 and a Location, 200 for a replay (same Idempotency-Key, same result); the errors of submit.
 */
export const handler = route(
  async ({ event, caller, signal }) => {
    const idempotencyKey = header(event, 'idempotency-key');
    const { record, created } = await rerunRun()(
      { caller, runId: event.pathParameters?.id, body: event.json, idempotencyKey },
      { signal },
    );
    const body = toSubmitResponse(record);
    return respond(created ? 202 : 200, body, { location: body.links.self });
  },
  { json: 'optional' },
);
