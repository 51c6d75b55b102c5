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
import { getRunEvents } from './_intake.ts';

/** GET /v1/runs/{id}/events — the run's lifecycle events, if it belongs to one of the caller's teams. */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const events = await getRunEvents()(
        { caller: callerOf(event), runId: event.pathParameters?.id },
        { signal },
      );
      return respond(200, events);
    }),
);
