import middy from '@middy/core';
import { makeSubmitSweep } from '../../lib/intake/submit-sweep.ts';
import { toSweepView } from '../../lib/intake/views.ts';
import { modelOwners, runQueue } from '../_deps.ts';
import {
  type ApiResult,
  apiHandler,
  apiOptions,
  callerOf,
  header,
  httpApi,
  type JsonApiEvent,
  jsonBody,
  respond,
} from './_http.ts';
import { sweepDeps } from './_sweeps.ts';

/** Submit may release the first trials (SQS). */
const submitSweep = () =>
  makeSubmitSweep({ ...sweepDeps(), owners: modelOwners(), caps: { queue: runQueue() } });

/**
 * POST /v1/sweeps — 202 and a Location for a new sweep (its first trials are already queued);
 * 200 with the same body for a replay (same Idempotency-Key, same request); 400 / 403 / 409.
 */
export const handler = apiHandler(
  middy<JsonApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .use(jsonBody())
    .handler(async (event, _context, { signal }) => {
      const { record, created } = await submitSweep()(
        { caller: callerOf(event), body: event.json, idempotencyKey: header(event, 'idempotency-key') },
        { signal },
      );
      const body = toSweepView(record);
      return respond(created ? 202 : 200, body, { location: body.links.self });
    }),
);
