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
import { getRunLogs } from './_intake.ts';

/** GET /v1/runs/{id}/logs — the tail of a node's trainer container (loads the Kubernetes client). */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const logs = await getRunLogs()(
        {
          caller: callerOf(event),
          runId: event.pathParameters?.id,
          query: event.queryStringParameters ?? {},
        },
        { signal },
      );
      return respond(200, logs);
    }),
);
