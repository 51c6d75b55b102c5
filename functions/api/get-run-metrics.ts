import middy from '@middy/core';
import {
  type ApiEvent,
  type ApiResult,
  apiHandler,
  apiOptions,
  callerOf,
  httpApi,
  respond,
} from './_http.ts';
import { getRunMetrics } from './_intake.ts';

/** GET /v1/runs/{id}/metrics — the run's metric history, if it belongs to one of the caller's teams. */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const history = await getRunMetrics()(
        { caller: callerOf(event), runId: event.pathParameters?.id },
        { signal },
      );
      return respond(200, history);
    }),
);
