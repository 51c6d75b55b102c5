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
import { cancelSweep } from './_sweeps.ts';

/**
 * POST /v1/sweeps/{id}/cancel — 202 once no trial runs any more (each stopped, its job deleted)
 * and the sweep is Cancelled; 409 when the sweep already ended.
 */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const record = await cancelSweep()(
        { caller: callerOf(event), sweepId: event.pathParameters?.id },
        { signal },
      );
      return respond(202, toSweepView(record));
    }),
);
