import middy from '@middy/core';
import { toRunSummary } from '../../lib/intake/views.ts';
import {
  type ApiEvent,
  type ApiResult,
  apiHandler,
  apiOptions,
  callerOf,
  httpApi,
  respond,
} from './_http.ts';
import { listRuns } from './_intake.ts';

/** GET /v1/runs?phase=&sweepId=&model=&limit=&nextToken= — a page of the caller's runs. */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const page = await listRuns()(
        { caller: callerOf(event), query: event.queryStringParameters ?? {} },
        { signal },
      );
      return respond(200, {
        runs: page.runs.map(toRunSummary),
        ...(page.nextToken ? { nextToken: page.nextToken } : {}),
      });
    }),
);
