import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { JWT_CLAIMS_HEADER, PRINCIPAL_HEADER } from '../../local/http-api.ts';
import { DEMO_TEAM } from '../../local/stack.ts';

/**
 * Every answer of the API matches the OpenAPI document it serves: on the embedded default, each
 * route is called so that it gives each documented status that is cheap to provoke (2xx, 400,
 * 401, 403, 404, 409, 413, 415, 429), and each body is validated (JSON Schema 2020-12, Ajv)
 * against the schema the served `/v1/openapi.json` gives that route and status. A status the
 * document does not list for the route fails too.
 */

type Json = Record<string, unknown>;
// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field
type Body = Record<string, any>;

const DEMO = DEMO_TEAM.principals[0] as string;
const STRANGER = 'arn:aws:iam::999999999999:user/stranger';
/** A team whose cap of one run in flight is easy to reach (429). */
const CAPPED = {
  ...DEMO_TEAM,
  name: 'capped',
  principals: ['arn:aws:iam::000000000000:user/capped'],
  namespaces: ['capped'],
  queues: [],
  maxRunsInFlight: 1,
};
const ISSUER = 'https://issuer.gantry.test';

const run = (over: Record<string, unknown> = {}) => ({
  modelName: 'validated',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
  ...over,
});

const sweep = (over: Record<string, unknown> = {}) => ({
  template: run({ modelName: 'validated-sweep' }),
  parameters: [{ name: 'lr', type: 'continuous', min: 0.001, max: 0.1, scale: 'log' }],
  objective: { metric: 'accuracy', direction: 'maximize' },
  algorithm: { name: 'random', seed: 7 },
  maxTrials: 1,
  ...over,
});

