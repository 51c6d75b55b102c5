/**
 * The HTTP API's routes: one Lambda handler per route (`functions/api/<handler>.ts`). The OpenAPI
 * document, the local HTTP host and the deployment read this one table.
 */
export interface Route {
  method: 'GET' | 'POST';
  /** API Gateway HTTP API path, `{name}` for a path parameter. */
  path: string;
  /** The file in functions/api/ whose `handler` serves the route. */
  handler: string;
  operationId: string;
  summary: string;
  /** The route takes a JSON body. */
  body?: boolean;
}

export const ROUTES = [
  {
    method: 'POST',
    path: '/v1/runs',
    handler: 'submit-run',
    operationId: 'submitRun',
    summary: 'Submit a training run (idempotent with an Idempotency-Key)',
    body: true,
  },
  {
    method: 'GET',
    path: '/v1/runs',
    handler: 'list-runs',
    operationId: 'listRuns',
    summary: "List the caller's runs",
  },
  { method: 'GET', path: '/v1/runs/{id}', handler: 'get-run', operationId: 'getRun', summary: 'Get a run' },
  {
    method: 'GET',
    path: '/v1/runs/{id}/metrics',
    handler: 'get-run-metrics',
    operationId: 'getRunMetrics',
    summary: "A run's metric history: every metric its training code reported, as a time series",
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}/events',
    handler: 'get-run-events',
    operationId: 'getRunEvents',
    summary: "A run's lifecycle events so far (the same envelopes and ids webhooks and EventBridge get)",
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}/logs',
    handler: 'get-run-logs',
    operationId: 'getRunLogs',
    summary: "The tail of a node's trainer container log (default node 0, the last 100 lines)",
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/cancel',
    handler: 'cancel-run',
    operationId: 'cancelRun',
    summary: 'Cancel a run: stop its execution and delete its job',
  },
  {
    method: 'POST',
    path: '/v1/runs/{id}/rerun',
    handler: 'rerun-run',
    operationId: 'rerunRun',
    summary:
      'Start a run again as a new run: its request as accepted, with optional overrides (idempotent with an Idempotency-Key)',
    body: true,
  },
  {
    method: 'POST',
    // Not `/v1/runs:validate`: no AWS document lists `:` as allowed in an HTTP API route path.
    path: '/v1/runs/validate',
    handler: 'validate-run',
    operationId: 'validateRun',
    summary: 'Dry run: validate a request against the schema, the tenancy rules and the cluster',
    body: true,
  },
  {
    method: 'POST',
    path: '/v1/sweeps',
    handler: 'submit-sweep',
    operationId: 'submitSweep',
    summary: 'Submit a hyperparameter sweep (idempotent with an Idempotency-Key)',
    body: true,
  },
  {
    method: 'GET',
    path: '/v1/sweeps',
    handler: 'list-sweeps',
    operationId: 'listSweeps',
    summary: "List the caller's sweeps",
  },
  {
    method: 'GET',
    path: '/v1/sweeps/{id}',
    handler: 'get-sweep',
    operationId: 'getSweep',
    summary: "Get a sweep: each trial's parameters, phase and objective, and the best trial",
  },
  {
    method: 'POST',
    path: '/v1/sweeps/{id}/cancel',
    handler: 'cancel-sweep',
    operationId: 'cancelSweep',
    summary: 'Cancel a sweep: stop its trials and delete their jobs',
  },
  {
    method: 'GET',
    path: '/v1/models',
    handler: 'list-models',
    operationId: 'listModels',
    summary: "The caller's teams' models: latest version and where each alias points",
  },
  {
    method: 'GET',
    path: '/v1/models/{name}',
    handler: 'get-model',
    operationId: 'getModel',
    summary: 'A model: its versions (metrics, lineage), its aliases with their history and pending approvals',
  },
  {
    method: 'GET',
    path: '/v1/models/{name}/versions/{version}',
    handler: 'get-model-version',
    operationId: 'getModelVersion',
    summary: 'One published version: its manifest and the aliases pointing at it',
  },
  {
    method: 'POST',
    path: '/v1/models/{name}/aliases/{alias}',
    handler: 'move-model-alias',
    operationId: 'moveModelAlias',
    summary: 'Point an alias at a version (promote, approve, roll back), conditional on where it points now',
    body: true,
  },
  {
    method: 'GET',
    path: '/v1/runtimes',
    handler: 'list-runtimes',
    operationId: 'listRuntimes',
    summary: "The training runtimes the caller's teams may use",
  },
  {
    method: 'GET',
    path: '/v1/runs/{id}/queue',
    handler: 'get-run-queue',
    operationId: 'getRunQueue',
    summary: "A pending run's place in its Kueue LocalQueue (Kueue's visibility API, or Gantry's view)",
  },
  {
    method: 'GET',
    path: '/v1/usage',
    handler: 'get-usage',
    operationId: 'getUsage',
    summary: "A team's (or model's) used and lost GPU-hours of a month or day, and its GPU-hour budget",
  },
  {
    method: 'GET',
    path: '/v1/openapi.json',
    handler: 'openapi',
    operationId: 'getOpenApi',
    summary: 'This document',
  },
] as const satisfies readonly Route[];

/** `POST /v1/runs` — API Gateway's route key. */
export function routeKey(route: Pick<Route, 'method' | 'path'>): string {
  return `${route.method} ${route.path}`;
}
