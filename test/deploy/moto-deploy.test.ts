import { spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CloudFormationClient,
  DescribeStackEventsCommand,
  DescribeStackResourcesCommand,
  DescribeStacksCommand,
  type StackEvent,
} from '@aws-sdk/client-cloudformation';
import { DescribeTableCommand, DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import {
  GetRoleCommand,
  GetRolePolicyCommand,
  IAMClient,
  ListRolePoliciesCommand,
} from '@aws-sdk/client-iam';
import {
  GetFunctionConfigurationCommand,
  LambdaClient,
  ListEventSourceMappingsCommand,
  ListFunctionsCommand,
} from '@aws-sdk/client-lambda';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListBucketsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { DescribeStateMachineCommand, SFNClient } from '@aws-sdk/client-sfn';
import { GetQueueAttributesCommand, ListQueuesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Moto, motoMissing, startMoto } from '../helpers/moto.ts';
import { ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * The deploy tier against an AWS emulator: `serverless deploy` (osls, the real command) of the
 * packaged stack into moto's server on 127.0.0.1, the resources read back through the service
 * APIs, `serverless remove`, a deploy after it, and a deploy that fails after the bucket and the
 * table exist. moto runs with deploy/emulator-shims/moto_server_shims.py: each shim there makes
 * one CloudFormation behaviour match AWS and names the moto limitation (docs/deploy-tier.md).
 */

const require = createRequire(import.meta.url);
const stateMachine = require('../../deploy/serverless/state-machine.cjs') as { namedFunctions(): string[] };

const SHIMS = join(ROOT, 'deploy/emulator-shims/moto_server_shims.py');
const TEMPLATE = 'cloudformation-template-update-stack.json';
const STATE = 'serverless-state.json';
const DOT_SERVERLESS = join(ROOT, '.serverless');
/** What goes into the package (as template.test.ts lists it). */
const PACKAGE_INPUTS = [
  'serverless.yml',
  'package.json',
  'deploy/serverless',
  'statemachines',
  'functions',
  'lib',
  'web',
];

function newestInput(path: string): number {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  return Math.max(s.mtimeMs, ...readdirSync(path).map((f) => newestInput(join(path, f))));
}
const STACK = 'gantry-dev';
const REGION = 'us-east-1';
/** moto's default account. */
const ACCOUNT = '123456789012';
/** The bucket's name without its stack-unique suffix (serverless.yml custom.bucketName). */
const BUCKET_PREFIX = `gantry-dev-${ACCOUNT}-${REGION}-`;
/** The bucket of the stack deployed last (read from the stack). */
let BUCKET = '';
/** A bucket name someone else holds (created outside the stack by the rollback test). */
const TAKEN_BUCKET = 'gantry-deploy-tier-name-taken';

const missing = [
  ...(existsSync(join(ROOT, 'node_modules/.bin/serverless'))
    ? []
    : ['node_modules/.bin/serverless (npm install)']),
  ...motoMissing(),
];
const available = tierAvailable('deploy (serverless deploy into moto)', missing);

type Json = Record<string, unknown>;
interface Resource {
  Type: string;
  Properties: Json;
  DependsOn?: string | string[];
  DeletionPolicy?: string;
}
interface Template {
  Resources: Record<string, Resource>;
}

interface Run {
  status: number | null;
  out: string;
  seconds: number;
}

/** A command with output collected asynchronously (moto's output keeps flowing meanwhile). */
function run(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c.toString('utf8');
    });
    child.on('error', (err) => resolve({ status: null, out: `${out}\n${err.message}`, seconds: 0 }));
    child.on('close', (status) => resolve({ status, out, seconds: (Date.now() - started) / 1000 }));
  });
}

const timings: Array<[string, number]> = [];

