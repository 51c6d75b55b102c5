import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWT_CLAIMS_HEADER, PRINCIPAL_HEADER } from '../../local/http-api.ts';
import { printedApiUrl } from '../helpers/dev-process.ts';
import {
  ACCOUNT,
  httpApiEvent,
  iamAuthorizer,
  jwtAuthorizer,
  type PackagedStack,
  REGION,
  sqsEvent,
  startPackagedStack,
} from '../helpers/packaged-stack.ts';
import { ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * The packaged bundles run as AWS runs them: each function's zip from `npm run package`, unzipped,
 * in a Node 24 process of its own with the template's environment (test/helpers/packaged-stack.ts),
 * invoked with the events API Gateway, SQS, S3, DynamoDB Streams and EventBridge deliver. A run
 * submitted through the packaged API bundle reaches the cluster simulator (through an EKS-like TLS
 * endpoint with a presigned-STS bearer token) and ends Succeeded through the packaged step bundles.
 */

const missing = ['node_modules/.bin/serverless', 'node_modules/serverless-esbuild']
  .filter((p) => !existsSync(join(ROOT, p)))
  .map((p) => `${p} (npm install)`);
const available = tierAvailable('deploy (packaged bundles)', missing);

const RUN_REQUEST = {
  modelName: 'resnet-packaged',
  team: 'vision',
  runtime: { name: 'torch-distributed' },
  image: '123456789012.dkr.ecr.us-east-1.amazonaws.com/vision/train:1.0',
  namespace: 'vision',
  queue: 'vision-queue',
  resourcesPerNode: { gpu: 1 },
};

/** The caller shapes of the report: API Gateway's authorizer block for each. */
export const CALLERS: Array<{ shape: string; authorizer: Record<string, unknown> }> = [
  {
    shape: 'IAM user',
    authorizer: iamAuthorizer(
      `arn:aws:iam::${ACCOUNT}:user/alice`,
      'AIDAEXAMPLEALICE0001',
      'AKIAEXAMPLEALICE0001',
    ),
  },
  {
    shape: 'IAM role session',
    authorizer: iamAuthorizer(
      `arn:aws:sts::${ACCOUNT}:assumed-role/vision-mlops/ci-pipeline`,
      'AROAEXAMPLEVISION001:ci-pipeline',
    ),
  },
  {
    shape: 'Identity Center session',
    authorizer: iamAuthorizer(
      `arn:aws:sts::${ACCOUNT}:assumed-role/AWSReservedSSO_VisionScientists_0123456789abcdef/carol@example.com`,
      'AROAEXAMPLESSO000001:carol@example.com',
    ),
  },
  {
    shape: 'federated user',
    authorizer: iamAuthorizer(`arn:aws:sts::${ACCOUNT}:federated-user/bob`, `${ACCOUNT}:bob`),
  },
  {
    shape: 'JWT',
    authorizer: jwtAuthorizer(
      {
        iss: 'https://issuer.example.com/',
        sub: 'user-7',
        aud: 'gantry',
        groups: '[vision-engineers]',
        scope: 'gantry/write gantry/read',
        exp: Math.floor(Date.now() / 1000) + 3600,
        iat: Math.floor(Date.now() / 1000),
      },
      null,
    ),
  },
];

/** A caller in no team, to show that the 202s are not the answer to everyone. */
const STRANGER = iamAuthorizer(`arn:aws:iam::${ACCOUNT}:user/mallory`, 'AIDAEXAMPLEMALLORY01');

const submit = (authorizer: Record<string, unknown>, key: string, body: unknown = RUN_REQUEST) =>
  httpApiEvent({
    method: 'POST',
    path: '/v1/runs',
    routeKey: 'POST /v1/runs',
    body,
    headers: { 'idempotency-key': key },
    authorizer,
  });

/** SQS ReceiveMessage attributes → the Lambda event's `messageAttributes` form. */
function lambdaAttributes(m: Message): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
      k,
      { stringValue: v.StringValue, stringListValues: [], binaryListValues: [], dataType: v.DataType },
    ]),
  );
}

async function receiveAll(stack: PackagedStack, logicalId: string, want: number): Promise<Message[]> {
  const q = stack.queues.get(logicalId);
  if (!q) throw new Error(`no queue ${logicalId}`);
  const got: Message[] = [];
  for (let i = 0; i < 20 && got.length < want; i++) {
    const out = await stack.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: q.url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    got.push(...(out.Messages ?? []));
  }
  return got;
}

/** HTTP status per caller shape: on the packaged bundle, and on `npm run dev`. */
const packagedStatus = new Map<string, number>();
const devStatus = new Map<string, number>();

