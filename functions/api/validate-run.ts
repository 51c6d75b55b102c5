import middy from '@middy/core';
import { makeValidateRun } from '../../lib/intake/validate-run.ts';
import { gateway, modelOwners } from '../_deps.ts';
import {
  type ApiResult,
  apiHandler,
  apiOptions,
  callerOf,
  header,
  httpApi,
  type JsonApiEvent,
  jsonBody,
  respond,
} from './_http.ts';
import { lazy, settings } from './_intake.ts';

const validateRun = lazy(() => makeValidateRun({ ...settings(), owners: modelOwners(), gateway }));

/**
 * POST /v1/runs:validate — a dry run: 400 / 403 as submit would answer, else 200
 * `{ valid, checks }` with the cluster checks (runtime exists, quota can ever fit).
 */
export const handler = apiHandler(
  middy<JsonApiEvent, ApiResult>(apiOptions)
    .use(httpApi())
    .use(jsonBody())
    .handler(async (event, _context, { signal }) =>
      respond(
        200,
        await validateRun()(
          { caller: callerOf(event), body: event.json, idempotencyKey: header(event, 'idempotency-key') },
          { signal },
        ),
      ),
    ),
);