describe.runIf(available)('serverless deploy into moto (osls, the packaged stack)', () => {
  let moto: Moto;
  let work: string;
  let pkg: string;
  let failing: string;
  let saved: string | undefined;
  let t: Template;
  let env: NodeJS.ProcessEnv;
  const clients = (endpoint: string) => {
    const config = {
      endpoint,
      region: REGION,
      credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    };
    return {
      cfn: new CloudFormationClient(config),
      ddb: new DynamoDBClient(config),
      iam: new IAMClient(config),
      lambda: new LambdaClient(config),
      s3: new S3Client({ ...config, forcePathStyle: true }),
      sfn: new SFNClient(config),
      sqs: new SQSClient(config),
    };
  };
  let aws: ReturnType<typeof clients>;

  const serverless = async (label: string, ...args: string[]) => {
    const r = await run(join(ROOT, 'node_modules/.bin/serverless'), args, env);
    timings.push([label, r.seconds]);
    return r;
  };
  const deploy = (label: string, dir: string) => serverless(label, 'deploy', '--package', dir);

  /** Logical id → physical id of the stack's resources (what moto created for them). */
  const physicalIds = async (): Promise<Map<string, string>> => {
    const r = await aws.cfn.send(new DescribeStackResourcesCommand({ StackName: STACK }));
    return new Map(
      (r.StackResources ?? []).map((s) => [s.LogicalResourceId ?? '', s.PhysicalResourceId ?? '']),
    );
  };

  const stackEvents = async (): Promise<StackEvent[]> =>
    (await aws.cfn.send(new DescribeStackEventsCommand({ StackName: STACK }))).StackEvents ?? [];

  const bucketExists = async (name: string) =>
    aws.s3.send(new HeadBucketCommand({ Bucket: name })).then(
      () => true,
      (err: { $metadata?: { httpStatusCode?: number } }) => {
        if (err.$metadata?.httpStatusCode === 404) return false;
        throw err;
      },
    );
  const tableNames = async () => (await aws.ddb.send(new ListTablesCommand({}))).TableNames ?? [];
  const functionNames = async () =>
    ((await aws.lambda.send(new ListFunctionsCommand({}))).Functions ?? []).map((f) => f.FunctionName);

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'gantry-moto-deploy-'));
    pkg = join(work, 'package');
    failing = join(work, 'package-fails-after-storage');
    // `npm run package` into .serverless/ unless it is newer than everything that goes into it
    // (template.test.ts reuses it the same way: one package for the tier). `deploy --package`
    // works in .serverless/ and removes it: a copy is restored in afterAll.
    const template = join(DOT_SERVERLESS, TEMPLATE);
    const stale =
      !existsSync(template) ||
      statSync(template).mtimeMs < Math.max(...PACKAGE_INPUTS.map((p) => newestInput(join(ROOT, p))));
    if (stale) {
      const r = await run('bash', ['scripts/package.sh'], {
        ...process.env,
        PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      });
      timings.push(['package', r.seconds]);
      if (r.status !== 0) throw new Error(`npm run package failed (${r.status}):\n${r.out}`);
    }
    saved = join(work, 'dot-serverless');
    cpSync(DOT_SERVERLESS, saved, { recursive: true, preserveTimestamps: true });
    cpSync(DOT_SERVERLESS, pkg, { recursive: true });
    t = JSON.parse(readFileSync(join(pkg, TEMPLATE), 'utf8')) as Template;

    // The failing variant, for this test only (the shipped template is not touched): one more
    // bucket, named as a bucket that already exists outside the stack, which refers to the bucket
    // and the table (so both are created first): the update fails once they exist, as a name
    // taken in S3 makes a real deploy fail. cfn-lint cannot see it coming (the name is not the
    // template's twice). `deploy --package` deploys the template kept in serverless-state.json;
    // the JSON file beside it gets the same change.
    cpSync(pkg, failing, { recursive: true });
    const state = JSON.parse(readFileSync(join(failing, STATE), 'utf8')) as {
      service: { provider: { compiledCloudFormationTemplate: Template } };
    };
    const f = state.service.provider.compiledCloudFormationTemplate;
    f.Resources.DeployTierClashingBucket = {
      Type: 'AWS::S3::Bucket',
      Properties: {
        BucketName: TAKEN_BUCKET,
        Tags: [
          { Key: 'after-bucket', Value: { Ref: 'GantryBucket' } },
          { Key: 'after-table', Value: { Ref: 'StateTable' } },
        ],
      },
    };
    writeFileSync(join(failing, STATE), JSON.stringify(state, null, 2));
    writeFileSync(join(failing, TEMPLATE), JSON.stringify(f, null, 2));

    moto = await startMoto({ script: SHIMS });
    aws = clients(moto.endpoint);
    const { AWS_PROFILE: _p, AWS_SESSION_TOKEN: _s, AWS_DEFAULT_PROFILE: _d, ...rest } = process.env;
    env = {
      ...rest,
      PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
      AWS_ENDPOINT_URL: moto.endpoint,
      AWS_ACCESS_KEY_ID: 'testing',
      AWS_SECRET_ACCESS_KEY: 'testing',
      AWS_REGION: REGION,
      SLS_TELEMETRY_DISABLED: '1',
      // osls polls the stack's events every 5 s by default; moto answers each operation before
      // its request returns, so the polls are only waiting.
      SLS_AWS_MONITORING_FREQUENCY: '500',
    };
  }, 300_000);

  afterAll(async () => {
    await moto?.stop();
    rmSync(DOT_SERVERLESS, { recursive: true, force: true });
    if (saved) cpSync(saved, DOT_SERVERLESS, { recursive: true, preserveTimestamps: true });
    if (work) rmSync(work, { recursive: true, force: true });
    if (timings.length > 0) {
      console.log(
        `deploy tier (moto) timings: ${timings.map(([k, s]) => `${k} ${s.toFixed(1)} s`).join(', ')}`,
      );
    }
  });

  it('keeps no resource on the rollback of the deploy that created it (no DeletionPolicy Retain)', () => {
    // A retained resource with a fixed name blocks every later create; RetainExceptOnCreate keeps
    // the data when the stack goes, yet deletes the resource when its own create is rolled back.
    const retained = Object.entries(t.Resources).filter(([, r]) => r.DeletionPolicy);
    expect(Object.fromEntries(retained.map(([id, r]) => [id, r.DeletionPolicy]))).toEqual({
      GantryBucket: 'RetainExceptOnCreate',
      StateTable: 'RetainExceptOnCreate',
    });
  });

  it('deploys the packaged stack', async () => {
    const r = await deploy('deploy', pkg);
    expect(r.status, `${r.out}\n--- moto ---\n${moto.output().slice(-8000)}`).toBe(0);
    const [stack] = (await aws.cfn.send(new DescribeStacksCommand({ StackName: STACK }))).Stacks ?? [];
    expect(stack?.StackStatus).toBe('UPDATE_COMPLETE');
  }, 300_000);

  it('created the bucket, the state table with its key schema and indexes, and the queues as the template says', async () => {
    const ids = await physicalIds();
    BUCKET = ids.get('GantryBucket') as string;
    // Unique to the stack: the first 8 hex digits of its id.
    const stackId = (await aws.cfn.send(new DescribeStacksCommand({ StackName: STACK }))).Stacks?.[0]
      ?.StackId;
    expect(BUCKET).toBe(`${BUCKET_PREFIX}${stackId?.split('/')[2]?.split('-')[0]}`);
    expect(BUCKET).toMatch(/^gantry-dev-\d{12}-[a-z0-9-]+-[0-9a-f]{8}$/);
    expect(await bucketExists(BUCKET)).toBe(true);

    const table = (await aws.ddb.send(new DescribeTableCommand({ TableName: ids.get('StateTable') }))).Table;
    const tp = t.Resources.StateTable?.Properties as Json;
    expect(table?.KeySchema).toEqual(tp.KeySchema);
    expect(
      table?.AttributeDefinitions?.slice().sort((a, b) =>
        String(a.AttributeName).localeCompare(String(b.AttributeName)),
      ),
    ).toEqual(
      (tp.AttributeDefinitions as Array<{ AttributeName: string }>)
        .slice()
        .sort((a, b) => a.AttributeName.localeCompare(b.AttributeName)),
    );
    const indexes = Object.fromEntries(
      (table?.GlobalSecondaryIndexes ?? []).map((g) => [g.IndexName, g.KeySchema]),
    );
    expect(indexes).toEqual(
      Object.fromEntries(
        (tp.GlobalSecondaryIndexes as Array<{ IndexName: string; KeySchema: unknown }>).map((g) => [
          g.IndexName,
          g.KeySchema,
        ]),
      ),
    );
    expect(table?.StreamSpecification?.StreamViewType).toBe('NEW_AND_OLD_IMAGES');

    const queues = Object.entries(t.Resources).filter(([, r]) => r.Type === 'AWS::SQS::Queue');
    expect(queues.length).toBeGreaterThan(0);
    for (const [id, q] of queues) {
      const url = ids.get(id) ?? '';
      expect(url, id).toMatch(
        new RegExp(`/${ACCOUNT}/${String(q.Properties.QueueName).replace('.', '\\.')}$`),
      );
      const attributes =
        (await aws.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] })))
          .Attributes ?? {};
      for (const key of ['VisibilityTimeout', 'MessageRetentionPeriod'] as const) {
        if (q.Properties[key] !== undefined)
          expect(attributes[key], `${id}.${key}`).toBe(String(q.Properties[key]));
      }
      expect(attributes.FifoQueue === 'true', `${id} FIFO`).toBe(q.Properties.FifoQueue === true);
      const redrive = q.Properties.RedrivePolicy as
        | { maxReceiveCount: number; deadLetterTargetArn: unknown }
        | undefined;
      if (redrive) {
        const dlq = (redrive.deadLetterTargetArn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
        const dlqName = t.Resources[dlq]?.Properties.QueueName;
        expect(JSON.parse(attributes.RedrivePolicy ?? '{}'), `${id} redrive`).toEqual({
          deadLetterTargetArn: `arn:aws:sqs:${REGION}:${ACCOUNT}:${dlqName}`,
          maxReceiveCount: redrive.maxReceiveCount,
        });
      }
    }
  });

  it('created every function with its runtime, handler, environment and own role; the roles with their policies', async () => {
    const ids = await physicalIds();
    const pseudo: Record<string, string> = {
      'AWS::Partition': 'aws',
      'AWS::Region': REGION,
      'AWS::AccountId': ACCOUNT,
    };
    const resolve = (v: unknown): unknown => {
      if (typeof v !== 'object' || v === null) return v;
      const o = v as Json;
      if (typeof o.Ref === 'string') return pseudo[o.Ref] ?? ids.get(o.Ref);
      if (o['Fn::Join']) {
        const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
        return parts.map(resolve).join(sep);
      }
      return v;
    };
    const fns = Object.entries(t.Resources).filter(([, r]) => r.Type === 'AWS::Lambda::Function');
    // As many functions deployed as the template has (each checked below).
    expect((await functionNames()).filter((n) => n?.startsWith('gantry-dev-'))).toHaveLength(fns.length);
    for (const [id, fn] of fns) {
      const name = ids.get(id);
      expect(name, id).toBe(fn.Properties.FunctionName);
      const c = await aws.lambda.send(new GetFunctionConfigurationCommand({ FunctionName: name }));
      expect(c.Runtime, id).toBe('nodejs24.x');
      expect(c.Handler, id).toBe(fn.Properties.Handler);
      expect(c.Timeout, id).toBe(fn.Properties.Timeout);
      expect(c.MemorySize, id).toBe(fn.Properties.MemorySize);
      const vars = (fn.Properties.Environment as { Variables: Json }).Variables;
      expect(c.Environment?.Variables, id).toEqual(
        Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, String(resolve(v))])),
      );
      // Its own role, the one the template names, with the template's trust and inline policy.
      const roleId = (fn.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      const role = (await aws.iam.send(new GetRoleCommand({ RoleName: ids.get(roleId) }))).Role;
      expect(c.Role, id).toBe(role?.Arn);
      const trust = JSON.parse(decodeURIComponent(role?.AssumeRolePolicyDocument ?? '{}'));
      expect(trust.Statement[0].Principal, roleId).toEqual({ Service: ['lambda.amazonaws.com'] });
      const policies = t.Resources[roleId]?.Properties.Policies as Array<{
        PolicyName: string;
        PolicyDocument: { Statement: Array<{ Sid: string; Action: string[] }> };
      }>;
      const names = (await aws.iam.send(new ListRolePoliciesCommand({ RoleName: ids.get(roleId) })))
        .PolicyNames;
      expect(names, roleId).toEqual(policies.map((p) => p.PolicyName));
      for (const p of policies) {
        const doc = (
          await aws.iam.send(
            new GetRolePolicyCommand({ RoleName: ids.get(roleId), PolicyName: p.PolicyName }),
          )
        ).PolicyDocument;
        const statements = JSON.parse(decodeURIComponent(doc ?? '{}')).Statement as Array<{
          Sid: string;
          Action: string[];
        }>;
        expect(
          statements.map((s) => [s.Sid, s.Action]),
          roleId,
        ).toEqual(p.PolicyDocument.Statement.map((s) => [s.Sid, s.Action]));
      }
    }
    // The runs queue's consumer reads that queue.
    const mappings = (
      (await aws.lambda.send(new ListEventSourceMappingsCommand({}))).EventSourceMappings ?? []
    ).filter((m) => m.FunctionArn?.endsWith(':function:gantry-dev-runsConsumer'));
    expect(mappings.map((m) => [m.EventSourceArn, m.BatchSize])).toEqual([
      [`arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-dev-runs`, 10],
    ]);
  });

  it('created the state machine with its role, calling the stack functions the ASL names; outputs are there', async () => {
    const ids = await physicalIds();
    const arn = ids.get('TrainingRunStateMachine');
    expect(arn).toBe(`arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:gantry-dev-training-run`);
    const sm = await aws.sfn.send(new DescribeStateMachineCommand({ stateMachineArn: arn }));
    expect(sm.type).toBe('STANDARD');
    const role = (
      await aws.iam.send(new GetRoleCommand({ RoleName: ids.get('TrainingRunStateMachineRole') }))
    ).Role;
    expect(sm.roleArn).toBe(role?.Arn);
    // Every substitution resolved (the Fn::Sub shim), to the ARNs of this stack's functions.
    const definition = sm.definition ?? '';
    expect(definition).not.toMatch(/\$\{/);
    const called = [
      ...new Set(
        [...definition.matchAll(/arn:aws:lambda:[a-z0-9-]+:\d+:function:([\w-]+)/g)].map((m) => m[1]),
      ),
    ].sort();
    expect(called).toEqual(
      stateMachine
        .namedFunctions()
        .map((k) => `gantry-dev-${k}`)
        .sort(),
    );
    const deployed = await functionNames();
    for (const name of called) expect(deployed, name).toContain(name);
    // DescribeStacks after the change set: the template's outputs, resolved (the Outputs shim).
    const [stack] = (await aws.cfn.send(new DescribeStacksCommand({ StackName: STACK }))).Stacks ?? [];
    const outputs = Object.fromEntries((stack?.Outputs ?? []).map((o) => [o.OutputKey, o.OutputValue]));
    expect(outputs.TrainingRunStateMachineArn).toBe(arn);
    expect(outputs.GantryBucketName).toBe(BUCKET);
    expect(outputs.StateTableName).toBe(ids.get('StateTable'));
  });

  let retainedTable: string | undefined;
  it('serverless remove: deletes the stack, keeps the bucket (its objects) and the table (RetainExceptOnCreate)', async () => {
    retainedTable = (await physicalIds()).get('StateTable');
    await aws.s3.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: 'runs/r1/output/model.bin', Body: 'weights' }),
    );
    const r = await serverless('remove', 'remove');
    expect(r.status, r.out).toBe(0);
    await expect(aws.cfn.send(new DescribeStacksCommand({ StackName: STACK }))).rejects.toThrow(
      /does not exist/,
    );
    expect((await functionNames()).filter((n) => n?.startsWith('gantry-dev-'))).toEqual([]);
    const queues =
      (await aws.sqs.send(new ListQueuesCommand({ QueueNamePrefix: 'gantry-dev-' }))).QueueUrls ?? [];
    expect(queues).toEqual([]);
    // Kept, as CloudFormation keeps them (the delete shim: moto alone deletes them).
    expect(await bucketExists(BUCKET)).toBe(true);
    const kept = await aws.s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'runs/r1/output/model.bin' }));
    expect(await kept.Body?.transformToString()).toBe('weights');
    expect(await tableNames()).toContain(retainedTable);
  }, 300_000);

  it('deploy after remove succeeds: a new bucket and a new table; the kept ones keep their objects and records', async () => {
    const kept = BUCKET;
    const r = await deploy('redeploy after remove', pkg);
    expect(r.status, r.out).toBe(0);
    const ids = await physicalIds();
    // A new stack: a new id, so a new bucket name — the kept bucket does not block it.
    expect(ids.get('GantryBucket')).not.toBe(kept);
    expect(ids.get('GantryBucket')).toMatch(new RegExp(`^${BUCKET_PREFIX}[0-9a-f]{8}$`));
    expect(await bucketExists(ids.get('GantryBucket') as string)).toBe(true);
    const old = await aws.s3.send(new GetObjectCommand({ Bucket: kept, Key: 'runs/r1/output/model.bin' }));
    expect(await old.Body?.transformToString()).toBe('weights');
    // A new table: the kept one (its records) is not the new stack's.
    expect(ids.get('StateTable')).not.toBe(retainedTable);
    expect((await tableNames()).sort()).toEqual([ids.get('StateTable'), retainedTable].sort());
    BUCKET = ids.get('GantryBucket') as string;
  }, 300_000);

  it('a deploy that fails after the bucket and the table exist rolls them back: the next deploy succeeds', async () => {
    // A fresh account: the stack as a first deploy meets it.
    const reset = await fetch(`${moto.endpoint}/moto-api/reset`, { method: 'POST' });
    expect(reset.ok).toBe(true);
    await aws.s3.send(new CreateBucketCommand({ Bucket: TAKEN_BUCKET }));
    const r = await deploy('deploy that fails (rollback)', failing);
    expect(r.status).not.toBe(0);
    expect(r.out).toMatch(/CREATE_FAILED: DeployTierClashingBucket[\s\S]*BucketAlreadyExists/);
    const events = await stackEvents();
    const of = (id: string) => events.filter((e) => e.LogicalResourceId === id).map((e) => e.ResourceStatus);
    const seen = JSON.stringify(events.map((e) => [e.LogicalResourceId, e.ResourceStatus]));
    // Both were created before the failure, and deleted by the rollback.
    expect(of('GantryBucket'), seen).toEqual(['DELETE_COMPLETE']);
    expect(of('StateTable'), seen).toEqual(['DELETE_COMPLETE']);
    expect(of('DeployTierClashingBucket'), seen).toEqual(['CREATE_FAILED']);
    expect(await bucketExists(TAKEN_BUCKET)).toBe(true);
    const [stack] = (await aws.cfn.send(new DescribeStacksCommand({ StackName: STACK }))).Stacks ?? [];
    expect(stack?.StackStatus).toBe('UPDATE_ROLLBACK_COMPLETE');
    const buckets = (await aws.s3.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name) ?? [];
    expect(buckets.filter((b) => b?.startsWith(BUCKET_PREFIX))).toEqual([]);
    expect(await tableNames()).toEqual([]);

    const again = await deploy('deploy after the rollback', pkg);
    expect(again.status, again.out).toBe(0);
    expect(await bucketExists((await physicalIds()).get('GantryBucket') as string)).toBe(true);
    expect(await tableNames()).toHaveLength(1);
  }, 300_000);
});