describe.runIf(available)('the packaged bundles, run as AWS runs them', () => {
  let stack: PackagedStack;

  beforeAll(async () => {
    stack = await startPackagedStack();
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
  });

  it.each(CALLERS)(
    'POST /v1/runs as $shape: 202 from the packaged submitRun bundle',
    async ({ shape, authorizer }) => {
      const out = await stack.invoke('submitRun', submit(authorizer, `caller-${shape.replace(/\W/g, '-')}`));
      expect(out.ok, stack.output('submitRun')).toBe(true);
      const res = (out as { result: { statusCode: number; body: string } }).result;
      packagedStatus.set(shape, res.statusCode);
      expect(res.statusCode, res.body).toBe(202);
      expect(JSON.parse(res.body)).toMatchObject({ phase: 'Accepted', runId: expect.any(String) });
    },
  );

  it("S3 notifications through the data-events queue: S3's test event is acknowledged; a partition's marker starts a retraining run", async () => {
    // What S3 sends the queue when the notification is configured, then an ObjectCreated record
    // (event notification structure 2.1) for the marker of a partition whose data is there.
    await stack.s3.send(
      new PutObjectCommand({
        Bucket: stack.bucket,
        Key: 'data/vision/daily/dt=2026-12-05/part-0.parquet',
        Body: 'rows',
      }),
    );
    const marker = await stack.s3.send(
      new PutObjectCommand({
        Bucket: stack.bucket,
        Key: 'data/vision/daily/dt=2026-12-05/_SUCCESS',
        Body: '',
      }),
    );
    const testEvent = {
      Service: 'Amazon S3',
      Event: 's3:TestEvent',
      Time: new Date().toISOString(),
      Bucket: stack.bucket,
      RequestId: '5582815E1AEA5ADF',
      HostId: 'example-host-id',
    };
    const created = {
      Records: [
        {
          eventVersion: '2.1',
          eventSource: 'aws:s3',
          awsRegion: REGION,
          eventTime: new Date().toISOString(),
          eventName: 'ObjectCreated:Put',
          userIdentity: { principalId: 'AWS:AIDAEXAMPLE' },
          requestParameters: { sourceIPAddress: '10.0.0.1' },
          responseElements: { 'x-amz-request-id': 'C3D13FE58DE4C810', 'x-amz-id-2': 'example' },
          s3: {
            s3SchemaVersion: '1.0',
            configurationId: 'data-events',
            bucket: {
              name: stack.bucket,
              ownerIdentity: { principalId: 'A3NL1KOZZKExample' },
              arn: `arn:aws:s3:::${stack.bucket}`,
            },
            object: {
              key: 'data/vision/daily/dt%3D2026-12-05/_SUCCESS',
              size: 0,
              eTag: (marker.ETag ?? '').replace(/"/g, ''),
              sequencer: '0055AED6DCD90281E5',
            },
          },
        },
      ],
    };
    const queue = stack.queues.get('DataEventsQueue') as { arn: string; url: string };
    const batch = sqsEvent(queue.arn, [
      { messageId: 'test-event', receiptHandle: 'r1', body: JSON.stringify(testEvent) },
      { messageId: 'marker', receiptHandle: 'r2', body: JSON.stringify(created) },
    ]);
    const answered = await stack.invoke('dataIntake', batch);
    expect(answered.ok, stack.output('dataIntake')).toBe(true);
    expect((answered as { result: unknown }).result).toEqual({ batchItemFailures: [] });
    // The rule's run, on the runs queue: team vision, its model, trained on that partition.
    const messages = await receiveAll(stack, 'RunsQueue', 1);
    const bodies = messages.map((m) => JSON.parse(m.Body as string));
    const run = bodies.find((b) => JSON.stringify(b).includes('resnet-daily'));
    expect(run, JSON.stringify(bodies).slice(0, 2000)).toBeDefined();
    expect(JSON.stringify(run)).toContain('data/vision/daily/dt=2026-12-05/');
    // Take this run off the queue; put back the caller tests' runs, which the next test consumes.
    const runsQueue = stack.queues.get('RunsQueue') as { url: string };
    for (const m of messages) {
      const mine = JSON.stringify(JSON.parse(m.Body as string)).includes('resnet-daily');
      if (mine)
        await stack.sqs.send(
          new DeleteMessageCommand({ QueueUrl: runsQueue.url, ReceiptHandle: m.ReceiptHandle }),
        );
      else
        await stack.sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: runsQueue.url,
            ReceiptHandle: m.ReceiptHandle,
            VisibilityTimeout: 0,
          }),
        );
    }
  });

  it('a caller in no team gets 403 naming the rule; a bad body 400 naming the field', async () => {
    const stranger = await stack.invoke('submitRun', submit(STRANGER, 'stranger'));
    const res = (stranger as { result: { statusCode: number; body: string } }).result;
    expect(res.statusCode).toBe(403);
    expect(res.body).toContain('belongs to no team');
    const bad = await stack.invoke(
      'submitRun',
      submit(CALLERS[0]?.authorizer ?? {}, 'bad', { ...RUN_REQUEST, resourcesPerNode: { gpu: -1 } }),
    );
    const badRes = (bad as { result: { statusCode: number; body: string } }).result;
    expect(badRes.statusCode).toBe(400);
    expect(badRes.body).toContain('resourcesPerNode');
  });

  it('a run goes submitRun → runs queue → runsConsumer → the packaged steps on the simulator → Succeeded', async () => {
    const accepted = await stack.invoke('submitRun', submit(CALLERS[1]?.authorizer ?? {}, 'end-to-end'));
    const runId = JSON.parse((accepted as { result: { body: string } }).result.body).runId as string;

    // Lambda's SQS event source: a batch of what the queue holds (the caller tests' runs too).
    const messages = await receiveAll(stack, 'RunsQueue', CALLERS.length + 1);
    const runsQueue = stack.queues.get('RunsQueue') as { arn: string; url: string };
    const batch = sqsEvent(
      runsQueue.arn,
      messages.map((m) => ({
        messageId: m.MessageId as string,
        receiptHandle: m.ReceiptHandle as string,
        body: m.Body as string,
        attributes: m.Attributes ?? {},
        messageAttributes: lambdaAttributes(m),
      })),
    );
    const consumed = await stack.invoke('runsConsumer', batch);
    expect(consumed.ok, stack.output('runsConsumer')).toBe(true);
    expect((consumed as { result: { batchItemFailures: unknown[] } }).result).toEqual({
      batchItemFailures: [],
    });
    for (const m of messages)
      await stack.sqs.send(
        new DeleteMessageCommand({ QueueUrl: runsQueue.url, ReceiptHandle: m.ReceiptHandle }),
      );

    // The scheduled reconciler: EventBridge delivers the rule target's constant Input.
    const rule = Object.values(stack.template.Resources).find((x) => x.Type === 'AWS::Events::Rule');
    const input = JSON.parse(
      String(((rule?.Properties.Targets ?? []) as Array<{ Input: string }>)[0]?.Input ?? 'null'),
    );
    expect(input).toEqual({ shard: 0 });
    const reconciling = stack.invoke('reconciler', input);

    const executionArn = `arn:aws:states:${REGION}:${ACCOUNT}:execution:${stack.stateMachineArn.split(':').pop()}:${runId}`;
    let status = 'RUNNING';
    for (let i = 0; i < 120 && status === 'RUNNING'; i++) {
      await new Promise((r) => setTimeout(r, 500));
      status = (await stack.sfn.describeExecution({ executionArn })).status;
    }
    expect(status, `${stack.output('createJob')}\n${stack.output('reconciler')}`).toBe('SUCCEEDED');

    // The record the packaged getRun bundle serves, and the job the cluster ran.
    const got = await stack.invoke(
      'getRun',
      httpApiEvent({
        method: 'GET',
        path: `/v1/runs/${runId}`,
        routeKey: 'GET /v1/runs/{id}',
        pathParameters: { id: runId },
        authorizer: CALLERS[0]?.authorizer ?? {},
      }),
    );
    const body = JSON.parse((got as { result: { body: string } }).result.body);
    expect(body).toMatchObject({ runId, phase: 'Succeeded' });
    expect(stack.eks.callers.length).toBeGreaterThan(0);
    expect(stack.eks.refused).toEqual([]);
    // DynamoDB Streams: the run's record change (NEW_AND_OLD_IMAGES) → the packaged outbox,
    // answered with batchItemFailures.
    const raw = new DynamoDBClient({
      endpoint: stack.table.endpoint,
      region: REGION,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    const item = (
      await raw.send(
        new GetItemCommand({
          TableName: stack.resolver.ref('StateTable'),
          Key: { pk: { S: `run#${runId}` } },
        }),
      )
    ).Item as Record<string, { S?: string }>;
    raw.destroy();
    // The change that ended the run: the image before it has every transition but the last.
    const after = JSON.parse(item.body?.S ?? '{}') as { transitions: Array<{ phase: string }> };
    const before = {
      ...after,
      phase: after.transitions.at(-2)?.phase,
      transitions: after.transitions.slice(0, -1),
    };
    const streamed = await stack.invoke('eventsOutbox', {
      Records: [
        {
          eventID: '1f0f2c4b9a1e4c0d8e2b',
          eventName: 'MODIFY',
          eventVersion: '1.1',
          eventSource: 'aws:dynamodb',
          awsRegion: REGION,
          dynamodb: {
            ApproximateCreationDateTime: Math.floor(Date.now() / 1000),
            Keys: { pk: { S: `run#${runId}` } },
            NewImage: item,
            OldImage: { ...item, body: { S: JSON.stringify(before) } },
            SequenceNumber: '4900000000000000000000001',
            SizeBytes: 2048,
            StreamViewType: 'NEW_AND_OLD_IMAGES',
          },
          eventSourceARN: stack.resolver.getAtt('StateTable', 'StreamArn'),
        },
      ],
    });
    expect(streamed, stack.output('eventsOutbox')).toMatchObject({
      ok: true,
      result: { batchItemFailures: [] },
    });
    // The outbox queued the run's new event (its Succeeded) for delivery.
    const queued = await receiveAll(stack, 'EventsQueue', 1);
    expect(queued.map((m) => m.Body).join('\n'), stack.output('eventsOutbox')).toContain(
      'gantry.run.succeeded',
    );
    const reconciled = await reconciling;
    expect(reconciled.ok, stack.output('reconciler')).toBe(true);
  }, 150_000);
});

