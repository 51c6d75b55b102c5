import { spawnSync } from 'node:child_process';
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
import { join, relative } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configSchemas } from '../../lib/config.ts';
import { ROUTES, routeKey } from '../../lib/intake/routes.ts';
import { DASHBOARD_ASSETS, DASHBOARD_ROUTES } from '../../lib/web/assets.ts';
import { TASK_FUNCTIONS as LOCAL_TASK_FUNCTIONS } from '../../local/definition.ts';
import { stateTableDefinition } from '../../local/state-table.ts';
import { ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * The deploy tier: `npm run package` (osls, offline) and the CloudFormation template it writes.
 * The template is rebuilt when it is older than anything that goes into it. A second package with
 * the VPC and JWT params set covers the optional paths. cfn-lint then checks both templates.
 */

const require = createRequire(import.meta.url);
const stateMachine = require('../../deploy/serverless/state-machine.cjs') as {
  TASK_FUNCTIONS: Record<string, string>;
  namedFunctions(): string[];
  definitionFor(asl: unknown, functionKeys: string[]): unknown;
};
const iam = require('../../deploy/serverless/iam.cjs') as {
  KUBERNETES_GROUP: string;
  resources(ctx: {
    resolveVariable(name: string): Promise<unknown>;
    resolveConfigurationProperty(path: string[]): Promise<unknown>;
  }): Promise<{ Resources: Record<string, Resource> }>;
};
const gantryConfig = require('../../deploy/serverless/gantry-config.cjs') as {
  load(resolveVariable: (v: string) => Promise<unknown>): Promise<unknown>;
};

const OUT = join(ROOT, '.serverless');
const TEMPLATE = 'cloudformation-template-update-stack.json';
const INPUTS = [
  'serverless.yml',
  'package.json',
  'deploy/serverless',
  'statemachines',
  'functions',
  'lib',
  'web',
];

const missingTools = [
  'node_modules/.bin/serverless',
  'node_modules/serverless-esbuild',
  'node_modules/serverless-step-functions',
]
  .filter((p) => !existsSync(join(ROOT, p)))
  .map((p) => `${p} (npm install)`);
const available = tierAvailable('deploy (serverless package with osls)', missingTools);

function cfnLintBinary(): string | undefined {
  if (process.env.CFN_LINT) return process.env.CFN_LINT;
  const cache = process.env.GANTRY_CACHE || join(process.env.HOME ?? '', '.cache', 'gantry');
  const venv = join(cache, `venv-cfn-lint-${process.env.CFN_LINT_VERSION ?? '1.58.0'}`, 'bin', 'cfn-lint');
  if (existsSync(venv)) return venv;
  const onPath = spawnSync('sh', ['-c', 'command -v cfn-lint'], { encoding: 'utf8' });
  return onPath.status === 0 ? onPath.stdout.trim() : undefined;
}
const cfnLint = available ? cfnLintBinary() : undefined;
const lintAvailable =
  available && tierAvailable('deploy (cfn-lint)', cfnLint ? [] : ['cfn-lint (bash scripts/ci-install.sh)']);

// ---- helpers ------------------------------------------------------------------------------------

type Json = Record<string, unknown>;
interface Resource {
  Type: string;
  Properties: Json;
  DependsOn?: string | string[];
  Condition?: string;
  DeletionPolicy?: string;
}
interface Template {
  Resources: Record<string, Resource>;
  Parameters?: Json;
}
interface Statement {
  Sid?: string;
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: Json;
}

function newestInput(path: string): number {
  const s = statSync(path);
  if (!s.isDirectory()) return s.mtimeMs;
  return Math.max(s.mtimeMs, ...readdirSync(path).map((f) => newestInput(join(path, f))));
}

function packageInto(dir: string | undefined, params: string[] = []): void {
  const args = [
    'scripts/package.sh',
    ...params.map((p) => `--param=${p}`),
    ...(dir ? ['--package', dir] : []),
  ];
  const r = spawnSync('bash', args, {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}` },
  });
  if (r.status !== 0) throw new Error(`npm run package failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
}

/** The entries of a zip (stored or deflated), enough for serverless's archives. */
function readZip(file: string): Map<string, Buffer> {
  const buf = readFileSync(file);
  let eocd = buf.length - 22;
  while (eocd >= 0 && buf.readUInt32LE(eocd) !== 0x06054b50) eocd--;
  if (eocd < 0) throw new Error(`${file} is not a zip`);
  const entries = new Map<string, Buffer>();
  let p = buf.readUInt32LE(eocd + 16);
  for (let i = buf.readUInt16LE(eocd + 10); i > 0; i--) {
    if (buf.readUInt32LE(p) !== 0x02014b50) throw new Error(`${file}: bad central directory`);
    const method = buf.readUInt16LE(p + 10);
    const size = buf.readUInt32LE(p + 20);
    const nameLength = buf.readUInt16LE(p + 28);
    const local = buf.readUInt32LE(p + 42);
    const name = buf.toString('utf8', p + 46, p + 46 + nameLength);
    const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    const data = buf.subarray(start, start + size);
    entries.set(name, method === 0 ? data : inflateRawSync(data));
    p += 46 + nameLength + buf.readUInt16LE(p + 30) + buf.readUInt16LE(p + 32);
  }
  return entries;
}

/** `${Name}`, as the ASL writes a substitution. */
const substitution = (name: string) => `\${${name}}`;
const list = <T>(v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
const lambdaLogicalId = (key: string) => `${key[0]?.toUpperCase()}${key.slice(1)}LambdaFunction`;

function functionsOf(t: Template): Map<string, Resource> {
  return new Map(Object.entries(t.Resources).filter(([, r]) => r.Type === 'AWS::Lambda::Function'));
}

function roleOf(t: Template, fn: Resource): { id: string; statements: Statement[] } {
  const ref = fn.Properties.Role as { 'Fn::GetAtt': [string, string] };
  const id = ref['Fn::GetAtt'][0];
  const role = t.Resources[id];
  expect(role?.Type, `role ${id}`).toBe('AWS::IAM::Role');
  const policies = (role?.Properties.Policies ?? []) as Array<{ PolicyDocument: { Statement: Statement[] } }>;
  return { id, statements: policies.flatMap((p) => p.PolicyDocument.Statement) };
}

/** `SubmitRunLambdaFunction` → `submitRun`: the serverless.yml key, which names the function's zip. */
const functionKey = (logicalId: string) =>
  logicalId.replace(/LambdaFunction$/, '').replace(/^./, (c) => c.toLowerCase());

/** The handler bundle a function's zip ships (empty when the zip lacks it). */
function bundleCode(dir: string, key: string, fn: Resource): string {
  const handler = `${String(fn.Properties.Handler).replace(/\.handler$/, '')}.mjs`;
  return (
    readZip(join(dir, `${key}.zip`))
      .get(handler)
      ?.toString('utf8') ?? ''
  );
}

const actionsOf = (statements: Statement[]) =>
  [...new Set(statements.filter((s) => s.Effect === 'Allow').flatMap((s) => list(s.Action)))].sort();

/** Readable form of a Resource value: Fn::Join / Fn::GetAtt / Ref rendered as text. */
function render(v: unknown): string {
  if (typeof v === 'string') return v;
  const o = v as Json;
  if (o['Fn::Join']) {
    const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
    return parts.map(render).join(sep);
  }
  if (o['Fn::GetAtt']) return `<${(o['Fn::GetAtt'] as string[]).join('.')}>`;
  if (o.Ref) return `<${o.Ref as string}>`;
  return JSON.stringify(v);
}

/** Actions that AWS only grants on `Resource: '*'` (the documented exceptions in deploy/serverless/iam.cjs). */
const WILDCARD_ONLY = new Set([
  'logs:CreateLogDelivery',
  'logs:GetLogDelivery',
  'logs:UpdateLogDelivery',
  'logs:DeleteLogDelivery',
  'logs:ListLogDeliveries',
  'logs:PutResourcePolicy',
  'logs:DescribeResourcePolicies',
  'logs:DescribeLogGroups',
  'ec2:CreateNetworkInterface',
  'ec2:DescribeNetworkInterfaces',
  'ec2:DescribeSubnets',
  // No resource type (Service Authorization Reference): test/deploy/least-privilege.test.ts.
  'states:SendTaskSuccess',
  'states:SendTaskFailure',
  'states:SendTaskHeartbeat',
  'dynamodb:ListStreams',
]);

const LOGS = ['logs:CreateLogStream', 'logs:PutLogEvents'];
/** Only for clusters configured without eks.endpoint / eks.caData (the vpc-jwt variant's config). */
const EKS = ['eks:DescribeCluster'];
/** The variant is packaged with this config: dev.json without eks.endpoint and eks.caData. */
const DESCRIBE_CLUSTER_CONFIG = 'test/deploy/fixtures/config-describe-cluster.json';
const ANSWER = ['states:SendTaskFailure', 'states:SendTaskHeartbeat', 'states:SendTaskSuccess'];
const RUNS_RW = ['s3:GetObject', 's3:PutObject'];
const STATE_R = ['dynamodb:GetItem'];
const STATE_RW = ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'];
const STATE_Q = ['dynamodb:Query'];

/** The minimum each function needs, from what its code calls (functions/ → lib/ → adapters). */
/** Archiving pod logs before a job is deleted (runs/<id>/logs/, lib/logs/archive.ts). */
const RUN_LOGS_ARCHIVE = ['s3:GetObject', 's3:PutObject', 's3:ListBucket'];
/** The model registry (lib/registry): aliases, their history, pending approvals, the teams' model index. */
const REGISTRY_R = ['s3:GetObject', 's3:ListBucket'];
const REGISTRY_RW = [...REGISTRY_R, 's3:PutObject', 's3:DeleteObject'];
/** Retention (lib/registry/retention.ts): retired manifests rewritten, the versions' other objects deleted. */
const RETENTION = ['s3:PutObject', 's3:DeleteObject'];
const EXPECTED_ACTIONS: Record<string, string[]> = {
  submitRun: [...LOGS, ...STATE_RW, 's3:GetObject', 's3:ListBucket', 'sqs:SendMessage'],
  getRun: [...LOGS, ...STATE_R],
  getRunMetrics: [...LOGS, ...STATE_R, 's3:GetObject', 's3:ListBucket'],
  getRunEvents: [...LOGS, ...STATE_R],
  getRunLogs: [...LOGS, ...STATE_R, ...EKS, 's3:GetObject', 's3:ListBucket'],
  listRuns: [...LOGS, ...STATE_Q],
  cancelRun: [
    ...LOGS,
    ...STATE_RW,
    'states:StopExecution',
    'states:DescribeExecution',
    ...EKS,
    ...RUN_LOGS_ARCHIVE,
  ],
  rerunRun: [...LOGS, ...STATE_RW, 's3:GetObject', 's3:ListBucket', 'sqs:SendMessage'],
  submitSweep: [...LOGS, ...STATE_RW, ...STATE_Q, 's3:GetObject', 's3:ListBucket', 'sqs:SendMessage'],
  getSweep: [...LOGS, ...STATE_R, ...STATE_Q],
  listSweeps: [...LOGS, ...STATE_Q],
  cancelSweep: [
    ...LOGS,
    ...STATE_RW,
    ...STATE_Q,
    'sqs:SendMessage',
    'states:StopExecution',
    'states:DescribeExecution',
    ...EKS,
    ...RUN_LOGS_ARCHIVE,
  ],
  listRuntimes: [...LOGS, ...EKS],
  validateRun: [...LOGS, 's3:GetObject', 's3:ListBucket', ...EKS, ...STATE_R],
  getUsage: [...LOGS, ...STATE_R],
  getRunQueue: [...LOGS, ...STATE_R, ...STATE_Q, ...EKS],
  openapi: [...LOGS],
  dashboard: [...LOGS],
  runsConsumer: [
    ...LOGS,
    ...STATE_RW,
    'sqs:SendMessage',
    'states:StartExecution',
    'sqs:ReceiveMessage',
    'sqs:DeleteMessage',
    'sqs:GetQueueAttributes',
    'sqs:ChangeMessageVisibility',
  ],
  dataIntake: [
    ...LOGS,
    ...STATE_RW,
    'sqs:SendMessage',
    'sqs:ReceiveMessage',
    'sqs:DeleteMessage',
    'sqs:GetQueueAttributes',
    'sqs:ChangeMessageVisibility',
    'states:StopExecution',
    'states:DescribeExecution',
  ],
  metricsIntake: [
    ...LOGS,
    ...STATE_RW,
    ...RUNS_RW,
    's3:ListBucket',
    'sqs:ReceiveMessage',
    'sqs:DeleteMessage',
    'sqs:GetQueueAttributes',
    'sqs:ChangeMessageVisibility',
  ],
  eventsOutbox: [
    ...LOGS,
    'dynamodb:DescribeStream',
    'dynamodb:GetRecords',
    'dynamodb:GetShardIterator',
    'dynamodb:ListStreams',
    'sqs:SendMessage',
  ],
  // The dev config names no SSM webhook secrets: no ssm:GetParameter.
  eventsDelivery: [
    ...LOGS,
    'sqs:ReceiveMessage',
    'sqs:DeleteMessage',
    'sqs:GetQueueAttributes',
    'sqs:ChangeMessageVisibility',
    'events:PutEvents',
  ],
  // Alias moves in (and its delayed readiness checks out), lifecycle events out, the alias's
  // pointer, history and owner read, the InferenceServices' state written (lib/serving/handoff.ts).
  aliasMoved: [
    ...LOGS,
    'sqs:ReceiveMessage',
    'sqs:DeleteMessage',
    'sqs:GetQueueAttributes',
    'sqs:ChangeMessageVisibility',
    'sqs:SendMessage',
    ...REGISTRY_R,
    's3:PutObject',
    ...EKS,
  ],
  createJob: [...LOGS, ...STATE_RW, ...EKS],
  awaitJob: [...LOGS, ...EKS, ...ANSWER],
  checkJob: [...LOGS, ...EKS],
  publishArtifacts: [...LOGS, ...STATE_RW, ...RUNS_RW, 's3:AbortMultipartUpload', 's3:ListBucket'],
  evaluateModel: [...LOGS, ...EKS, ...REGISTRY_R],
  notifyServing: [...LOGS, ...STATE_RW, ...REGISTRY_RW, ...RETENTION, 'sqs:SendMessage'],
  listModels: [...LOGS, ...REGISTRY_R],
  getModel: [...LOGS, ...REGISTRY_R],
  getModelVersion: [...LOGS, ...REGISTRY_R],
  moveModelAlias: [...LOGS, ...REGISTRY_RW, 'sqs:SendMessage'],
  recordOutcome: [...LOGS, ...STATE_RW, ...STATE_Q, 'sqs:SendMessage'],
  cleanup: [...LOGS, ...EKS, ...RUN_LOGS_ARCHIVE],
  nextAttempt: [...LOGS, ...STATE_RW, ...EKS, ...RUN_LOGS_ARCHIVE],
  reconciler: [
    ...LOGS,
    ...EKS,
    ...ANSWER,
    'states:DescribeExecution',
    'states:StopExecution',
    ...STATE_RW,
    'dynamodb:BatchGetItem',
    ...STATE_Q,
    ...RUNS_RW,
    's3:AbortMultipartUpload',
    's3:ListBucket',
    's3:DeleteObject',
    'sqs:SendMessage',
  ],
};
const KUBERNETES_FUNCTIONS = Object.keys(EXPECTED_ACTIONS).filter((k) =>
  EXPECTED_ACTIONS[k]?.includes(EKS[0] as string),
);
const API_FUNCTIONS = ROUTES.map((r) => r.handler.replace(/-(\w)/g, (_m, c: string) => c.toUpperCase()));
/**
 * A string only the Kubernetes client's bundled code contains: client-node's ApiException, which
 * Gantry's custom-objects client (lib/adapters/kubernetes/custom-objects.ts) throws.
 */
const CLIENT_NODE_MARKER = 'HTTP-Code: ';
/** A string only @aws-sdk/client-eks contains (its service shape name). */
const EKS_SDK_MARKER = 'AWSWesleyFrontend';
/** Classic zod's string schema class name (zod/mini's is "ZodMiniString", zod core's "$ZodString"). */
const CLASSIC_ZOD_MARKER = /["'`]ZodString["'`]/;

// ---- the tests ----------------------------------------------------------------------------------

describe.runIf(available)('serverless package (osls, offline)', () => {
  let work: string;
  let main: string;
  let variant: string;
  let t: Template;
  let v: Template;
  let fns: Map<string, Resource>;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'gantry-deploy-'));
    main = join(work, 'main');
    variant = join(work, 'vpc-jwt');
    const template = join(OUT, TEMPLATE);
    const stale =
      !existsSync(template) ||
      statSync(template).mtimeMs < Math.max(...INPUTS.map((p) => newestInput(join(ROOT, p))));
    if (stale) packageInto(undefined);
    // serverless empties .serverless/ whenever it packages, even into another folder: keep a copy.
    cpSync(OUT, main, { recursive: true });
    try {
      packageInto(variant, [
        'subnetIds=subnet-0123456789abcdef0,subnet-0fedcba9876543210',
        'securityGroupIds=sg-0123456789abcdef0',
        'auth=jwt',
        'jwtIssuerUrl=https://issuer.example.com/',
        'jwtAudience=gantry',
        'alarmEmail=ops@example.com',
        'reconcilerShards=3',
        'reconcilerReservedConcurrency=3',
        'tableDeletionProtection=true',
        'eksAccessEntryClusters=training',
        `config=${DESCRIBE_CLUSTER_CONFIG}`,
      ]);
    } finally {
      rmSync(OUT, { recursive: true, force: true });
      cpSync(main, OUT, { recursive: true, preserveTimestamps: true });
    }
    t = JSON.parse(readFileSync(join(main, TEMPLATE), 'utf8')) as Template;
    v = JSON.parse(readFileSync(join(variant, TEMPLATE), 'utf8')) as Template;
    fns = functionsOf(t);
  }, 300_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('packages one function per API route, the dashboard, the consumer, the ASL tasks and the reconciler — nothing else', () => {
    const keys = [...fns.keys()].sort();
    expect(keys).toEqual(Object.keys(EXPECTED_ACTIONS).map(lambdaLogicalId).sort());
  });

  it('every function the ASL names (by its substitution) exists as a Lambda with the handler the local stack runs', () => {
    expect(Object.keys(stateMachine.TASK_FUNCTIONS).sort()).toEqual(Object.keys(LOCAL_TASK_FUNCTIONS).sort());
    for (const [substitution, key] of Object.entries(stateMachine.TASK_FUNCTIONS)) {
      const fn = fns.get(lambdaLogicalId(key));
      expect(fn, `${substitution} → ${key}`).toBeDefined();
      const handlerFile = `${String(fn?.Properties.Handler).replace(/\.handler$/, '')}.ts`;
      expect(`../${handlerFile}`, substitution).toBe(LOCAL_TASK_FUNCTIONS[substitution]);
    }
  });

  it('the state machine is the ASL file, with exactly its substitutions bound to those functions', () => {
    const sm = t.Resources.TrainingRunStateMachine as Resource;
    expect(sm.Type).toBe('AWS::StepFunctions::StateMachine');
    expect(sm.Properties.StateMachineType).toBe('STANDARD');
    const [text, vars] = (sm.Properties.DefinitionString as { 'Fn::Sub': [string, Record<string, Json>] })[
      'Fn::Sub'
    ];
    const bound = new Map(
      Object.entries(vars).map(([name, value]) => [name, (value['Fn::GetAtt'] as string[])[0] as string]),
    );
    const used = new Set([...text.matchAll(/\$\{(\w+)\}/g)].map((m) => m[1] as string));
    expect([...used].sort()).toEqual([...bound.keys()].sort());
    // Put the ASL's own substitution names back: the result must be the ASL file, untouched.
    const bySubstitution = new Map(
      Object.entries(stateMachine.TASK_FUNCTIONS).map(([name, key]) => [lambdaLogicalId(key), name]),
    );
    const restored = text.replace(
      /\$\{(\w+)\}/g,
      (_m, name: string) => `\${${bySubstitution.get(bound.get(name) ?? '')}}`,
    );
    const asl = JSON.parse(
      readFileSync(join(ROOT, 'statemachines/training-run.asl.json'), 'utf8'),
    ) as unknown;
    // `validate: true` runs asl-validator 3.16, which writes the default `QueryLanguage: JSONPath` into
    // every state it checks; that is the only change allowed.
    const deployed = JSON.parse(restored) as { States: Record<string, Json> };
    for (const state of Object.values(deployed.States)) {
      expect(state.QueryLanguage ?? 'JSONPath').toBe('JSONPath');
      delete state.QueryLanguage;
    }
    expect(deployed).toEqual(asl);
    expect([...new Set(bound.values())].sort()).toEqual(
      stateMachine.namedFunctions().map(lambdaLogicalId).sort(),
    );
    // Its role may invoke exactly those functions.
    const role = roleOf(t, { Properties: { Role: sm.Properties.RoleArn } } as unknown as Resource);
    const invoke = role.statements.filter((s) => list(s.Action).includes('lambda:InvokeFunction'));
    expect(
      invoke
        .flatMap((s) => list(s.Resource))
        .map(render)
        .sort(),
    ).toEqual([...new Set(bound.values())].map((id) => `<${id}.Arn>`).sort());
  });

  it('the ASL loader fails loudly on an unknown substitution or a missing function', () => {
    expect(() =>
      stateMachine.definitionFor({ S: { Resource: substitution('NopeFunctionArn') } }, ['createJob']),
    ).toThrow(/\$\{NopeFunctionArn\}.*does not define/);
    expect(() =>
      stateMachine.definitionFor({ S: { Resource: substitution('CreateJobFunctionArn') } }, []),
    ).toThrow(/needs the function "createJob"/);
  });

  it('runs every function on nodejs24.x / arm64 from its own ESM bundle', () => {
    for (const [id, fn] of fns) {
      expect(fn.Properties.Runtime, id).toBe('nodejs24.x');
      expect(fn.Properties.Architectures, id).toEqual(['arm64']);
      const key = functionKey(id);
      const zip = readZip(join(main, `${key}.zip`));
      const handler = `${String(fn.Properties.Handler).replace(/\.handler$/, '')}.mjs`;
      expect([...zip.keys()], id).toContain(handler);
    }
  });

  it('ships @kubernetes/client-node only in the functions that talk to Kubernetes', () => {
    for (const [id, fn] of fns) {
      const key = functionKey(id);
      const code = bundleCode(main, key, fn);
      expect(code.includes(CLIENT_NODE_MARKER), `${key} bundles @kubernetes/client-node`).toBe(
        KUBERNETES_FUNCTIONS.includes(key),
      );
    }
  });

  it("leaves client-node's model classes and, with endpoint and caData in the config, the EKS SDK out", () => {
    for (const [id, fn] of fns) {
      const key = functionKey(id);
      const code = bundleCode(main, key, fn);
      expect(code.includes('V1PodSpec'), `${key} bundles client-node's models`).toBe(false);
      // deploy/serverless/config/dev.json gives every cluster eks.endpoint and eks.caData.
      expect(code.includes(EKS_SDK_MARKER), `${key} bundles the EKS SDK`).toBe(false);
    }
  });

  it('bundles zod/mini with its English locale, never classic zod or the other locales', () => {
    for (const [id, fn] of fns) {
      const key = functionKey(id);
      const code = bundleCode(main, key, fn);
      // lib/zod.ts: Gantry's schemas are zod/mini (≈ 190 KB of classic zod less at every cold start).
      expect(CLASSIC_ZOD_MARKER.test(code), `${key} bundles classic zod`).toBe(false);
      // The dashboard serves files and parses nothing: no zod at all.
      expect(code.includes('Invalid input: expected'), `${key} and zod's English locale`).toBe(
        key !== 'dashboard',
      );
      // esbuild writes non-ASCII characters as escapes.
      expect(/Ung(ü|\\xFC)ltige Eingabe/.test(code), `${key} bundles zod's German locale`).toBe(false);
    }
  });

  it('builds the run request, sweep request and response-view schemas only in the functions that use them', () => {
    // A string only each schema's module contains (a rule message, a description).
    const SCHEMAS = {
      'run request (lib/run/schema.ts)': {
        marker: 'runDeadlineSeconds must be at least',
        in: ['submitRun', 'rerunRun', 'validateRun', 'submitSweep', 'runsConsumer', 'dataIntake', 'openapi'],
      },
      'sweep request (lib/sweep/schema.ts)': {
        marker: 'gridPoints must be a whole number',
        in: ['submitSweep', 'openapi'],
      },
      'response views (lib/intake/view-schemas.ts)': { marker: 'GET this run', in: ['openapi'] },
    };
    for (const [id, fn] of fns) {
      const key = functionKey(id);
      const code = bundleCode(main, key, fn);
      for (const [schema, { marker, in: users }] of Object.entries(SCHEMAS)) {
        expect(code.includes(marker), `${key} and the ${schema} schema`).toBe(users.includes(key));
      }
    }
  });

  it('sets the environment lib/config.ts reads, and ships the config file it names', () => {
    const known = new Set(Object.keys(configSchemas().RuntimeEnvSchema.shape));
    for (const [id, fn] of fns) {
      const vars = (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables;
      for (const name of Object.keys(vars).filter((n) => n.startsWith('GANTRY_'))) {
        expect(known.has(name), `${id}: ${name} is not in RuntimeEnv`).toBe(true);
      }
      expect(vars.GANTRY_BUCKET, id).toEqual({ Ref: 'GantryBucket' });
      expect(vars.GANTRY_STATE_TABLE, id).toEqual({ Ref: 'StateTable' });
      expect(render(vars.GANTRY_STATE_MACHINE_ARN), id).toBe(
        `arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:stateMachine:${t.Resources.TrainingRunStateMachine?.Properties.StateMachineName}`,
      );
      const configFile = String(vars.GANTRY_CONFIG_FILE);
      expect(configFile, id).toMatch(/^\/var\/task\//);
      const key = functionKey(id);
      const shipped = readZip(join(main, `${key}.zip`)).get(configFile.slice('/var/task/'.length));
      expect(shipped, `${key} ships ${configFile}`).toBeDefined();
    }
    const submit = fns.get('SubmitRunLambdaFunction')?.Properties.Environment as { Variables: Json };
    expect(submit.Variables.GANTRY_RUNS_QUEUE_URL).toEqual({ Ref: 'RunsQueue' });
    const notify = fns.get('NotifyServingLambdaFunction')?.Properties.Environment as { Variables: Json };
    expect(notify.Variables.GANTRY_SERVING_QUEUE_URL).toEqual({ Ref: 'ServingQueue' });
  });

  it('refuses a Gantry config that lib/config.ts rejects, kubeconfig clusters, or a file outside the service', async () => {
    const invalid = join(OUT, 'test-invalid-config.json');
    const local = join(OUT, 'test-kubeconfig-config.json');
    writeFileSync(invalid, JSON.stringify({ clusters: [], teams: [{ name: 'Bad_Name' }] }));
    writeFileSync(
      local,
      JSON.stringify({ clusters: [{ name: 'laptop', kubeconfig: '/home/me/.kube/config' }] }),
    );
    const resolver = (file: string) => async (name: string) => (name === 'param:config' ? file : 'test');
    try {
      await expect(gantryConfig.load(resolver(relative(ROOT, invalid)))).rejects.toThrow(
        /is invalid:\n.*clusters/,
      );
      await expect(gantryConfig.load(resolver(relative(ROOT, local)))).rejects.toThrow(
        /kubeconfig clusters \(laptop\).*for local use/,
      );
      await expect(gantryConfig.load(resolver(join(tmpdir(), 'x.json')))).rejects.toThrow(
        /inside the service/,
      );
      await expect(gantryConfig.load(resolver('deploy/serverless/config/nope.json'))).rejects.toThrow(
        /no Gantry config for stage/,
      );
    } finally {
      rmSync(invalid, { force: true });
      rmSync(local, { force: true });
    }
  });

  it("replaces client-node's KubeConfig module (kubeconfig clusters are local-only) with a throwing stub", () => {
    for (const key of KUBERNETES_FUNCTIONS) {
      const fn = fns.get(lambdaLogicalId(key)) as Resource;
      const code = bundleCode(main, key, fn);
      expect(code, key).toContain('kubeconfig clusters are for local use');
      expect(code.includes('undici'), `${key} bundles undici`).toBe(false);
    }
  });

  it('gives every function its own role with exactly the actions its code uses', () => {
    const roles = new Set<string>();
    for (const [id, fn] of fns) {
      const key = functionKey(id);
      const role = roleOf(t, fn);
      expect(roles.has(role.id), `${id} shares ${role.id}`).toBe(false);
      roles.add(role.id);
      // dev.json gives the cluster's endpoint and CA: no function may describe clusters.
      const expected = (EXPECTED_ACTIONS[key] ?? []).filter((a) => !EKS.includes(a));
      expect(actionsOf(role.statements), key).toEqual([...new Set(expected)].sort());
      // Logs: only this function's own log group.
      const logs = role.statements.filter((s) => list(s.Action).some((a) => a.startsWith('logs:')));
      expect(logs.flatMap((s) => list(s.Resource)).map(render), key).toEqual([
        `arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/lambda/${fn.Properties.FunctionName}:*`,
      ]);
    }
  });

  it("lets only NotifyServing (retention) delete a version's objects: everyone else deletes at most alias files", () => {
    for (const [id, fn] of fns) {
      const deletes = roleOf(t, fn)
        .statements.filter((s) => list(s.Action).includes('s3:DeleteObject'))
        .flatMap((s) => list(s.Resource).map(render));
      const key = functionKey(id);
      if (key === 'notifyServing') expect(deletes, key).toContain('<GantryBucket.Arn>/models/*');
      else expect(deletes, key).not.toContain('<GantryBucket.Arn>/models/*');
    }
  });

  it('grants eks:DescribeCluster, on that cluster only, to the Kubernetes functions when the config gives no endpoint and CA', () => {
    const config = JSON.parse(readFileSync(join(ROOT, DESCRIBE_CLUSTER_CONFIG), 'utf8')) as {
      clusters: Array<{ eks: { clusterName: string; region: string } }>;
    };
    const arns = config.clusters.map(
      (c) => `arn:<AWS::Partition>:eks:${c.eks.region}:<AWS::AccountId>:cluster/${c.eks.clusterName}`,
    );
    for (const [id, fn] of functionsOf(v)) {
      const key = functionKey(id);
      const role = roleOf(v, fn);
      // The variant also runs the Kubernetes functions in a VPC (its ec2: actions are checked below).
      const actions = actionsOf(role.statements).filter((a) => !a.startsWith('ec2:'));
      expect(actions, key).toEqual([...new Set(EXPECTED_ACTIONS[key])].sort());
      const describe = role.statements.filter((s) => list(s.Action).includes(EKS[0] as string));
      expect(describe.flatMap((s) => list(s.Resource)).map(render), key).toEqual(
        KUBERNETES_FUNCTIONS.includes(key) ? arns : [],
      );
    }
  });

  it('scopes every statement: no * actions, no Resource * beyond the documented exceptions', () => {
    const roleIds = Object.entries(t.Resources)
      .filter(([, r]) => r.Type === 'AWS::IAM::Role')
      .map(([id]) => id);
    for (const template of [t, v]) {
      for (const id of roleIds) {
        for (const s of roleOf(template, { Properties: { Role: { 'Fn::GetAtt': [id, 'Arn'] } } } as never)
          .statements) {
          for (const a of list(s.Action)) expect(a, `${id} ${s.Sid}`).not.toMatch(/\*/);
          if (list(s.Resource).includes('*')) {
            expect(
              list(s.Action).filter((a) => !WILDCARD_ONLY.has(a)),
              `${id} ${s.Sid} on *`,
            ).toEqual([]);
          }
          for (const r of list(s.Resource).map(render)) {
            if (r.startsWith('<GantryBucket.Arn>/'))
              // runs/: training output and metric histories (records are in the state table);
              // runs/*/logs/*: archived pod logs; models/*/owner.json, latest.json, manifest.json: who
              // owns a model name (read at submit); models/*/aliases/*, registry/teams/*: the registry's
              // aliases and the teams' model index; runs/*/evaluation/*, models/*/evaluations/*: the
              // promotion's evaluation step (its jobs' metrics, a version's evaluation);
              // models/*/aliases/*/serving/*: the KServe hand-off's state.
              expect(r, id).toMatch(
                /^<GantryBucket\.Arn>\/((runs|models)\/\*|runs\/\*\/(logs|evaluation)\/\*|models\/\*\/(owner|latest|manifest|retention)\.json|models\/\*\/aliases\/\*(\/serving\/\*)?|models\/\*\/evaluations\/\*|registry\/teams\/\*)$/,
              );
            if (r.includes(':states:')) expect(r, id).toContain(':gantry-dev-training-run');
            if (r !== '*' && list(s.Action).some((a) => a.startsWith('dynamodb:')))
              expect(r, `${id} ${s.Sid}`).toMatch(/^<StateTable\.(Arn>(\/index\/\w+)?|StreamArn>)$/);
            if (r.includes(':eks:')) expect(r, id).toMatch(/:cluster\/[\w-]+$/);
          }
        }
      }
    }
  });

  it("lets the publishing functions read every team's outputPrefixes (another bucket included), and only those prefixes", () => {
    const outputStatements = (tpl: Template, key: string) =>
      roleOf(tpl, functionsOf(tpl).get(lambdaLogicalId(key)) as Resource).statements.filter((s) =>
        s.Sid?.startsWith('TeamOutput'),
      );
    // The dev config names no outputPrefixes: no rights outside Gantry's bucket.
    for (const [, fn] of fns) {
      expect(roleOf(t, fn).statements.filter((s) => s.Sid?.startsWith('TeamOutput'))).toEqual([]);
    }
    // The fixture: vision writes to two prefixes of vision-exports, nlp to nlp-team-bucket/out/.
    for (const key of ['publishArtifacts', 'reconciler']) {
      const got = outputStatements(v, key).map((s) => ({
        Sid: s.Sid,
        Action: s.Action,
        Resource: list(s.Resource).map(render),
        ...(s.Condition ? { Condition: s.Condition } : {}),
      }));
      expect(got, key).toEqual([
        {
          Sid: 'TeamOutputList0',
          Action: ['s3:ListBucket'],
          Resource: ['arn:<AWS::Partition>:s3:::nlp-team-bucket'],
          Condition: { StringLike: { 's3:prefix': ['out/*'] } },
        },
        {
          Sid: 'TeamOutputList1',
          Action: ['s3:ListBucket'],
          Resource: ['arn:<AWS::Partition>:s3:::vision-exports'],
          Condition: { StringLike: { 's3:prefix': ['checkpoints/*', 'models/*'] } },
        },
        {
          Sid: 'TeamOutputRead',
          Action: ['s3:GetObject'],
          Resource: [
            'arn:<AWS::Partition>:s3:::nlp-team-bucket/out/*',
            'arn:<AWS::Partition>:s3:::vision-exports/checkpoints/*',
            'arn:<AWS::Partition>:s3:::vision-exports/models/*',
          ],
        },
      ]);
    }
    // No other function reaches those buckets.
    for (const [id, fn] of functionsOf(v)) {
      if (['PublishArtifactsLambdaFunction', 'ReconcilerLambdaFunction'].includes(id)) continue;
      expect(JSON.stringify(roleOf(v, fn).statements), id).not.toMatch(/vision-exports|nlp-team-bucket/);
    }
  });

  it('lets only await-job and the reconciler answer task tokens; no API function may', () => {
    const answering = [...fns]
      .filter(([, fn]) => actionsOf(roleOf(t, fn).statements).some((a) => a.startsWith('states:SendTask')))
      .map(([id]) => id)
      .sort();
    expect(answering).toEqual(['AwaitJobLambdaFunction', 'ReconcilerLambdaFunction']);
    for (const key of API_FUNCTIONS) {
      const fn = fns.get(lambdaLogicalId(key));
      expect(fn, key).toBeDefined();
      const actions = actionsOf(roleOf(t, fn as Resource).statements);
      expect(
        actions.filter((a) => a.startsWith('states:SendTask')),
        key,
      ).toEqual([]);
    }
  });

  it('routes the HTTP API (IAM auth by default) to the handler of each route', () => {
    const routes = Object.values(t.Resources).filter((r) => r.Type === 'AWS::ApiGatewayV2::Route');
    expect(routes.map((r) => r.Properties.RouteKey).sort()).toEqual(ROUTES.map(routeKey).sort());
    for (const r of routes) {
      expect(r.Properties.AuthorizationType, String(r.Properties.RouteKey)).toBe('AWS_IAM');
      expect(r.Properties.AuthorizationScopes, String(r.Properties.RouteKey)).toBeUndefined();
    }
    for (const route of ROUTES) {
      const fn = fns.get(
        lambdaLogicalId(route.handler.replace(/-(\w)/g, (_m, c: string) => c.toUpperCase())),
      );
      expect(fn?.Properties.Handler, route.path).toBe(`functions/api/${route.handler}.handler`);
      expect(Number(fn?.Properties.Timeout), route.path).toBeLessThanOrEqual(29);
    }
  });

  it('routes the dashboard on JWT stacks only, without an authorizer, to a package that ships its files', () => {
    const keys = (tpl: Template) =>
      Object.values(tpl.Resources)
        .filter((r) => r.Type === 'AWS::ApiGatewayV2::Route')
        .map((r) => String(r.Properties.RouteKey));
    // IAM stacks: a browser cannot sign requests, so the page is not routed (the function is idle).
    expect(keys(t).filter((k) => (DASHBOARD_ROUTES as readonly string[]).includes(k))).toEqual([]);
    for (const r of Object.values(v.Resources)) {
      if (r.Type !== 'AWS::ApiGatewayV2::Route') continue;
      if (!(DASHBOARD_ROUTES as readonly unknown[]).includes(r.Properties.RouteKey)) continue;
      expect(JSON.stringify(r.Properties.Target), String(r.Properties.RouteKey)).toContain(
        'HttpApiIntegrationDashboard',
      );
    }
    expect(fns.get('DashboardLambdaFunction')?.Properties.Handler).toBe('functions/web/dashboard.handler');
    for (const dir of [main, variant]) {
      const zip = readZip(join(dir, 'dashboard.zip'));
      for (const { file } of Object.values(DASHBOARD_ASSETS)) {
        expect(zip.get(file)?.toString('utf8'), `${dir}: dashboard.zip ships ${file}`).toBe(
          readFileSync(join(ROOT, file), 'utf8'),
        );
      }
    }
  });

  it('consumes the runs queue with partial batch failures, bounded concurrency and a DLQ', () => {
    const esms = Object.values(t.Resources).filter((r) => r.Type === 'AWS::Lambda::EventSourceMapping');
    const consumes = (fn: string) =>
      esms.filter(
        (e) => JSON.stringify(e.Properties.FunctionName) === JSON.stringify({ 'Fn::GetAtt': [fn, 'Arn'] }),
      );
    expect(consumes('RunsConsumerLambdaFunction')).toHaveLength(1);
    const esm = consumes('RunsConsumerLambdaFunction')[0] as Resource;
    expect(esm.Properties.EventSourceArn).toEqual({ 'Fn::GetAtt': ['RunsQueue', 'Arn'] });
    expect(esm.Properties.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
    const max = (esm.Properties.ScalingConfig as { MaximumConcurrency: number }).MaximumConcurrency;
    expect(max).toBeGreaterThanOrEqual(2);
    expect(max).toBeLessThanOrEqual(1000);
    const queue = t.Resources.RunsQueue as Resource;
    const consumer = fns.get('RunsConsumerLambdaFunction') as Resource;
    expect(Number(queue.Properties.VisibilityTimeout)).toBeGreaterThanOrEqual(
      6 * Number(consumer.Properties.Timeout),
    );
    expect(queue.Properties.RedrivePolicy).toEqual({
      deadLetterTargetArn: { 'Fn::GetAtt': ['RunsDeadLetterQueue', 'Arn'] },
      maxReceiveCount: 5,
    });
    expect(t.Resources.RunsDeadLetterQueue?.Type).toBe('AWS::SQS::Queue');
    // Refused messages are dead-lettered by the consumer itself, with the reason.
    expect((consumer.Properties.Environment as { Variables: Json }).Variables.GANTRY_RUNS_DLQ_URL).toEqual({
      Ref: 'RunsDeadLetterQueue',
    });
  });

  it('lets only the roles of the functions that enqueue runs send to the runs queue (queue policy)', () => {
    const policy = t.Resources.RunsQueuePolicy as Resource;
    expect(policy.Type).toBe('AWS::SQS::QueuePolicy');
    expect(policy.Properties.Queues).toEqual([{ Ref: 'RunsQueue' }]);
    const statements = (policy.Properties.PolicyDocument as { Statement: Json[] }).Statement as Array<{
      Sid: string;
      Effect: string;
      Principal: unknown;
      Action: string[];
      Condition?: { ArnNotEquals: { 'aws:PrincipalArn': unknown[] } };
    }>;
    const enqueuers = Object.keys(EXPECTED_ACTIONS)
      .filter(
        (k) =>
          // notifyServing and moveModelAlias send to the serving and alias-moves queues, the events
          // functions to the events queue, aliasMoved to the alias-moves and events queues, the runs
          // consumer only dead-letters.
          ![
            'notifyServing',
            'moveModelAlias',
            'runsConsumer',
            'eventsOutbox',
            'eventsDelivery',
            'aliasMoved',
          ].includes(k) && EXPECTED_ACTIONS[k]?.includes('sqs:SendMessage'),
      )
      .map((k) => ({ 'Fn::GetAtt': [`${k[0]?.toUpperCase()}${k.slice(1)}Role`, 'Arn'] }));
    const deny = statements.find((s) => s.Effect === 'Deny');
    expect(deny).toMatchObject({ Principal: '*', Action: ['sqs:SendMessage'] });
    // Everyone else is denied, even principals of this account with sqs:* in their own policy.
    expect(deny?.Condition?.ArnNotEquals['aws:PrincipalArn']).toEqual(enqueuers);
    expect(enqueuers.map((e) => e['Fn::GetAtt'][0])).toEqual([
      'SubmitRunRole',
      'RerunRunRole',
      'SubmitSweepRole',
      'CancelSweepRole',
      'DataIntakeRole',
      'RecordOutcomeRole',
      'ReconcilerRole',
    ]);
    const allow = statements.find((s) => s.Effect === 'Allow');
    expect(allow?.Principal).toEqual({ AWS: enqueuers });
  });

  it('consumes the data-events queue with the data trigger, partial batch failures and a DLQ', () => {
    const esms = Object.values(t.Resources).filter(
      (r) =>
        r.Type === 'AWS::Lambda::EventSourceMapping' &&
        JSON.stringify(r.Properties.EventSourceArn) ===
          JSON.stringify({ 'Fn::GetAtt': ['DataEventsQueue', 'Arn'] }),
    );
    expect(esms).toHaveLength(1);
    const esm = esms[0] as Resource;
    expect(esm.Properties.FunctionName).toEqual({ 'Fn::GetAtt': ['DataIntakeLambdaFunction', 'Arn'] });
    expect(esm.Properties.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
    const fn = fns.get('DataIntakeLambdaFunction') as Resource;
    expect(fn.Properties.Handler).toBe('functions/intake/data.handler');
    const vars = (fn.Properties.Environment as { Variables: Json }).Variables;
    expect(vars.GANTRY_DATA_EVENTS_QUEUE_URL).toEqual({ Ref: 'DataEventsQueue' });
    expect(vars.GANTRY_RUNS_QUEUE_URL).toEqual({ Ref: 'RunsQueue' });
    const queue = t.Resources.DataEventsQueue as Resource;
    expect(Number(queue.Properties.VisibilityTimeout)).toBeGreaterThanOrEqual(
      6 * Number(fn.Properties.Timeout),
    );
    expect(queue.Properties.RedrivePolicy).toEqual({
      deadLetterTargetArn: { 'Fn::GetAtt': ['DataEventsDeadLetterQueue', 'Arn'] },
      maxReceiveCount: 5,
    });
  });

  /** The reconciler's schedule rules: expression, and the shard each one's input names. */
  function reconcilerSchedules(template: Template) {
    return Object.values(template.Resources)
      .filter((r) => r.Type === 'AWS::Events::Rule')
      .map((r) => {
        const target = (r.Properties.Targets as Array<{ Arn: unknown; Input?: string }>)[0];
        expect(target?.Arn).toEqual({ 'Fn::GetAtt': ['ReconcilerLambdaFunction', 'Arn'] });
        return { rate: r.Properties.ScheduleExpression, input: JSON.parse(String(target?.Input)) };
      })
      .sort((a, b) => a.input.shard - b.input.shard);
  }

  it('schedules the reconciler every minute (one shard by default), reserving no concurrency: it deploys on an account limited to 10', () => {
    expect(reconcilerSchedules(t)).toEqual([{ rate: 'rate(1 minute)', input: { shard: 0 } }]);
    const fn = fns.get('ReconcilerLambdaFunction');
    // No function reserves concurrency by default: Lambda refuses any reservation that leaves fewer
    // than 100 unreserved executions, which an account limited to 10 always would.
    for (const [id, f] of fns) expect(f.Properties.ReservedConcurrentExecutions, id).toBeUndefined();
    // A tick that fails or is delivered late is dropped, not run into its shard's next minute.
    const invokeConfigs = Object.values(t.Resources).filter(
      (r) =>
        r.Type === 'AWS::Lambda::EventInvokeConfig' &&
        JSON.stringify(r.Properties.FunctionName).includes('ReconcilerLambdaFunction'),
    );
    expect(invokeConfigs.map((r) => r.Properties)).toEqual([
      expect.objectContaining({ MaximumRetryAttempts: 0, MaximumEventAgeInSeconds: 60 }),
    ]);
    expect(Number(fn?.Properties.Timeout)).toBeLessThan(60);
    expect((fn?.Properties.Environment as Json | undefined)?.Variables).toMatchObject({
      GANTRY_RECONCILER_SHARDS: '1',
    });
  });

  it('with reconcilerShards=3 and reconcilerReservedConcurrency=3: three schedules, shards 0-2, three invocations at a time', () => {
    expect(reconcilerSchedules(v)).toEqual(
      [0, 1, 2].map((shard) => ({ rate: 'rate(1 minute)', input: { shard } })),
    );
    const fn = functionsOf(v).get('ReconcilerLambdaFunction');
    expect(fn?.Properties.ReservedConcurrentExecutions).toBe(3);
    expect((fn?.Properties.Environment as Json | undefined)?.Variables).toMatchObject({
      GANTRY_RECONCILER_SHARDS: '3',
    });
  });

  it('keeps run and sweep state in one DynamoDB table: the local key schema and indexes, PITR, KMS, retained except on a failed create', () => {
    const table = t.Resources.StateTable as Resource;
    expect(table.Type).toBe('AWS::DynamoDB::Table');
    // Kept when the stack goes, deleted when the deploy that created it rolls back.
    expect(table.DeletionPolicy).toBe('RetainExceptOnCreate');
    expect((table as Resource & { UpdateReplacePolicy?: string }).UpdateReplacePolicy).toBe('Retain');
    // A protected table cannot be deleted by that rollback: protection is opt-in (the param).
    expect(table.Properties.DeletionProtectionEnabled).toBe(false);
    expect((v.Resources.StateTable as Resource).Properties.DeletionProtectionEnabled).toBe('true');
    const p = table.Properties as Json;
    expect(p.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    expect(p.SSESpecification).toEqual({ SSEEnabled: true, SSEType: 'KMS' });
    expect(p.BillingMode).toBe('PAY_PER_REQUEST');
    expect(p.TimeToLiveSpecification).toBeUndefined();
    // The embedded default creates the same table (local/state-table.ts): same keys, same indexes.
    const local = stateTableDefinition('x');
    const byName = <T extends { AttributeName?: string; IndexName?: string }>(xs: T[]) =>
      [...xs].sort((a, b) =>
        String(a.AttributeName ?? a.IndexName).localeCompare(String(b.AttributeName ?? b.IndexName)),
      );
    expect(byName(p.AttributeDefinitions as never[])).toEqual(byName(local.AttributeDefinitions as never[]));
    expect(p.KeySchema).toEqual(local.KeySchema);
    expect(byName(p.GlobalSecondaryIndexes as never[])).toEqual(
      byName(local.GlobalSecondaryIndexes as never[]),
    );
    // Each function reaches only the item kinds it uses.
    const kinds = (key: string) =>
      roleOf(t, fns.get(lambdaLogicalId(key)) as Resource)
        .statements.filter((s) => list(s.Action).includes('dynamodb:GetItem'))
        .flatMap((s) =>
          list(((s.Condition as Json)['ForAllValues:StringLike'] as Json)['dynamodb:LeadingKeys']),
        )
        .sort();
    expect(kinds('getRun')).toEqual(['run#*']);
    expect(kinds('getSweep')).toEqual(['sweep#*']);
    expect(kinds('dataIntake')).toEqual(['count#*', 'doc#*', 'run#*', 'usage#*']);
    expect(kinds('reconciler')).toEqual(['count#*', 'run#*', 'sweep#*', 'trial#*', 'usage#*']);
    expect(kinds('recordOutcome')).toEqual(['count#*', 'run#*', 'sweep#*', 'trial#*', 'usage#*']);
    // A function that writes run records writes its team's counters and usage ledger too
    // (docs/team-counters.md, docs/usage-and-budgets.md).
    expect(kinds('submitRun')).toEqual(['count#*', 'run#*', 'usage#*']);
    expect(kinds('getUsage')).toEqual(['count#*', 'usage#*']);
    expect(kinds('rerunRun')).toEqual(['count#*', 'run#*', 'usage#*']);
  });

  it('keeps the bucket private, versioned and encrypted, with data/ events going to the data-events queue', () => {
    // Kept when the stack goes, gone when its first deploy fails; its name is unique to the stack
    // (the first 8 hex digits of its id), so a kept bucket never blocks a new stack of the stage.
    expect((t.Resources.GantryBucket as Resource).DeletionPolicy).toBe('RetainExceptOnCreate');
    const name = ((t.Resources.GantryBucket as Resource).Properties as Json).BucketName as Json;
    expect(JSON.stringify(name)).toContain('{"Ref":"AWS::StackId"}');
    expect((name['Fn::If'] as unknown[])[0]).toBe('PinnedBucketName');
    for (const [id, r] of Object.entries(t.Resources)) expect(r.DeletionPolicy, id).not.toBe('Retain');
    const bucket = (t.Resources.GantryBucket as Resource).Properties as Json;
    expect(bucket.VersioningConfiguration).toEqual({ Status: 'Enabled' });
    expect(JSON.stringify(bucket.BucketEncryption)).toContain('AES256');
    expect(bucket.PublicAccessBlockConfiguration).toEqual({
      BlockPublicAcls: true,
      BlockPublicPolicy: true,
      IgnorePublicAcls: true,
      RestrictPublicBuckets: true,
    });
    const [notification] = (bucket.NotificationConfiguration as { QueueConfigurations: Json[] })
      .QueueConfigurations;
    expect(notification?.Queue).toEqual({ 'Fn::GetAtt': ['DataEventsQueue', 'Arn'] });
    expect(JSON.stringify(notification?.Filter)).toContain('"Value":"data/"');
    expect(list((t.Resources.GantryBucket as Resource).DependsOn)).toContain('DataEventsQueuePolicy');
  });

  it('throttles the HTTP API stage, tighter on the routes that start training', () => {
    const stage = t.Resources.HttpApiStage as Resource;
    expect(stage.Properties.DefaultRouteSettings).toEqual({
      ThrottlingRateLimit: 50,
      ThrottlingBurstLimit: 100,
    });
    const limits = { ThrottlingRateLimit: 10, ThrottlingBurstLimit: 20 };
    expect(stage.Properties.RouteSettings).toEqual({ 'POST /v1/runs': limits, 'POST /v1/sweeps': limits });
    expect(list(stage.DependsOn)).toEqual(
      expect.arrayContaining(['HttpApiRoutePostV1Runs', 'HttpApiRoutePostV1Sweeps']),
    );
  });

  it('sends the metric channel (runs/…/*.jsonl) to the metrics queue, which only this bucket may send to', () => {
    const bucket = (t.Resources.GantryBucket as Resource).Properties as Json;
    const configs = (bucket.NotificationConfiguration as { QueueConfigurations: Json[] }).QueueConfigurations;
    const metrics = configs.filter(
      (c) => JSON.stringify(c.Queue) === JSON.stringify({ 'Fn::GetAtt': ['MetricsQueue', 'Arn'] }),
    );
    expect(metrics).toHaveLength(1);
    expect(metrics[0]?.Filter).toEqual({
      S3Key: {
        Rules: [
          { Name: 'prefix', Value: 'runs/' },
          { Name: 'suffix', Value: '.jsonl' },
        ],
      },
    });
    expect(list((t.Resources.GantryBucket as Resource).DependsOn)).toContain('MetricsQueuePolicy');
    const policy = JSON.stringify((t.Resources.MetricsQueuePolicy as Resource).Properties);
    expect(policy).toContain('s3.amazonaws.com');
    expect(policy).toContain('aws:SourceArn');
    expect(policy).toContain('aws:SourceAccount');
    expect((t.Resources.MetricsQueue as Resource).Properties.RedrivePolicy).toMatchObject({
      maxReceiveCount: 5,
    });
    const consumer = fns.get('MetricsIntakeLambdaFunction');
    expect(consumer?.Properties.Handler).toBe('functions/intake/metrics.handler');
  });

  it('alarms on dead-lettered runs, failed or timed-out executions, the reconciler and throttling; one dashboard', () => {
    const alarms = Object.values(t.Resources).filter((r) => r.Type === 'AWS::CloudWatch::Alarm');
    const metric = (ns: string, name: string) =>
      alarms.find((a) => a.Properties.Namespace === ns && a.Properties.MetricName === name);
    const dlq = metric('AWS/SQS', 'ApproximateNumberOfMessagesVisible');
    expect(JSON.stringify(dlq?.Properties.Dimensions)).toContain('RunsDeadLetterQueue');
    expect(dlq?.Properties.Threshold).toBe(0);
    expect(metric('AWS/States', 'ExecutionsFailed')).toBeDefined();
    expect(metric('AWS/States', 'ExecutionsTimedOut')).toBeDefined();
    // deploy/serverless/observability.cjs: the reconciler, throttling and the dashboard.
    expect(JSON.stringify(metric('AWS/Lambda', 'Errors')?.Properties.Dimensions)).toContain(
      'ReconcilerLambdaFunction',
    );
    expect(metric('Gantry', 'ReconcilerErrors')).toBeDefined();
    expect(metric('Gantry', 'ReconcilerTickDuration')?.Properties.ExtendedStatistic).toBe('p90');
    expect(metric('AWS/States', 'ExecutionThrottled')).toBeDefined();
    const throttles = JSON.stringify(alarms.filter((a) => a.Properties.Metrics));
    for (const id of fns.keys()) expect(throttles, id).toContain(`"${id}"`);
    expect(Object.values(t.Resources).filter((r) => r.Type === 'AWS::CloudWatch::Dashboard')).toHaveLength(1);
    const logs = Object.values(t.Resources).filter((r) => r.Type === 'AWS::Logs::LogGroup');
    for (const g of logs) expect(g.Properties.RetentionInDays, String(g.Properties.LogGroupName)).toBe(30);
  });

  it('with the VPC and JWT params: only the Kubernetes functions join the VPC, and every route uses the JWT authorizer', () => {
    for (const [id, fn] of functionsOf(v)) {
      const key = functionKey(id);
      const inVpc = KUBERNETES_FUNCTIONS.includes(key);
      expect(fn.Properties.VpcConfig, id).toEqual(
        inVpc
          ? {
              SubnetIds: ['subnet-0123456789abcdef0', 'subnet-0fedcba9876543210'],
              SecurityGroupIds: ['sg-0123456789abcdef0'],
            }
          : undefined,
      );
      const actions = actionsOf(roleOf(v, fn).statements);
      expect(actions.includes('ec2:CreateNetworkInterface'), id).toBe(inVpc);
    }
    const all = Object.values(v.Resources).filter((r) => r.Type === 'AWS::ApiGatewayV2::Route');
    // The dashboard's routes (JWT stacks only) need no token: its files hold no data.
    const dashboard = all.filter((r) =>
      (DASHBOARD_ROUTES as readonly unknown[]).includes(r.Properties.RouteKey),
    );
    expect(dashboard.map((r) => r.Properties.RouteKey).sort()).toEqual([...DASHBOARD_ROUTES].sort());
    for (const r of dashboard) expect(r.Properties.AuthorizationType ?? 'NONE').toBe('NONE');
    const routes = all.filter((r) => !dashboard.includes(r));
    expect(routes).toHaveLength(ROUTES.length);
    for (const r of routes) expect(r.Properties.AuthorizationType).toBe('JWT');
    // Per-route scopes (the config's auth.jwt defaults): GET reads (write grants read), POST writes.
    const scopes = Object.fromEntries(
      routes.map((r) => [r.Properties.RouteKey as string, r.Properties.AuthorizationScopes]),
    );
    expect(scopes).toEqual(
      Object.fromEntries(
        ROUTES.map((r) => [
          routeKey(r),
          r.method === 'GET' ? ['gantry/read', 'gantry/write'] : ['gantry/write'],
        ]),
      ),
    );
    for (const [, fn] of functionsOf(v)) {
      const vars = (fn.Properties.Environment as { Variables: Json }).Variables;
      expect(vars.GANTRY_JWT_ISSUER).toBe('https://issuer.example.com/');
    }
    const authorizer = Object.values(v.Resources).find((r) => r.Type === 'AWS::ApiGatewayV2::Authorizer');
    expect(authorizer?.Properties.JwtConfiguration).toEqual({
      Audience: ['gantry'],
      Issuer: 'https://issuer.example.com/',
    });
  });

  it('creates no EKS access entry by default; with eksAccessEntryClusters, one STANDARD entry per Kubernetes role in the group rbac.yaml binds', () => {
    const entries = (x: Template) =>
      Object.entries(x.Resources).filter(([, r]) => r.Type === 'AWS::EKS::AccessEntry');
    expect(entries(t)).toEqual([]);
    // The group deploy/k8s/rbac.yaml binds both ClusterRoles (the jobs one per namespace) to.
    const rbac = readFileSync(join(ROOT, 'deploy/k8s/rbac.yaml'), 'utf8');
    const groups = [...rbac.matchAll(/kind: Group\s+name: (\S+)/g)].map((m) => m[1]);
    expect(new Set(groups)).toEqual(new Set([iam.KUBERNETES_GROUP]));
    const kubernetesRoles = KUBERNETES_FUNCTIONS.map(
      (key) => roleOf(v, fns.get(lambdaLogicalId(key)) as Resource).id,
    );
    expect(
      entries(v)
        .map(([, r]) => r.Properties)
        .sort((a, b) => render(a.PrincipalArn).localeCompare(render(b.PrincipalArn))),
    ).toEqual(
      kubernetesRoles.sort().map((role) => ({
        ClusterName: 'gantry-training',
        PrincipalArn: { 'Fn::GetAtt': [role, 'Arn'] },
        Type: 'STANDARD',
        KubernetesGroups: ['gantry:orchestrators'],
      })),
    );
    // No AWS-managed access policy: none can be narrowed to TrainJobs and Workloads.
    for (const [id, r] of entries(v)) expect(r.Properties.AccessPolicies, id).toBeUndefined();
  });

  it('refuses eksAccessEntryClusters naming an unknown cluster or one in another region, naming the param', async () => {
    const config = JSON.parse(readFileSync(join(ROOT, DESCRIBE_CLUSTER_CONFIG), 'utf8')) as {
      clusters: Array<{ eks: { region: string } }>;
    };
    const otherRegion = join(ROOT, 'test/deploy/fixtures', `.config-other-region-${process.pid}.json`);
    config.clusters[0] = {
      ...config.clusters[0],
      eks: { ...config.clusters[0]?.eks, region: 'eu-west-1' },
    } as {
      eks: { region: string };
    };
    writeFileSync(otherRegion, JSON.stringify(config));
    const build = (params: Record<string, string>) =>
      iam.resources({
        resolveVariable: async (name: string) => {
          const values: Record<string, unknown> = {
            'self:service': 'gantry',
            'sls:stage': `acl${Object.keys(params).length}${params.config?.length ?? 0}`,
            'self:custom.stateMachineName': 'gantry-dev-training-run',
            'self:provider.region': 'us-east-1',
            'param:eventBusName': 'default',
            'param:subnetIds': '',
            'param:securityGroupIds': '',
            ...Object.fromEntries(Object.entries(params).map(([k, val]) => [`param:${k}`, val])),
          };
          return values[name];
        },
        resolveConfigurationProperty: async () =>
          Object.fromEntries(Object.keys(EXPECTED_ACTIONS).map((k) => [k, {}])),
      });
    try {
      await expect(
        build({ config: DESCRIBE_CLUSTER_CONFIG, eksAccessEntryClusters: 'training,nope' }),
      ).rejects.toThrow(/eksAccessEntryClusters: "nope" is not a cluster of the Gantry config/);
      await expect(
        build({ config: relative(ROOT, otherRegion), eksAccessEntryClusters: 'training' }),
      ).rejects.toThrow(/eksAccessEntryClusters: "training" is in eu-west-1, the stack in us-east-1/);
      const ok = await build({ config: DESCRIBE_CLUSTER_CONFIG, eksAccessEntryClusters: 'training' });
      expect(Object.keys(ok.Resources).filter((id) => id.endsWith('AccessEntry'))).toHaveLength(
        KUBERNETES_FUNCTIONS.length,
      );
    } finally {
      rmSync(otherRegion, { force: true });
    }
  });

  describe.runIf(lintAvailable)('cfn-lint', () => {
    for (const which of ['main', 'vpc-jwt']) {
      it(`reports no errors and no warnings on the ${which} template`, () => {
        const r = spawnSync(
          'bash',
          ['deploy/serverless/cfn-lint.sh', join(which === 'main' ? main : variant, TEMPLATE)],
          { cwd: ROOT, encoding: 'utf8', env: { ...process.env, CFN_LINT: cfnLint } },
        );
        const out = `${r.stdout}\n${r.stderr}`;
        expect(out.match(/^[EW]\d{4}.*$/gm) ?? [], out).toEqual([]);
        expect(r.status, out).toBe(0);
      });
    }
  });
});
