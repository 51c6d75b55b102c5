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
import { listRuntimes } from './_intake.ts';

/** GET /v1/runtimes — the ClusterTrainingRuntimes the caller's teams may use (loads the Kubernetes client). */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) =>
      respond(200, await listRuntimes()({ caller: callerOf(event) }, { signal })),
    ),
);