/**
 * The same caller shapes on `npm run dev` (local/dev.ts) with the same team: the local host takes
 * the caller from `x-gantry-principal` (the STS ARN as API Gateway would present it) or
 * `x-gantry-jwt-claims`, and builds the same authorizer block.
 */
describe.runIf(available)('the same callers on npm run dev', () => {
  const started: ChildProcess[] = [];
  let dir: string;
  let url: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gantry-dev-callers-'));
    const shipped = JSON.parse(
      readFileSync(join(ROOT, 'test/deploy/fixtures/config-packaged-bundles.json'), 'utf8'),
    );
    const team = { ...shipped.teams[0], imagePrefixes: [...shipped.teams[0].imagePrefixes] };
    writeFileSync(
      join(dir, 'dev-config.json'),
      JSON.stringify({
        teams: [team],
        clusters: [
          {
            name: 'local',
            simulator: {
              queues: [{ name: 'vision-queue', quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '512Gi' } }],
            },
          },
        ],
        jwt: shipped.auth.jwt,
      }),
    );
    const proc = spawn(
      process.execPath,
      ['local/dev.ts', '--state-dir', join(dir, 'state'), '--config', join(dir, 'dev-config.json')],
      {
        cwd: ROOT,
        env: { ...process.env, GANTRY_PORT: '0', GANTRY_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    started.push(proc);
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    proc.stderr?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    url = await printedApiUrl(proc, () => out);
  }, 120_000);

  afterAll(async () => {
    for (const p of started) {
      if (p.exitCode !== null) continue;
      const exited = new Promise<void>((r) => p.once('exit', () => r()));
      p.kill('SIGTERM');
      await exited;
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (packagedStatus.size > 0) {
      const rows = CALLERS.map(
        (c) => `| ${c.shape} | ${packagedStatus.get(c.shape) ?? '—'} | ${devStatus.get(c.shape) ?? '—'} |`,
      );
      console.log(['| caller | packaged bundle | npm run dev |', '| --- | --- | --- |', ...rows].join('\n'));
    }
  }, 60_000);

  it.each(CALLERS)(
    'POST /v1/runs as $shape: the same status as the packaged bundle',
    async ({ shape, authorizer }) => {
      const iam = (authorizer as { iam?: { userArn: string } }).iam;
      const jwt = (authorizer as { jwt?: { claims: Record<string, string | number> } }).jwt;
      const claims = jwt
        ? Object.fromEntries(
            Object.entries(jwt.claims).map(([k, v]) => [
              k,
              typeof v === 'string' && v.startsWith('[') ? v.slice(1, -1).split(' ') : v,
            ]),
          )
        : undefined;
      const res = await fetch(`${url}/v1/runs`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-key': `dev-${shape.replace(/\W/g, '-')}`,
          ...(iam ? { [PRINCIPAL_HEADER]: iam.userArn } : {}),
          ...(claims ? { [JWT_CLAIMS_HEADER]: JSON.stringify(claims) } : {}),
        },
        body: JSON.stringify(RUN_REQUEST),
      });
      const text = await res.text();
      devStatus.set(shape, res.status);
      expect(res.status, text).toBe(202);
      const packaged = packagedStatus.get(shape);
      if (packaged !== undefined) expect(res.status).toBe(packaged);
    },
  );

  it('a caller in no team: 403 on npm run dev too', async () => {
    const res = await fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        [PRINCIPAL_HEADER]: `arn:aws:iam::${ACCOUNT}:user/mallory`,
      },
      body: JSON.stringify(RUN_REQUEST),
    });
    expect(res.status).toBe(403);
  });
});
