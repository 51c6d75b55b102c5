import { RunRequestSchema } from '../run/schema.ts';
import { SweepRequestSchema } from '../sweep/schema.ts';
import { usageQuerySchema } from '../usage/usage.ts';
import * as z from '../zod.ts';
import { runLogsQuerySchema } from './logs.ts';
import {
  AliasConflictBodySchema,
  AliasMovedSchema,
  ModelListSchema,
  ModelVersionSchema,
  ModelViewSchema,
} from './model-schemas.ts';
import { moveAliasSchema } from './models.ts';
import { rerunBodySchema } from './rerun-run.ts';
import { ROUTES, type Route } from './routes.ts';
import { listRunsQuerySchema } from './runs.ts';
import { IDEMPOTENCY_HEADER } from './submit-run.ts';
import { listSweepsQuerySchema } from './sweeps.ts';
import { QueuePositionSchema, UsageViewSchema } from './usage-schemas.ts';
import {
  CancelResponseSchema,
  ErrorBodySchema,
  ForbiddenBodySchema,
  MetricHistorySchema,
  RunEventsSchema,
  RunFinishedBodySchema,
  RunListSchema,
  RunLogsSchema,
  RunLogsUnavailableBodySchema,
  RuntimeListSchema,
  RunViewSchema,
  SubmitResponseSchema,
  SweepFinishedBodySchema,
  SweepListSchema,
  SweepViewSchema,
  ValidateResponseSchema,
  ValidationErrorBodySchema,
} from './view-schemas.ts';

/**
 * The OpenAPI 3.1 document of the HTTP API, generated from the same zod schemas the handlers
 * parse with (OpenAPI 3.1 schemas are JSON Schema 2020-12, which z.toJSONSchema emits). Refinements
 * that JSON Schema cannot express (reserved prefixes, byte totals, cross-field rules) are enforced
 * by the API and described in the 400 response's `issues`.
 */

type Json = Record<string, unknown>;

function jsonSchema(schema: z.core.$ZodType, io: 'input' | 'output'): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Json;
  return rest;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json, description: string, headers?: Json) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema } },
});

/** An ErrorBody whose `error` is this name: what the handlers send for that status (functions/api/_http.ts). */
const errorOf = (name: string) => ({
  allOf: [ref('ErrorBody'), { properties: { error: { const: name } } }],
});

const ERRORS = {
  400: json(
    { oneOf: [ref('ValidationErrorBody'), errorOf('InvalidJson')] },
    'The request breaks the schema (`ValidationError`, one issue per field) or is not JSON (`InvalidJson`)',
  ),
  401: json(
    errorOf('Unauthenticated'),
    'A JWT caller whose token is not from the pinned issuer (`Unauthenticated`; `WWW-Authenticate: Bearer error="invalid_token"`)',
  ),
  403: json(ref('ForbiddenBody'), "The caller's team may not do this; `rule` names the rule"),
  404: json(
    errorOf('NotFoundError'),
    "No such run or sweep, or another team's (`NotFoundError`; the two answers are the same)",
  ),
  413: json(errorOf('PayloadTooLarge'), 'The body is larger than 256 KiB (`PayloadTooLarge`)'),
  429: json(
    errorOf('TeamLimitError'),
    "The team's runs or GPUs in flight are at its cap (`TeamLimitError`, `limit` names which); nothing was recorded",
    {
      'Retry-After': { description: 'Seconds to wait before submitting again', schema: { type: 'integer' } },
    },
  ),
  415: json(errorOf('UnsupportedMediaType'), 'The body is not application/json (`UnsupportedMediaType`)'),
  500: json(errorOf('InternalError'), 'Internal error; the body carries a request id and no details'),
  503: json(
    errorOf('ServiceUnavailable'),
    'AWS or the cluster is unavailable; retry after `Retry-After` seconds',
    {
      'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' } },
    },
  ),
} as const;

const runLocation = {
  Location: { description: 'The run: /v1/runs/{id}', schema: { type: 'string' } },
};

const idempotencyHeader = {
  name: IDEMPOTENCY_HEADER,
  in: 'header',
  required: false,
  description:
    'Idempotency key (printable ASCII, ≤ 128). The same key and body return the same run; the same key with another body is a 409. Wins over `idempotencyKey` in the body; both given and different is a 400.',
  schema: { type: 'string', minLength: 1, maxLength: 128, pattern: '^[\\x21-\\x7e]+$' },
};

