import { makeGetQueuePosition } from '../../lib/queue/queue-position.ts';
import { clock, env, gateway, records, table } from '../_deps.ts';
import { respond, route } from './_http.ts';
import { lazy, settings } from './_intake.ts';

const getQueuePosition = lazy(() =>
  makeGetQueuePosition({
    ...settings(),
    records: records(),
    table: table(),
    gateway,
    clock,
    // 1 on AWS; the embedded default's compressed state-machine time (lib/config.ts).
    deadlineTimeScale: env().GANTRY_STALL_TIME_SCALE,
  }),
);

/** GET /v1/runs/{id}/queue — a pending run's place in its Kueue LocalQueue (Kueue's view or Gantry's). */
export const handler = route(async ({ event, caller, signal }) =>
  respond(200, await getQueuePosition()({ caller, runId: event.pathParameters?.id }, { signal })),
);
