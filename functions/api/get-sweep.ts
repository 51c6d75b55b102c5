import middy from '@middy/core';
import { toSweepView } from '../../lib/intake/views.ts';
import {
  type ApiEvent,
  type ApiResult,
  apiHandler,
  apiOptions,
  callerOf,
  httpApi,
  respond,
} from './_http.ts';
import { getSweep } from './_sweeps.ts';

/** GET /v1/sweeps/{id} — the sweep, its trials and the best so far, if it belongs to one of the caller's teams. */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const record = await getSweep()(
        { caller: callerOf(event), sweepId: event.pathParameters?.id },
        { signal },
      );
      return respond(200, toSweepView(record));
    }),
);