const runIdParameter = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'Run id',
  schema: { type: 'string', pattern: '^run-[a-z2-7]{20}$' },
};

const sweepIdParameter = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'Sweep id',
  schema: { type: 'string', pattern: '^swp-[a-z2-7]{20}$' },
};

const runRequestBody = {
  required: true,
  content: { 'application/json': { schema: ref('RunRequest') } },
};

function queryParameters(shape: Record<string, z.core.$ZodType>): Json[] {
  return Object.entries(shape).map(([name, schema]) => {
    const { description, ...s } = jsonSchema(schema, 'input');
    return { name, in: 'query', required: false, ...(description ? { description } : {}), schema: s };
  });
}

/**
 * Each route's operation (without its operationId and summary, which come from the route table),
 * by operationId; built on use, as the query schemas are.
 */
const OPERATIONS: Record<string, () => Json> = {
  submitRun: () => ({
    parameters: [idempotencyHeader],
    requestBody: runRequestBody,
    responses: {
      202: json(ref('SubmitResponse'), 'Accepted: the run is recorded and queued', {
        ...runLocation,
        'Gantry-Budget-Warning': {
          description:
            'Present when the team is past the soft threshold of its monthly GPU-hour budget: how much it used and when it resets',
          schema: { type: 'string' },
        },
      }),
      200: json(ref('SubmitResponse'), 'Replay: this key and body were submitted before', runLocation),
      400: ERRORS[400],
      403: ERRORS[403],
      409: json(
        errorOf('IdempotencyConflictError'),
        'The idempotency key was used with another body (`IdempotencyConflictError`)',
      ),
      413: ERRORS[413],
      415: ERRORS[415],
      429: ERRORS[429],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  listRuns: () => ({
    parameters: queryParameters(listRunsQuerySchema().shape),
    responses: {
      200: json(ref('RunList'), "A page of one of the caller's teams' runs, newest first"),
      400: ERRORS[400],
      403: ERRORS[403],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  listSweeps: () => ({
    parameters: queryParameters(listSweepsQuerySchema().shape),
    responses: {
      200: json(ref('SweepList'), "A page of one of the caller's teams' sweeps, newest first"),
      400: ERRORS[400],
      403: ERRORS[403],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getRun: () => ({
    parameters: [runIdParameter],
    responses: {
      200: json(ref('RunView'), 'The run'),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getRunMetrics: () => ({
    parameters: [runIdParameter],
    responses: {
      200: json(ref('MetricHistory'), 'The metric history (empty series before the first report)'),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getRunEvents: () => ({
    parameters: [runIdParameter],
    responses: {
      200: json(ref('RunEvents'), "The run's lifecycle events, oldest first"),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getRunLogs: () => ({
    parameters: [runIdParameter, ...queryParameters(runLogsQuerySchema().shape)],
    responses: {
      200: json(ref('RunLogs'), "The last lines of the node's trainer container"),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      409: json(
        ref('RunLogsUnavailableBody'),
        'No log to read yet (no job or pod for the node, its container has not started) or any more (the run ended and its pods are gone); `phase` says where the run is',
      ),
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  cancelRun: () => ({
    parameters: [runIdParameter],
    responses: {
      202: json(
        ref('CancelResponse'),
        'Cancelled (also for a run that was already cancelled), or Cancelling while its job still exists: the deletion failed and the reconciler retries it with back-off, then records Cancelled',
      ),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      409: json(ref('RunFinishedBody'), 'The run already ended; `phase` says how'),
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  rerunRun: () => ({
    parameters: [runIdParameter, idempotencyHeader],
    requestBody: {
      required: false,
      description: 'Optional: without a body, the run is started again as it was accepted',
      content: { 'application/json': { schema: ref('RerunRequest') } },
    },
    responses: {
      202: json(
        ref('SubmitResponse'),
        'Accepted: the new run is recorded and queued; `rerunOf` names the run it came from',
        runLocation,
      ),
      200: json(ref('SubmitResponse'), 'Replay: this key and overrides were sent before', runLocation),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      409: json(
        errorOf('IdempotencyConflictError'),
        'The idempotency key was used with another request (`IdempotencyConflictError`)',
      ),
      413: ERRORS[413],
      415: ERRORS[415],
      429: ERRORS[429],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  validateRun: () => ({
    parameters: [idempotencyHeader],
    requestBody: runRequestBody,
    responses: {
      200: json(ref('ValidateResponse'), 'The checks; `valid` is false when one failed'),
      400: ERRORS[400],
      403: ERRORS[403],
      413: ERRORS[413],
      415: ERRORS[415],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  submitSweep: () => ({
    parameters: [idempotencyHeader],
    requestBody: {
      required: true,
      content: { 'application/json': { schema: ref('SweepRequest') } },
    },
    responses: {
      202: json(ref('SweepView'), 'Accepted: the sweep is recorded and its first trials are queued'),
      200: json(ref('SweepView'), 'Replay: this key and body were submitted before'),
      400: ERRORS[400],
      403: ERRORS[403],
      409: json(
        errorOf('IdempotencyConflictError'),
        'The idempotency key was used with another body (`IdempotencyConflictError`)',
      ),
      413: ERRORS[413],
      415: ERRORS[415],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getSweep: () => ({
    parameters: [sweepIdParameter],
    responses: {
      200: json(ref('SweepView'), 'The sweep'),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  cancelSweep: () => ({
    parameters: [sweepIdParameter],
    responses: {
      202: json(ref('SweepView'), 'Cancelled: no trial runs any more (also for a sweep already cancelled)'),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      409: json(ref('SweepFinishedBody'), 'The sweep already ended; `phase` says how'),
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getRunQueue: () => ({
    parameters: [runIdParameter],
    responses: {
      200: json(
        ref('QueuePosition'),
        "The run's place in its LocalQueue, or why it has none (queued: false)",
      ),
      400: ERRORS[400],
      403: ERRORS[403],
      404: ERRORS[404],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getUsage: () => ({
    parameters: queryParameters(usageQuerySchema().shape),
    responses: {
      200: json(ref('UsageView'), "The team's (or model's) GPU-hours of the period and the team's budget"),
      400: ERRORS[400],
      403: ERRORS[403],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  listRuntimes: () => ({
    responses: {
      200: json(ref('RuntimeList'), 'The runtimes'),
      403: ERRORS[403],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getOpenApi: () => ({
    security: [],
    responses: { 200: json({ type: 'object' }, 'The OpenAPI 3.1 document'), 500: ERRORS[500] },
  }),
};

const modelNameParameter = {
  name: 'name',
  in: 'path',
  required: true,
  description: 'Model name (`modelName` of its runs)',
  schema: { type: 'string', pattern: '^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$' },
};

/** The model registry's operations (lib/intake/models.ts). */
const MODEL_OPERATIONS = {
  listModels: () => ({
    responses: {
      200: json(ref('ModelList'), "The caller's teams' models"),
      403: ERRORS[403],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getModel: () => ({
    parameters: [
      modelNameParameter,
      {
        name: 'limit',
        in: 'query',
        required: false,
        description: 'How many versions, newest first (1–100, default 20)',
        schema: { type: 'string', pattern: '^[0-9]{1,3}$' },
      },
    ],
    responses: {
      200: json(ref('ModelView'), 'The model'),
      400: ERRORS[400],
      403: ERRORS[403],
      404: json(errorOf('NotFoundError'), "No such model, or another team's (the two answers are the same)"),
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  getModelVersion: () => ({
    parameters: [
      modelNameParameter,
      {
        name: 'version',
        in: 'path',
        required: true,
        schema: { type: 'string', pattern: '^[1-9][0-9]{0,8}$' },
      },
    ],
    responses: {
      200: json(ref('ModelVersion'), "The version's manifest and the aliases pointing at it"),
      400: ERRORS[400],
      403: ERRORS[403],
      404: json(errorOf('NotFoundError'), 'No such model or version, or another team’s model'),
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
  moveModelAlias: () => ({
    parameters: [
      modelNameParameter,
      {
        name: 'alias',
        in: 'path',
        required: true,
        schema: { type: 'string', pattern: '^[a-z][a-z0-9-]{0,39}$' },
      },
    ],
    requestBody: { required: true, content: { 'application/json': { schema: ref('MoveAliasRequest') } } },
    responses: {
      200: json(ref('AliasMoved'), 'The alias as moved (the serving stage is told)'),
      400: ERRORS[400],
      403: ERRORS[403],
      404: json(errorOf('NotFoundError'), 'No such model or version, or another team’s model'),
      409: json(
        ref('AliasConflictBody'),
        'The alias no longer points at `expectedVersion`; `currentVersion` says where it does',
      ),
      413: ERRORS[413],
      415: ERRORS[415],
      500: ERRORS[500],
      503: ERRORS[503],
    },
  }),
};

function operation(route: Route): Json {
  const common = { operationId: route.operationId, summary: route.summary };
  const all: Record<string, () => Json> = { ...OPERATIONS, ...MODEL_OPERATIONS };
  const op = Object.hasOwn(all, route.operationId) ? all[route.operationId] : undefined;
  if (!op) throw new Error(`no OpenAPI operation for route ${route.operationId}`);
  return { ...common, ...op() };
}

/** Every route's operation, and the schemas they reference. */
export function buildOpenApiDocument(opts: { version?: string; serverUrl?: string } = {}): Json {
  const paths: Record<string, Json> = {};
  for (const route of ROUTES) {
    const op = operation(route);
    // Every route checks a JWT caller's issuer (lib/intake/jwt.ts): a 401 anywhere.
    op.responses = { 401: ERRORS[401], ...(op.responses as Json) };
    paths[route.path] = { ...paths[route.path], [route.method.toLowerCase()]: op };
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'Gantry',
      version: opts.version ?? '0.1.0',
      description:
        'Submit and follow Kubeflow training runs. Callers authenticate with IAM (SigV4) or a JWT; the caller decides the team.',
    },
    ...(opts.serverUrl ? { servers: [{ url: opts.serverUrl }] } : {}),
    security: [{ sigv4: [] }, { jwt: [] }],
    paths,
    components: {
      securitySchemes: {
        sigv4: {
          type: 'apiKey',
          in: 'header',
          name: 'Authorization',
          description: 'AWS Signature Version 4 (API Gateway IAM authorization)',
        },
        jwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
      },
      schemas: {
        RunRequest: jsonSchema(RunRequestSchema, 'input'),
        SweepRequest: jsonSchema(SweepRequestSchema, 'input'),
        RerunRequest: jsonSchema(rerunBodySchema(), 'input'),
        SweepView: jsonSchema(SweepViewSchema, 'output'),
        SweepList: jsonSchema(SweepListSchema, 'output'),
        SubmitResponse: jsonSchema(SubmitResponseSchema, 'output'),
        RunView: jsonSchema(RunViewSchema, 'output'),
        RunList: jsonSchema(RunListSchema, 'output'),
        MetricHistory: jsonSchema(MetricHistorySchema, 'output'),
        RunEvents: jsonSchema(RunEventsSchema, 'output'),
        CancelResponse: jsonSchema(CancelResponseSchema, 'output'),
        RuntimeList: jsonSchema(RuntimeListSchema, 'output'),
        UsageView: jsonSchema(UsageViewSchema, 'output'),
        QueuePosition: jsonSchema(QueuePositionSchema, 'output'),
        ValidateResponse: jsonSchema(ValidateResponseSchema, 'output'),
        ValidationErrorBody: jsonSchema(ValidationErrorBodySchema, 'output'),
        ForbiddenBody: jsonSchema(ForbiddenBodySchema, 'output'),
        RunFinishedBody: jsonSchema(RunFinishedBodySchema, 'output'),
        SweepFinishedBody: jsonSchema(SweepFinishedBodySchema, 'output'),
        RunLogs: jsonSchema(RunLogsSchema, 'output'),
        RunLogsUnavailableBody: jsonSchema(RunLogsUnavailableBodySchema, 'output'),
        ErrorBody: jsonSchema(ErrorBodySchema, 'output'),
        ModelList: jsonSchema(ModelListSchema, 'output'),
        ModelView: jsonSchema(ModelViewSchema, 'output'),
        ModelVersion: jsonSchema(ModelVersionSchema, 'output'),
        MoveAliasRequest: jsonSchema(moveAliasSchema(), 'input'),
        AliasMoved: jsonSchema(AliasMovedSchema, 'output'),
        AliasConflictBody: jsonSchema(AliasConflictBodySchema, 'output'),
      },
    },
  };
}
