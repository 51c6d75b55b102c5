import { respond, route } from './_http.ts';
import { listRuntimes } from './_intake.ts';

/** GET /v1/runtimes — the ClusterTrainingRuntimes the caller's teams may use (loads the Kubernetes client). */
export const handler = route(async ({ caller, signal }) =>
  respond(200, await listRuntimes()({ caller }, { signal })),
);
