import middy from '@middy/core';
import { toSubmitResponse } from '../../lib/intake/views.ts';
import {
  type ApiEvent,
  type ApiResult,
  apiHandler,
  apiOptions,
  callerOf,
  httpApi,
  respond,
} from './_http.ts';
import { cancelRun } from './_intake.ts';

/**
 * POST /v1/runs/{id}/cancel — 202 once the execution is stopped and the run is Cancelled (the
 * Kubernetes client loads only when the run has a job to delete); 409 when the run already ended.
 */
export const handler = apiHandler(
  middy<ApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .handler(async (event, _context, { signal }) => {
      const record = await cancelRun()(
        { caller: callerOf(event), runId: event.pathParameters?.id },
        { signal },
      );
      return respond(202, toSubmitResponse(record));
    }),
);
