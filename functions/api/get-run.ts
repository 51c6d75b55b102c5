import middy from '@middy/core';
import { toRunView } from '../../lib/intake/views.ts';
import {
  type ApiEvent,
  type ApiResult,
  apiHandler,
  apiOptions,
  callerOf,
  httpApi,
  respond,
} from './_http.ts';
import { getRun } from './_intake.ts';

/** GET /v1/runs/{id} — the run, if it belongs to one of the caller's teams. */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const record = await getRun()({ caller: callerOf(event), runId: event.pathParameters?.id }, { signal });
      return respond(200, toRunView(record, new Date()));
    }),
);
