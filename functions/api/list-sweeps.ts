import middy from '@middy/core';
import { toSweepSummary } from '../../lib/intake/views.ts';
import {
  type ApiEvent,
  type ApiResult,
  apiHandler,
  apiOptions,
  callerOf,
  httpApi,
  respond,
} from './_http.ts';
import { listSweeps } from './_sweeps.ts';

/** GET /v1/sweeps?team=&phase=&since=&limit=&nextToken= — a page of the caller's team's sweeps. */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const page = await listSweeps()(
        { caller: callerOf(event), query: event.queryStringParameters ?? {} },
        { signal },
      );
      return respond(200, {
        sweeps: page.sweeps.map(toSweepSummary),
        ...(page.nextToken ? { nextToken: page.nextToken } : {}),
      });
    }),
);
