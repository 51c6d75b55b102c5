import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { runSimulation } from '@cloud-copilot/iam-simulate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type MotoIam, motoServerBinary, type RoleCredentials, startMotoIam } from '../helpers/moto-iam.ts';
import {
  ACCOUNT,
  iamAuthorizer,
  type PackagedStack,
  REGION,
  resolveValue,
  roleOf,
  runThroughPackagedBundles,
  startPackagedStack,
} from '../helpers/packaged-stack.ts';
import { ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * Least privilege, proven by execution: each packaged function runs under a session of its own role
 * (the template's policies, resolved, in moto's server enforcing IAM) against moto's S3 and SQS —
 * the run goes end to end — and each role is refused what another function does (another queue,
 * another prefix of the bucket). What moto cannot evaluate (DynamoDB and Step Functions resources,
 * conditions such as dynamodb:LeadingKeys and s3:prefix, resource policies) is evaluated with
 * @cloud-copilot/iam-simulate on the same resolved policies, for the calls each function makes.
 * docs/least-privilege.md says what each role may do.
 */

const moto = motoServerBinary();
const missing = [
  ...['node_modules/.bin/serverless', 'node_modules/serverless-esbuild']
    .filter((p) => !existsSync(join(ROOT, p)))
    .map((p) => `${p} (npm install)`),
  ...(moto ? [] : ['moto_server 5.2.6 (bash scripts/ci-install.sh quick)']),
];
const available = tierAvailable('deploy (least privilege on moto)', missing);

const RUN_REQUEST = {
  modelName: 'resnet-lp',
  team: 'vision',
  runtime: { name: 'torch-distributed' },
  image: '123456789012.dkr.ecr.us-east-1.amazonaws.com/vision/train:1.0',
  namespace: 'vision',
  queue: 'vision-queue',
  resourcesPerNode: { gpu: 1 },
};
const ALICE = iamAuthorizer(`arn:aws:iam::${ACCOUNT}:user/alice`, 'AIDAEXAMPLEALICE0001');

type Json = Record<string, unknown>;

/** The packaged stack of the moto block; the iam-simulate block reads its template and resolution. */
let packaged: PackagedStack | undefined;

describe.runIf(available)(
  'least privilege: each packaged function on its own role (moto enforcing IAM)',
  () => {
    let iam: MotoIam;
    let stack: PackagedStack;
    const sessions = new Map<string, RoleCredentials>();
    /** Role logical id → its session's S3 and SQS clients on moto. */
    const clients = new Map<string, { s3: S3Client; sqs: SQSClient }>();

    const as = (roleId: string) => {
      const c = clients.get(roleId);
      if (!c) throw new Error(`no session of ${roleId}`);
      return c;
    };
    const queueUrl = (id: string) => (stack.queues.get(id) as { url: string }).url;
    /**
     * The error name of a call, or 'ok'. moto answers a refused SQS (JSON protocol) or HEAD request
     * with an XML or empty 403 the SDK cannot parse: a 403 is AccessDenied.
     */
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: { name?: string; Code?: string; $metadata?: { httpStatusCode?: number } }) => {
          const name = e.Code ?? e.name ?? 'error';
          return ['SyntaxError', 'Unknown'].includes(name) && e.$metadata?.httpStatusCode === 403
            ? 'AccessDenied'
            : name;
        },
      );
    const send = (roleId: string, queue: string) =>
      outcome(
        as(roleId).sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl(queue),
            MessageBody: '{}',
            ...(queue.startsWith('Events')
              ? { MessageGroupId: 'g', MessageDeduplicationId: `${Math.random()}` }
              : {}),
          }),
        ),
      );
    const receive = (roleId: string, queue: string) =>
      outcome(
        as(roleId).sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl(queue), WaitTimeSeconds: 0 })),
      );
    const put = (roleId: string, key: string) =>
      outcome(as(roleId).s3.send(new PutObjectCommand({ Bucket: stack.bucket, Key: key, Body: 'x' })));
    const get = (roleId: string, key: string) =>
      outcome(as(roleId).s3.send(new GetObjectCommand({ Bucket: stack.bucket, Key: key })));

    beforeAll(async () => {
      iam = await startMotoIam(moto as string);
      stack = await startPackagedStack({
        storage: { s3Endpoint: iam.endpoint, sqsEndpoint: iam.endpoint, credentials: iam.admin },
        credentialsFor: (key) => {
          const c = sessions.get(roleOf(stack, key));
          if (!c) throw new Error(`no session for ${key}`);
          return {
            AWS_ACCESS_KEY_ID: c.accessKeyId,
            AWS_SECRET_ACCESS_KEY: c.secretAccessKey,
            AWS_SESSION_TOKEN: c.sessionToken,
          };
        },
      });
      packaged = stack;
      await iam.createRoles(stack.template, stack.resolver);
      for (const key of stack.functions.keys()) {
        const roleId = roleOf(stack, key);
        if (sessions.has(roleId)) continue;
        const c = await iam.assume(roleId, key);
        sessions.set(roleId, c);
        const credentials = {
          accessKeyId: c.accessKeyId,
          secretAccessKey: c.secretAccessKey,
          sessionToken: c.sessionToken,
        };
        clients.set(roleId, {
          s3: new S3Client({ endpoint: iam.endpoint, forcePathStyle: true, region: REGION, credentials }),
          sqs: new SQSClient({ endpoint: iam.endpoint, region: REGION, credentials }),
        });
      }
      // Training output the simulator would write and the run's metric objects live under runs/;
      // an object under data/ and a published model for the denial checks (written as the admin).
      await stack.s3.send(
        new PutObjectCommand({ Bucket: stack.bucket, Key: 'data/vision/x.parquet', Body: 'x' }),
      );
      await stack.s3.send(
        new PutObjectCommand({ Bucket: stack.bucket, Key: 'runs/other/output/model.bin', Body: 'x' }),
      );
    }, 240_000);

    afterAll(async () => {
      for (const c of clients.values()) {
        c.s3.destroy();
        c.sqs.destroy();
      }
      await stack?.close();
      await iam?.close();
    });

    it('the happy path: a run goes end to end with every function on its own role', async () => {
      const run = await runThroughPackagedBundles(stack, ALICE, RUN_REQUEST, 'least-privilege');
      expect(run.consumed, stack.output('runsConsumer')).toMatchObject({
        ok: true,
        result: { batchItemFailures: [] },
      });
      expect(run.status, run.failures.join('\n')).toBe('SUCCEEDED');
      // The published model and the serving hand-off, written under PublishArtifactsRole / NotifyServingRole.
      const listed = await stack.s3.send(
        new ListObjectsV2Command({ Bucket: stack.bucket, Prefix: 'models/resnet-lp/' }),
      );
      expect((listed.Contents ?? []).map((o) => o.Key)).toContainEqual(
        expect.stringMatching(/manifest\.json$/),
      );
      const served = await stack.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: queueUrl('ServingQueue'), WaitTimeSeconds: 1 }),
      );
      expect(served.Messages?.length).toBe(1);
      // The cluster saw tokens signed by the step roles' sessions (EKS maps each role to its group).
      const stepKeys = ['CreateJobRole', 'AwaitJobRole'].map((r) => sessions.get(r)?.accessKeyId);
      expect(stack.eks.callers).toEqual(expect.arrayContaining(stepKeys));
      expect(stack.eks.refused).toEqual([]);
      const reconciled = await run.reconciling;
      expect(reconciled.ok, stack.output('reconciler')).toBe(true);
    }, 170_000);

    // Each role: what its function does (ok) and what another function does (AccessDenied), on moto.
    it.each([
      ['SubmitRunRole', 'send RunsQueue', 'ok'],
      ['SubmitRunRole', 'send ServingQueue', 'AccessDenied'],
      ['SubmitRunRole', 'put models/resnet-lp/owner.json', 'AccessDenied'],
      ['SubmitRunRole', 'get runs/other/output/model.bin', 'AccessDenied'],
      ['GetRunRole', 'send RunsQueue', 'AccessDenied'],
      ['GetRunRole', 'get data/vision/x.parquet', 'AccessDenied'],
      ['RunsConsumerRole', 'receive RunsQueue', 'ok'],
      ['RunsConsumerRole', 'send RunsDeadLetterQueue', 'ok'],
      ['RunsConsumerRole', 'send RunsQueue', 'AccessDenied'],
      ['RunsConsumerRole', 'receive MetricsQueue', 'AccessDenied'],
      ['RunsConsumerRole', 'get runs/other/output/model.bin', 'AccessDenied'],
      ['PublishArtifactsRole', 'put models/resnet-lp/9/model.bin', 'ok'],
      ['PublishArtifactsRole', 'get runs/other/output/model.bin', 'ok'],
      ['PublishArtifactsRole', 'put data/vision/y.parquet', 'AccessDenied'],
      ['PublishArtifactsRole', 'send ServingQueue', 'AccessDenied'],
      ['NotifyServingRole', 'send ServingQueue', 'ok'],
      // Retention rewrites manifests (retired) and deletes a version's files; it never writes them.
      ['NotifyServingRole', 'put models/resnet-lp/9/model.bin', 'AccessDenied'],
      ['NotifyServingRole', 'send RunsQueue', 'AccessDenied'],
      ['ReconcilerRole', 'send RunsQueue', 'ok'],
      ['ReconcilerRole', 'put runs/other/metric-history.json', 'ok'],
      ['ReconcilerRole', 'receive RunsQueue', 'AccessDenied'],
      ['ReconcilerRole', 'send EventsQueue', 'AccessDenied'],
      ['ReconcilerRole', 'put data/vision/y.parquet', 'AccessDenied'],
      ['MetricsIntakeRole', 'receive MetricsQueue', 'ok'],
      ['MetricsIntakeRole', 'receive DataEventsQueue', 'AccessDenied'],
      ['MetricsIntakeRole', 'put models/resnet-lp/9/model.bin', 'AccessDenied'],
      ['DataIntakeRole', 'send DataEventsQueue', 'ok'],
      ['DataIntakeRole', 'receive MetricsQueue', 'AccessDenied'],
      ['DataIntakeRole', 'get runs/other/output/model.bin', 'AccessDenied'],
      ['EventsOutboxRole', 'send EventsQueue', 'ok'],
      ['EventsOutboxRole', 'send RunsQueue', 'AccessDenied'],
      ['EventsDeliveryRole', 'receive EventsQueue', 'ok'],
      ['EventsDeliveryRole', 'send EventsQueue', 'AccessDenied'],
      ['CreateJobRole', 'get runs/other/output/model.bin', 'AccessDenied'],
      ['CreateJobRole', 'send RunsQueue', 'AccessDenied'],
    ])('%s: %s → %s', async (roleId, call, expected) => {
      const [verb, target] = call.split(' ') as [string, string];
      const result =
        verb === 'send'
          ? await send(roleId, target)
          : verb === 'receive'
            ? await receive(roleId, target)
            : verb === 'put'
              ? await put(roleId, target)
              : await get(roleId, target);
      expect(result).toBe(expected);
    });

    it('moto cannot enforce DynamoDB: it refuses even a call the role allows (so the state table stays on dynalite)', async () => {
      const c = sessions.get('GetRunRole') as RoleCredentials;
      const ddb = new DynamoDBClient({ endpoint: iam.endpoint, region: REGION, credentials: c });
      const tableName = stack.resolver.ref('StateTable');
      const r = await outcome(
        ddb.send(new GetItemCommand({ TableName: tableName, Key: { pk: { S: 'run#x' } } })),
      );
      ddb.destroy();
      // Allowed by the policy (iam-simulate below says so); moto asks with Resource "*".
      expect(r).toBe('AccessDenied');
    });
  },
);