describe('every response validates against the served OpenAPI document', () => {
  let env: Embedded;
  let doc: Json & { paths: Record<string, Record<string, Json>> };
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  // The one format the document uses; Ajv checks no format it was not given.
  ajv.addFormat('date-time', {
    type: 'string',
    validate: (s: string) =>
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(s) &&
      !Number.isNaN(Date.parse(s)),
  });
  const validators = new Map<string, ValidateFunction>();
  /** Every (route, status) answered, e.g. `POST /v1/runs 202`. */
  const seen = new Set<string>();

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 300,
      sfnSpeed: 60,
      // An hour of simulated training is about 12 s: long enough to read a running run's logs.
      simulator: { defaultDurationSeconds: 3600, namespaces: ['demo', 'capped'] },
      stack: { teams: [DEMO_TEAM, CAPPED], jwt: { issuer: ISSUER }, orphanGraceSeconds: 1 },
    });
    const res = await fetch(`${env.api.url}/v1/openapi.json`);
    expect(res.status).toBe(200);
    doc = (await res.json()) as typeof doc;
    ajv.addSchema({ ...doc, $id: 'https://gantry.test/openapi.json' });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  function validatorFor(route: string, status: number): ValidateFunction {
    const [method = '', path = ''] = route.split(' ');
    const responses = doc.paths[path]?.[method.toLowerCase()]?.responses as Record<string, Json> | undefined;
    expect(responses, `${route} is not in the document`).toBeDefined();
    const response = responses?.[String(status)];
    expect(response, `${route} answered ${status}, which the document does not list`).toBeDefined();
    const key = `${route} ${status}`;
    let v = validators.get(key);
    if (!v) {
      const pointer = ['paths', path, method.toLowerCase(), 'responses', String(status)]
        .map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1'))
        .join('/');
      v = ajv.getSchema(
        `https://gantry.test/openapi.json#/${pointer}/content/application~1json/schema`,
      ) as ValidateFunction;
      expect(v, `${key} has no application/json schema`).toBeDefined();
      validators.set(key, v);
    }
    return v;
  }

  /**
   * Call `route` (its template, e.g. `GET /v1/runs/{id}`) at `path`, expect `status`, and validate
   * the body against the document's schema for that route and status.
   */
  async function call(
    route: string,
    path: string,
    status: number,
    opts: { body?: unknown; raw?: string; principal?: string; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; headers: Headers; body: Body }> {
    const method = route.split(' ')[0] as string;
    const payload = opts.raw ?? (opts.body !== undefined ? JSON.stringify(opts.body) : undefined);
    const res = await fetch(`${env.api.url}${path}`, {
      method,
      headers: {
        [PRINCIPAL_HEADER]: opts.principal ?? DEMO,
        ...(payload !== undefined ? { 'content-type': 'application/json' } : {}),
        ...opts.headers,
      },
      ...(payload !== undefined ? { body: payload } : {}),
    });
    const text = await res.text();
    const body = (text ? JSON.parse(text) : {}) as Body;
    expect(res.status, `${route} at ${path}: ${text.slice(0, 400)}`).toBe(status);
    const validate = validatorFor(route, res.status);
    const ok = validate(body);
    expect(ok, `${route} ${res.status}: ${ajv.errorsText(validate.errors)}\n${text.slice(0, 1000)}`).toBe(
      true,
    );
    seen.add(`${route} ${res.status}`);
    return { status: res.status, headers: res.headers, body };
  }

  async function until(runId: string, done: (r: Body) => boolean, timeoutMs = 60_000): Promise<Body> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await call('GET /v1/runs/{id}', `/v1/runs/${runId}`, 200);
      if (done(r.body)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} stayed ${r.body.phase}`);
      await new Promise((res) => setTimeout(res, 150));
    }
  }

  let runningId = '';
  let endedId = '';
  let pendingId = '';

  it('submitRun: 202, 200 (replay), 400, 403, 409, 413, 415, 429; 401 for a token of another issuer', async () => {
    const accepted = await call('POST /v1/runs', '/v1/runs', 202, {
      body: run(),
      headers: { 'Idempotency-Key': 'openapi-running' },
    });
    runningId = accepted.body.runId;
    expect(accepted.headers.get('location')).toBe(`/v1/runs/${runningId}`);
    const replay = await call('POST /v1/runs', '/v1/runs', 200, {
      body: run(),
      headers: { 'Idempotency-Key': 'openapi-running' },
    });
    expect(replay.body.runId).toBe(runningId);
    await call('POST /v1/runs', '/v1/runs', 409, {
      body: run({ args: ['--other'] }),
      headers: { 'Idempotency-Key': 'openapi-running' },
    });
    const invalid = await call('POST /v1/runs', '/v1/runs', 400, { body: run({ numNodes: 0 }) });
    expect(invalid.body.issues?.[0]?.field).toBe('numNodes');
    await call('POST /v1/runs', '/v1/runs', 400, { raw: '{"modelName": ' });
    await call('POST /v1/runs', '/v1/runs', 403, { body: run({ image: 'docker.io/evil/miner:1' }) });
    await call('POST /v1/runs', '/v1/runs', 403, { body: run(), principal: STRANGER });
    await call('POST /v1/runs', '/v1/runs', 413, {
      body: run({ hyperparameters: { note: 'x'.repeat(200) }, env: { PAD: 'y'.repeat(300 * 1024) } }),
    });
    await call('POST /v1/runs', '/v1/runs', 415, {
      raw: JSON.stringify(run()),
      headers: { 'content-type': 'text/plain' },
    });
    const capped = { principal: CAPPED.principals[0] as string };
    const capRun = run({ team: 'capped', namespace: 'capped', queue: undefined, modelName: 'capped' });
    await call('POST /v1/runs', '/v1/runs', 202, { ...capped, body: capRun });
    const limited = await call('POST /v1/runs', '/v1/runs', 429, {
      ...capped,
      body: { ...capRun, args: ['--second'] },
    });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    await call('POST /v1/runs', '/v1/runs', 401, {
      body: run(),
      headers: {
        [JWT_CLAIMS_HEADER]: JSON.stringify({
          iss: 'https://elsewhere.test',
          sub: 'local-demo',
          scope: 'gantry/write',
        }),
      },
    });
  });

  it('rerunRun: 202 (with and without a body), 200 (replay), 400, 403, 404, 409, 415', async () => {
    const path = `/v1/runs/${runningId}/rerun`;
    const plain = await call('POST /v1/runs/{id}/rerun', path, 202);
    expect(plain.body.rerunOf).toBe(runningId);
    expect(plain.headers.get('location')).toBe(`/v1/runs/${plain.body.runId}`);
    const key = { 'Idempotency-Key': 'openapi-rerun' };
    const changed = await call('POST /v1/runs/{id}/rerun', path, 202, {
      body: { overrides: { args: ['--rerun'] } },
      headers: key,
    });
    const replay = await call('POST /v1/runs/{id}/rerun', path, 200, {
      body: { overrides: { args: ['--rerun'] } },
      headers: key,
    });
    expect(replay.body.runId).toBe(changed.body.runId);
    await call('POST /v1/runs/{id}/rerun', path, 409, {
      body: { overrides: { args: ['--other'] } },
      headers: key,
    });
    const view = await call('GET /v1/runs/{id}', `/v1/runs/${changed.body.runId}`, 200);
    expect(view.body).toMatchObject({ rerunOf: runningId, links: { rerunOf: `/v1/runs/${runningId}` } });
    expect(view.body.request.args).toEqual(['--rerun']);
    const invalid = await call('POST /v1/runs/{id}/rerun', path, 400, {
      body: { overrides: { numNodes: 0 } },
    });
    expect(invalid.body.issues?.[0]?.field).toBe('overrides.numNodes');
    await call('POST /v1/runs/{id}/rerun', path, 400, { raw: '{"overrides": ' });
    await call('POST /v1/runs/{id}/rerun', path, 403, {
      body: { overrides: { image: 'docker.io/evil/miner:1' } },
    });
    await call('POST /v1/runs/{id}/rerun', '/v1/runs/run-aaaaaaaaaaaaaaaaaaaa/rerun', 404);
    await call('POST /v1/runs/{id}/rerun', path, 404, { principal: CAPPED.principals[0] as string });
    await call('POST /v1/runs/{id}/rerun', path, 415, {
      raw: '{}',
      headers: { 'content-type': 'text/plain' },
    });
    for (const id of [plain.body.runId, changed.body.runId])
      await call('POST /v1/runs/{id}/cancel', `/v1/runs/${id}/cancel`, 202);
  });

  it('validateRun: 200 (valid and not), 400, 403, 413, 415', async () => {
    const valid = await call('POST /v1/runs/validate', '/v1/runs/validate', 200, { body: run() });
    expect(valid.body.valid).toBe(true);
    // A runtime the cluster does not have fails a check: valid false, still a 200.
    const refused = await call('POST /v1/runs/validate', '/v1/runs/validate', 200, {
      body: run({ runtime: { name: 'no-such-runtime' } }),
    });
    expect(refused.body.valid).toBe(false);
    await call('POST /v1/runs/validate', '/v1/runs/validate', 400, { body: run({ team: 'Not A Team' }) });
    await call('POST /v1/runs/validate', '/v1/runs/validate', 403, { body: run(), principal: STRANGER });
    await call('POST /v1/runs/validate', '/v1/runs/validate', 413, {
      body: run({ env: { PAD: 'y'.repeat(300 * 1024) } }),
    });
    await call('POST /v1/runs/validate', '/v1/runs/validate', 415, {
      raw: JSON.stringify(run()),
      headers: { 'content-type': 'text/plain' },
    });
  });

  it('getRun, getRunMetrics, getRunLogs: 200 while running; 400; 404', async () => {
    await until(runningId, (r) => r.phase === 'Running' && (r.progress?.percent ?? 0) > 0);
    await call('GET /v1/runs/{id}/metrics', `/v1/runs/${runningId}/metrics`, 200);
    // The trainer's first lines may take a moment to appear after the pod starts.
    const end = Date.now() + 20_000;
    for (;;) {
      const logs = await fetch(`${env.api.url}/v1/runs/${runningId}/logs`, {
        headers: { [PRINCIPAL_HEADER]: DEMO },
      });
      await logs.body?.cancel();
      if (logs.status === 200 || Date.now() > end) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    const logs = await call('GET /v1/runs/{id}/logs', `/v1/runs/${runningId}/logs?tailLines=5`, 200);
    expect(logs.body.lines.length).toBeGreaterThan(0);
    await call('GET /v1/runs/{id}/logs', `/v1/runs/${runningId}/logs?tailLines=0`, 400);
    await call('GET /v1/runs/{id}/logs', `/v1/runs/${runningId}/logs?node=-1`, 400);
    const unknown = 'run-aaaaaaaaaaaaaaaaaaaa';
    await call('GET /v1/runs/{id}', `/v1/runs/${unknown}`, 404);
    await call('GET /v1/runs/{id}', '/v1/runs/not-a-run-id', 400);
    await call('GET /v1/runs/{id}/metrics', '/v1/runs/not-a-run-id/metrics', 400);
    await call('GET /v1/runs/{id}/metrics', `/v1/runs/${unknown}/metrics`, 404);
    await call('GET /v1/runs/{id}/logs', `/v1/runs/${unknown}/logs`, 404);
    await call('GET /v1/runs/{id}', `/v1/runs/${runningId}`, 404, {
      principal: CAPPED.principals[0] as string,
    });
  });

  it('getRunLogs 409 while a run waits for quota; cancelRun 202 (twice) and 404', async () => {
    // Sixteen GPUs on a queue with a quota of eight: it stays Pending with no pods.
    const pending = await call('POST /v1/runs', '/v1/runs', 202, {
      body: run({ modelName: 'too-big', numNodes: 8, resourcesPerNode: { gpu: 2 } }),
    });
    pendingId = pending.body.runId;
    await until(pendingId, (r) => r.phase === 'Pending');
    const unavailable = await call('GET /v1/runs/{id}/logs', `/v1/runs/${pendingId}/logs`, 409);
    expect(unavailable.body.phase).toBe('Pending');
    await call('POST /v1/runs/{id}/cancel', `/v1/runs/${pendingId}/cancel`, 202);
    await call('POST /v1/runs/{id}/cancel', `/v1/runs/${pendingId}/cancel`, 202);
    await call('POST /v1/runs/{id}/cancel', '/v1/runs/run-aaaaaaaaaaaaaaaaaaaa/cancel', 404);
  });

  it('cancelRun 409 once a run has ended; getRun and getRunMetrics 200 with its outcome', async () => {
    const ended = await until(runningId, (r) => ['Succeeded', 'Failed'].includes(r.phase), 90_000);
    endedId = runningId;
    expect(ended.phase).toBe('Succeeded');
    const finished = await call('POST /v1/runs/{id}/cancel', `/v1/runs/${endedId}/cancel`, 409);
    expect(finished.body.phase).toBe('Succeeded');
    await call('GET /v1/runs/{id}/metrics', `/v1/runs/${endedId}/metrics`, 200);
    const events = await call('GET /v1/runs/{id}/events', `/v1/runs/${endedId}/events`, 200);
    expect(events.body.events.length).toBeGreaterThan(0);
    await call('GET /v1/runs/{id}/events', '/v1/runs/not-a-run-id/events', 400);
    await call('GET /v1/runs/{id}/events', '/v1/runs/run-aaaaaaaaaaaaaaaaaaaa/events', 404);
  });

  it('the model registry: list, get, version, alias moves (200, 400, 403, 404, 409)', async () => {
    // The run that ended above published version 1 of its model.
    const models = await call('GET /v1/models', '/v1/models', 200);
    expect(models.body.models.map((m: Body) => m.name)).toContain('validated');
    await call('GET /v1/models', '/v1/models', 403, { principal: STRANGER });
    await call('GET /v1/models/{name}', '/v1/models/validated', 200);
    await call('GET /v1/models/{name}', '/v1/models/validated?limit=0', 400);
    await call('GET /v1/models/{name}', '/v1/models/never-published', 404);
    await call('GET /v1/models/{name}/versions/{version}', '/v1/models/validated/versions/1', 200);
    await call('GET /v1/models/{name}/versions/{version}', '/v1/models/validated/versions/0', 400);
    await call('GET /v1/models/{name}/versions/{version}', '/v1/models/validated/versions/99', 404);
    const route = 'POST /v1/models/{name}/aliases/{alias}';
    const moved = await call(route, '/v1/models/validated/aliases/production', 200, {
      body: { version: 1, expectedVersion: null, reason: 'first' },
    });
    expect(moved.body.alias).toMatchObject({ version: 1, seq: 1 });
    const stale = await call(route, '/v1/models/validated/aliases/production', 409, {
      body: { version: 1, expectedVersion: null },
    });
    expect(stale.body.currentVersion).toBe(1);
    await call(route, '/v1/models/validated/aliases/production', 400, { body: { version: 'one' } });
    await call(route, '/v1/models/validated/aliases/production', 404, { body: { version: 99 } });
  });

  it('listRuns: 200 (pages), 400, 403', async () => {
    const page = await call('GET /v1/runs', '/v1/runs?limit=1', 200);
    expect(page.body.runs).toHaveLength(1);
    expect(page.body.nextToken).toBeTruthy();
    await call('GET /v1/runs', `/v1/runs?limit=1&nextToken=${encodeURIComponent(page.body.nextToken)}`, 200);
    await call('GET /v1/runs', '/v1/runs?limit=0', 400);
    await call('GET /v1/runs', '/v1/runs', 403, { principal: STRANGER });
  });

  it('sweeps: submit 202, 200, 400, 403, 409; get 200, 404; list 200, 400; cancel 202, 409, 404', async () => {
    const accepted = await call('POST /v1/sweeps', '/v1/sweeps', 202, {
      body: sweep({ maxTrials: 2, parallelTrials: 1 }),
      headers: { 'Idempotency-Key': 'openapi-sweep' },
    });
    const sweepId = accepted.body.sweepId as string;
    await call('POST /v1/sweeps', '/v1/sweeps', 200, {
      body: sweep({ maxTrials: 2, parallelTrials: 1 }),
      headers: { 'Idempotency-Key': 'openapi-sweep' },
    });
    await call('POST /v1/sweeps', '/v1/sweeps', 409, {
      body: sweep({ maxTrials: 3, parallelTrials: 1 }),
      headers: { 'Idempotency-Key': 'openapi-sweep' },
    });
    await call('POST /v1/sweeps', '/v1/sweeps', 400, { body: sweep({ parameters: [] }) });
    await call('POST /v1/sweeps', '/v1/sweeps', 403, { body: sweep(), principal: STRANGER });
    await call('GET /v1/sweeps/{id}', `/v1/sweeps/${sweepId}`, 200);
    await call('GET /v1/sweeps/{id}', '/v1/sweeps/swp-aaaaaaaaaaaaaaaaaaaa', 404);
    await call('GET /v1/sweeps/{id}', '/v1/sweeps/not-a-sweep', 400);
    await call('POST /v1/sweeps/{id}/cancel', '/v1/sweeps/not-a-sweep/cancel', 400);
    await call('POST /v1/runs/{id}/cancel', '/v1/runs/not-a-run-id/cancel', 400);
    const list = await call('GET /v1/sweeps', '/v1/sweeps?limit=10', 200);
    expect(list.body.sweeps.map((s: Body) => s.sweepId)).toContain(sweepId);
    await call('GET /v1/sweeps', '/v1/sweeps?limit=0', 400);
    await call('POST /v1/sweeps/{id}/cancel', `/v1/sweeps/${sweepId}/cancel`, 202);
    await call('POST /v1/sweeps/{id}/cancel', `/v1/sweeps/${sweepId}/cancel`, 202);
    await call('POST /v1/sweeps/{id}/cancel', '/v1/sweeps/swp-aaaaaaaaaaaaaaaaaaaa/cancel', 404);
    // A sweep of one trial that ends: cancelling it then is a 409.
    const short = await call('POST /v1/sweeps', '/v1/sweeps', 202, { body: sweep({ maxTrials: 1 }) });
    const end = Date.now() + 90_000;
    let phase = '';
    while (Date.now() < end) {
      phase = (await call('GET /v1/sweeps/{id}', `/v1/sweeps/${short.body.sweepId}`, 200)).body.phase;
      if (['Succeeded', 'Failed', 'Cancelled'].includes(phase)) break;
      await new Promise((res) => setTimeout(res, 250));
    }
    expect(phase).toBe('Succeeded');
    await call('POST /v1/sweeps/{id}/cancel', `/v1/sweeps/${short.body.sweepId}/cancel`, 409);
  }, 120_000);

  it('listRuntimes 200 and 403; getOpenApi 200', async () => {
    const runtimes = await call('GET /v1/runtimes', '/v1/runtimes', 200);
    expect(runtimes.body.runtimes.length).toBeGreaterThan(0);
    await call('GET /v1/runtimes', '/v1/runtimes', 403, { principal: STRANGER });
    await call('GET /v1/openapi.json', '/v1/openapi.json', 200);
  });

  it('getRunQueue 200, 400 and 404', async () => {
    const submitted = await call('POST /v1/runs', '/v1/runs', 202, { body: run({ modelName: 'queued' }) });
    const q = await call('GET /v1/runs/{id}/queue', `/v1/runs/${submitted.body.runId}/queue`, 200);
    expect(q.body.runId).toBe(submitted.body.runId);
    await call('GET /v1/runs/{id}/queue', '/v1/runs/not-a-run/queue', 400);
    await call('GET /v1/runs/{id}/queue', '/v1/runs/run-aaaaaaaaaaaaaaaaaaaa/queue', 404);
    await call('POST /v1/runs/{id}/cancel', `/v1/runs/${submitted.body.runId}/cancel`, 202);
  });

  it('getUsage 200, 400 and 403', async () => {
    const usage = await call('GET /v1/usage', '/v1/usage', 200);
    expect(usage.body.team).toBe('demo');
    await call('GET /v1/usage', '/v1/usage?period=2026-13', 400);
    await call('GET /v1/usage', '/v1/usage', 403, { principal: STRANGER });
  });

  it('covered every route, each with its success status and at least one error', () => {
    const routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const route of routes) {
      const statuses = [...seen]
        .filter((s) => s.startsWith(`${route} `))
        .map((s) => Number(s.split(' ').pop()));
      expect(
        statuses.some((s) => s < 300),
        `${route}: ${statuses}`,
      ).toBe(true);
      if (route !== 'GET /v1/openapi.json')
        expect(
          statuses.some((s) => s >= 400),
          `${route}: ${statuses}`,
        ).toBe(true);
    }
    expect(seen.size).toBeGreaterThanOrEqual(40);
    // The schemas are strict enough to catch a wrong answer: another error's name, a missing field.
    const notFound = validatorFor('GET /v1/runs/{id}', 404);
    expect(notFound({ error: 'NotFoundError', message: 'no run' })).toBe(true);
    expect(notFound({ error: 'InternalError', message: 'no run' })).toBe(false);
    expect(validatorFor('POST /v1/runs/{id}/cancel', 409)({ error: 'RunFinishedError', message: 'x' })).toBe(
      false,
    );
    expect(validatorFor('POST /v1/runs', 202)({ runId: 'run-x', phase: 'Accepted' })).toBe(false);
  });
});
