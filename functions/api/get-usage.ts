import { makeGetUsage } from '../../lib/usage/usage.ts';
import { clock, table } from '../_deps.ts';
import { respond, route } from './_http.ts';
import { lazy, settings } from './_intake.ts';

const getUsage = lazy(() => makeGetUsage({ ...settings(), table: table(), clock }));

/** GET /v1/usage?team=&model=&period= — a team's GPU-hours of a month or day from its ledger, and its budget. */
export const handler = route(async ({ event, caller, signal }) =>
  respond(200, await getUsage()({ caller, query: event.queryStringParameters ?? {} }, { signal })),
);