// ---- what moto cannot evaluate: the same resolved policies, with iam-simulate -------------------

describe.runIf(available)(
  'least privilege: conditions and resources moto cannot evaluate (iam-simulate)',
  () => {
    let stack: PackagedStack;
    let own: PackagedStack | undefined;
    const policyOf = (roleId: string) => {
      const role = stack.template.Resources[roleId];
      const policies = (role?.Properties.Policies ?? []) as Array<{
        PolicyName: string;
        PolicyDocument: unknown;
      }>;
      return policies.map((p) => ({
        name: p.PolicyName,
        policy: resolveValue(p.PolicyDocument, stack.resolver),
      }));
    };
    const TABLE = () => `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${stack.resolver.ref('StateTable')}`;
    const EXEC = () => `${stack.stateMachineArn.replace(':stateMachine:', ':execution:')}:run-1`;

    async function decide(
      roleId: string,
      action: string,
      resource: string,
      contextVariables: Record<string, string | string[]> = {},
      resourcePolicy?: unknown,
      principal = `arn:aws:sts::${ACCOUNT}:assumed-role/gantry-dev-${roleId}/session`,
    ): Promise<string> {
      const r = await runSimulation(
        {
          identityPolicies: policyOf(roleId),
          serviceControlPolicies: [],
          resourceControlPolicies: [],
          ...(resourcePolicy ? { resourcePolicy } : {}),
          request: {
            action,
            principal,
            resource: { resource, accountId: ACCOUNT },
            contextVariables: {
              'aws:PrincipalArn': `arn:aws:iam::${ACCOUNT}:role/gantry-dev-${roleId}`,
              ...contextVariables,
            },
          },
        } as never,
        {},
      );
      if (r.resultType === 'error')
        throw new Error(JSON.stringify((r as unknown as { errors: unknown }).errors));
      return (r as unknown as { overallResult: string }).overallResult;
    }

    beforeAll(async () => {
      // Only the template and its resolution (names and ARNs stay valid once a stack is closed):
      // the moto block's, or a package of its own when that block did not run.
      own = packaged ? undefined : await startPackagedStack();
      stack = (packaged ?? own) as PackagedStack;
    }, 180_000);
    afterAll(async () => {
      await own?.close();
    });

    const keys = (...k: string[]) => ({ 'dynamodb:LeadingKeys': k });
    it.each([
      // The state table by item kind (dynamodb:LeadingKeys): each function only the kinds it touches.
      ['SubmitRunRole', 'dynamodb:PutItem', 'table', keys('run#r1'), 'Allowed'],
      ['SubmitRunRole', 'dynamodb:UpdateItem', 'table', keys('count#vision'), 'Allowed'],
      ['SubmitRunRole', 'dynamodb:PutItem', 'table', keys('sweep#s1'), 'ImplicitlyDenied'],
      ['SubmitRunRole', 'dynamodb:GetItem', 'table', keys('doc#rule'), 'ImplicitlyDenied'],
      ['SubmitRunRole', 'dynamodb:Query', 'index/byTeam', {}, 'ImplicitlyDenied'],
      ['GetRunRole', 'dynamodb:GetItem', 'table', keys('run#r1'), 'Allowed'],
      ['GetRunRole', 'dynamodb:PutItem', 'table', keys('run#r1'), 'ImplicitlyDenied'],
      ['GetRunRole', 'dynamodb:GetItem', 'table', keys('sweep#s1'), 'ImplicitlyDenied'],
      ['ListRunsRole', 'dynamodb:Query', 'index/byTeam', {}, 'Allowed'],
      ['ListRunsRole', 'dynamodb:Query', 'table', {}, 'ImplicitlyDenied'],
      ['ListRunsRole', 'dynamodb:GetItem', 'table', keys('run#r1'), 'ImplicitlyDenied'],
      ['RunsConsumerRole', 'dynamodb:UpdateItem', 'table', keys('run#r1'), 'Allowed'],
      ['RunsConsumerRole', 'dynamodb:PutItem', 'table', keys('doc#rule'), 'ImplicitlyDenied'],
      ['ReconcilerRole', 'dynamodb:UpdateItem', 'table', keys('sweep#s1'), 'Allowed'],
      ['ReconcilerRole', 'dynamodb:BatchGetItem', 'table', keys('run#a', 'run#b'), 'Allowed'],
      ['ReconcilerRole', 'dynamodb:BatchGetItem', 'table', keys('run#a', 'sweep#s1'), 'ImplicitlyDenied'],
      ['ReconcilerRole', 'dynamodb:Query', 'index/active', {}, 'Allowed'],
      ['ReconcilerRole', 'dynamodb:PutItem', 'table', keys('doc#rule'), 'ImplicitlyDenied'],
      ['DataIntakeRole', 'dynamodb:PutItem', 'table', keys('doc#rule'), 'Allowed'],
      ['DataIntakeRole', 'dynamodb:PutItem', 'table', keys('sweep#s1'), 'ImplicitlyDenied'],
      ['PublishArtifactsRole', 'dynamodb:UpdateItem', 'table', keys('run#r1'), 'Allowed'],
      ['PublishArtifactsRole', 'dynamodb:UpdateItem', 'table', keys('trial#s1#0'), 'ImplicitlyDenied'],
      ['RecordOutcomeRole', 'dynamodb:UpdateItem', 'table', keys('trial#s1#0'), 'Allowed'],
      ['RecordOutcomeRole', 'dynamodb:GetItem', 'table', keys('doc#rule'), 'ImplicitlyDenied'],
      ['MetricsIntakeRole', 'dynamodb:UpdateItem', 'table', keys('run#r1'), 'Allowed'],
      ['MetricsIntakeRole', 'dynamodb:GetItem', 'table', keys('trial#s1#0'), 'ImplicitlyDenied'],
    ] as Array<[string, string, string, Json, string]>)(
      '%s %s on %s %o → %s',
      async (roleId, action, on, ctx, expected) => {
        const resource = on === 'table' ? TABLE() : `${TABLE()}/${on}`;
        expect(await decide(roleId, action, resource, ctx as Record<string, string[]>)).toBe(expected);
      },
    );

    it('metricsIntake reads a sweep objective (GetItem sweep#…) — the role must allow it', async () => {
      // functions/_deps.ts metricIngester: objectiveOf reads the sweep item of a trial run.
      expect(await decide('MetricsIntakeRole', 'dynamodb:GetItem', TABLE(), keys('sweep#s1'))).toBe(
        'Allowed',
      );
      expect(await decide('MetricsIntakeRole', 'dynamodb:PutItem', TABLE(), keys('sweep#s1'))).toBe(
        'ImplicitlyDenied',
      );
    });

    it.each([
      // Step Functions: the state machine's executions and tokens, only where the function needs them.
      ['RunsConsumerRole', 'states:StartExecution', 'machine', 'Allowed'],
      ['CreateJobRole', 'states:StartExecution', 'machine', 'ImplicitlyDenied'],
      // Task tokens: no resource type, so only a grant on * matches (one naming the machine matched nothing).
      ['AwaitJobRole', 'states:SendTaskSuccess', 'any', 'Allowed'],
      ['AwaitJobRole', 'states:SendTaskHeartbeat', 'any', 'Allowed'],
      ['ReconcilerRole', 'states:SendTaskFailure', 'any', 'Allowed'],
      ['GetRunRole', 'states:SendTaskSuccess', 'any', 'ImplicitlyDenied'],
      ['CreateJobRole', 'states:SendTaskSuccess', 'any', 'ImplicitlyDenied'],
      // The stream event source's ListStreams: no resource type either.
      ['EventsOutboxRole', 'dynamodb:ListStreams', 'any', 'Allowed'],
      ['EventsDeliveryRole', 'dynamodb:ListStreams', 'any', 'ImplicitlyDenied'],
      ['ReconcilerRole', 'states:DescribeExecution', 'execution', 'Allowed'],
      ['CancelRunRole', 'states:StopExecution', 'execution', 'Allowed'],
      ['CancelRunRole', 'states:StopExecution', 'other-execution', 'ImplicitlyDenied'],
      ['SubmitRunRole', 'states:StopExecution', 'execution', 'ImplicitlyDenied'],
    ])('%s %s on the %s → %s', async (roleId, action, on, expected) => {
      const resource =
        on === 'any'
          ? '*'
          : on === 'machine'
            ? stack.stateMachineArn
            : on === 'execution'
              ? EXEC()
              : `arn:aws:states:${REGION}:${ACCOUNT}:execution:another-machine:run-1`;
      expect(await decide(roleId, action, resource)).toBe(expected);
    });

    it.each([
      // The teams' output prefixes in another bucket (s3:prefix on ListBucket; keys under the prefix).
      [
        'PublishArtifactsRole',
        's3:ListBucket',
        'arn:aws:s3:::vision-exports',
        { 's3:prefix': 'models/run-1/' },
        'Allowed',
      ],
      [
        'PublishArtifactsRole',
        's3:ListBucket',
        'arn:aws:s3:::vision-exports',
        { 's3:prefix': 'secrets/' },
        'ImplicitlyDenied',
      ],
      [
        'PublishArtifactsRole',
        's3:GetObject',
        'arn:aws:s3:::vision-exports/models/run-1/w.bin',
        {},
        'Allowed',
      ],
      [
        'PublishArtifactsRole',
        's3:GetObject',
        'arn:aws:s3:::vision-exports/secrets/key',
        {},
        'ImplicitlyDenied',
      ],
      [
        'PublishArtifactsRole',
        's3:ListBucket',
        'arn:aws:s3:::another-bucket',
        { 's3:prefix': 'models/' },
        'ImplicitlyDenied',
      ],
      [
        'SubmitRunRole',
        's3:ListBucket',
        'arn:aws:s3:::vision-exports',
        { 's3:prefix': 'models/' },
        'ImplicitlyDenied',
      ],
      [
        'ReconcilerRole',
        's3:ListBucket',
        'arn:aws:s3:::vision-exports',
        { 's3:prefix': 'models/x/' },
        'Allowed',
      ],
    ] as Array<[string, string, string, Json, string]>)(
      '%s %s %s %o → %s',
      async (roleId, action, resource, ctx, expected) => {
        expect(await decide(roleId, action, resource, ctx as Record<string, string>)).toBe(expected);
      },
    );

    it('the runs queue policy: only Gantry roles may send, whatever another principal’s identity policy says', async () => {
      const policy = resolveValue(
        stack.template.Resources.RunsQueuePolicy?.Properties.PolicyDocument,
        stack.resolver,
      );
      const queueArn = stack.resolver.getAtt('RunsQueue', 'Arn');
      expect(await decide('SubmitRunRole', 'sqs:SendMessage', queueArn, {}, policy)).toBe('Allowed');
      // A role of the account with sqs:* on every queue (an admin's) is still refused by the explicit Deny.
      const admin = await runSimulation(
        {
          identityPolicies: [
            {
              name: 'admin',
              policy: {
                Version: '2012-10-17',
                Statement: [{ Effect: 'Allow', Action: 'sqs:*', Resource: '*' }],
              },
            },
          ],
          serviceControlPolicies: [],
          resourceControlPolicies: [],
          resourcePolicy: policy,
          request: {
            action: 'sqs:SendMessage',
            principal: `arn:aws:iam::${ACCOUNT}:user/ops-admin`,
            resource: { resource: queueArn, accountId: ACCOUNT },
            contextVariables: { 'aws:PrincipalArn': `arn:aws:iam::${ACCOUNT}:user/ops-admin` },
          },
        } as never,
        {},
      );
      expect((admin as unknown as { overallResult: string }).overallResult).toBe('ExplicitlyDenied');
    });

    it('the bucket policy refuses plain HTTP to every role (aws:SecureTransport)', async () => {
      const policy = resolveValue(
        stack.template.Resources.GantryBucketPolicy?.Properties.PolicyDocument,
        stack.resolver,
      );
      const object = `arn:aws:s3:::${stack.bucket}/models/resnet/1/manifest.json`;
      expect(
        await decide(
          'PublishArtifactsRole',
          's3:PutObject',
          object,
          { 'aws:SecureTransport': 'true' },
          policy,
        ),
      ).toBe('Allowed');
      expect(
        await decide(
          'PublishArtifactsRole',
          's3:PutObject',
          object,
          { 'aws:SecureTransport': 'false' },
          policy,
        ),
      ).toBe('ExplicitlyDenied');
    });
  },
);
