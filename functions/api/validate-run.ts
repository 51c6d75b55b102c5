import { makeValidateRun } from '../../lib/intake/validate-run.ts';
import { makeUsedInMonth } from '../../lib/usage/usage.ts';
import { clock, gateway, modelOwners, table } from '../_deps.ts';
import { header, respond, route } from './_http.ts';
import { lazy, settings } from './_intake.ts';

const validateRun = lazy(() =>
  makeValidateRun({
    ...settings(),
    owners: modelOwners(),
    gateway,
    usedInMonth: makeUsedInMonth(table()),
    clock,
  }),
);

/**
 * POST /v1/runs/validate — a dry run: 400 / 403 as submit would answer, else 200
 * `{ valid, checks }` with the cluster checks (runtime exists, quota can ever fit).
 */
export const handler = route(
  async ({ event, caller, signal }) => {
    const idempotencyKey = header(event, 'idempotency-key');
    return respond(200, await validateRun()({ caller, body: event.json, idempotencyKey }, { signal }));
  },
  { json: true },
);
