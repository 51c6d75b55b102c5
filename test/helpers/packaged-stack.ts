import { type ChildProcess, fork, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer as createHttpsServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { startFauxqs } from 'fauxqs';
import { onLoopback } from '../../local/loopback.ts';
import { startConditionalS3Proxy } from '../../local/s3/conditional-proxy.ts';
import { type ClusterSimulator, startClusterSimulator } from '../../local/simulator/index.ts';
import { type LocalStateTable, startLocalStateTable } from '../../local/state-table.ts';
import { createLocalStepFunctions, type LocalStepFunctions } from '../../local/stepfunctions/engine.ts';
import { startStepFunctionsServer } from '../../local/stepfunctions/server.ts';
import { ROOT } from './tiers.ts';

/**
 * The packaged stack on one machine: `npm run package` (osls, offline) with a test configuration,
 * each function's zip unzipped and run in a Node 24 process of its own (a Lambda execution
 * environment: loaded once, one invocation at a time) with the environment the CloudFormation
 * template gives it, its Refs / GetAtts resolved to local stand-ins: fauxqs (S3 behind the
 * conditional-write proxy, SQS), the local state table, the local Step Functions engine on the
 * packaged definition (its Task resources are the packaged step bundles), and the cluster simulator
 * behind an EKS-like endpoint (TLS with a CA made for the run, bearer tokens checked for EKS's
 * presigned-STS form).
 *
 * Named shims (what differs from AWS, and why):
 * - the shipped configuration's `eks.endpoint` / `eks.caData` are rewritten in the unzipped copy to
 *   the local endpoint and its CA (the simulator's port and CA exist only at run time);
 * - GANTRY_S3_ENDPOINT / _SQS_ / _SFN_ / _DYNAMODB_ENDPOINT are added: on AWS the SDK's default
 *   endpoints apply;
 * - the token is checked for its form (a presigned sts:GetCallerIdentity naming the cluster), not
 *   sent to STS.
 */

export const ACCOUNT = '123456789012';
export const REGION = 'us-east-1';
export const STAGE = 'dev';
export const PACKAGED_CONFIG = 'test/deploy/fixtures/config-packaged-bundles.json';
const TEMPLATE = 'cloudformation-template-update-stack.json';
/** The Node 24 binary the project pins (the `node` devDependency), as the nodejs24.x runtime runs. */
export const NODE24 = existsSync(join(ROOT, 'node_modules/.bin/node'))
  ? join(ROOT, 'node_modules/.bin/node')
  : process.execPath;

type Json = Record<string, unknown>;
export interface Resource {
  Type: string;
  Properties: Json;
}
export interface Template {
  Resources: Record<string, Resource>;
}

/**
 * `npm run package` into `dir` with the test configuration. serverless empties `.serverless/`
 * whenever it packages, even into another folder: it is kept and put back.
 */
export function packageStack(dir: string): Template {
  const out = join(ROOT, '.serverless');
  const keep = existsSync(out) ? mkdtempSync(join(tmpdir(), 'gantry-sls-keep-')) : undefined;
  if (keep) cpSync(out, keep, { recursive: true, preserveTimestamps: true });
  try {
    const r = spawnSync(
      'bash',
      ['scripts/package.sh', `--param=config=${PACKAGED_CONFIG}`, '--package', dir],
      {
        cwd: ROOT,
        encoding: 'utf8',
        env: { ...process.env, PATH: `${join(ROOT, 'node_modules/.bin')}:${process.env.PATH}` },
      },
    );
    if (r.status !== 0) throw new Error(`npm run package failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  } finally {
    if (keep) {
      rmSync(out, { recursive: true, force: true });
      cpSync(keep, out, { recursive: true, preserveTimestamps: true });
      rmSync(keep, { recursive: true, force: true });
    }
  }
  return JSON.parse(readFileSync(join(dir, TEMPLATE), 'utf8')) as Template;
}

/** The entries of a zip (stored or deflated), enough for serverless's archives. */
export function readZip(file: string): Map<string, Buffer> {
  const buf = readFileSync(file);
  let eocd = buf.length - 22;
  while (eocd >= 0 && buf.readUInt32LE(eocd) !== 0x06054b50) eocd--;
  if (eocd < 0) throw new Error(`${file} is not a zip`);
  const entries = new Map<string, Buffer>();
  let p = buf.readUInt32LE(eocd + 16);
  for (let i = buf.readUInt16LE(eocd + 10); i > 0; i--) {
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

/** Unzip a function's package into `dir` (its /var/task). */
export function unzipInto(zip: string, dir: string): void {
  for (const [name, data] of readZip(zip)) {
    if (name.endsWith('/')) continue;
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), data);
  }
}

/** `SubmitRunLambdaFunction` → `submitRun`, the serverless.yml key that names the zip. */
export const functionKey = (logicalId: string) =>
  logicalId.replace(/LambdaFunction$/, '').replace(/^./, (c) => c.toLowerCase());
export const lambdaLogicalId = (key: string) => `${key[0]?.toUpperCase()}${key.slice(1)}LambdaFunction`;

/** What Refs and GetAtts of the template resolve to. */
export interface Resolver {
  ref(logicalId: string): string;
  getAtt(logicalId: string, attribute: string): string;
  /** A template condition's value; absent → false (every param at its default, none pinned). */
  condition?(name: string): boolean;
}

/** The stack id the stand-ins give the stack (the bucket's name ends with its first 8 hex digits). */
export const STACK_ID = `arn:aws:cloudformation:${REGION}:${ACCOUNT}:stack/gantry-${STAGE}/5f0e8a2c-1b3d-4e5f-8a9b-0c1d2e3f4a5b`;

/** An intrinsic-function value of the template, resolved (Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::If, Fn::Select, Fn::Split). */
export function resolveValue(v: unknown, r: Resolver): unknown {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) return v.map((x) => resolveValue(x, r));
  const o = v as Json;
  if (typeof o.Ref === 'string') {
    const pseudo: Record<string, string> = {
      'AWS::Partition': 'aws',
      'AWS::Region': REGION,
      'AWS::AccountId': ACCOUNT,
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackId': STACK_ID,
    };
    return pseudo[o.Ref] ?? r.ref(o.Ref);
  }
  if (o['Fn::GetAtt']) {
    const [id, att] = o['Fn::GetAtt'] as [string, string];
    return r.getAtt(id, att);
  }
  if (o['Fn::Join']) {
    const [sep, parts] = o['Fn::Join'] as [string, unknown[]];
    return parts.map((p) => String(resolveValue(p, r))).join(sep);
  }
  if (o['Fn::If']) {
    const [name, yes, no] = o['Fn::If'] as [string, unknown, unknown];
    return resolveValue(r.condition?.(name) ? yes : no, r);
  }
  if (o['Fn::Split']) {
    const [sep, text] = o['Fn::Split'] as [string, unknown];
    return String(resolveValue(text, r)).split(sep);
  }
  if (o['Fn::Select']) {
    const [i, list] = o['Fn::Select'] as [number | string, unknown];
    return (resolveValue(list, r) as unknown[])[Number(i)];
  }
  if (o['Fn::Sub']) {
    const [text, vars] = (Array.isArray(o['Fn::Sub']) ? o['Fn::Sub'] : [o['Fn::Sub'], {}]) as [string, Json];
    return text.replace(/\$\{([^}]+)\}/g, (_m, name: string) =>
      name in vars ? String(resolveValue(vars[name], r)) : String(resolveValue({ Ref: name }, r)),
    );
  }
  return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, resolveValue(x, r)]));
}

// ---- the Lambda runtime stand-in ---------------------------------------------------------------

/**
 * What each function process runs: import the handler file once (the cold start), then one
 * invocation per message with a Lambda context whose deadline is the function's timeout; an error
 * is answered as Lambda reports it (errorType = the error's name, errorMessage).
 */
const RUNTIME = `
import { pathToFileURL } from 'node:url';
const [file, name, fnName, memory] = process.argv.slice(2);
const mod = await import(pathToFileURL(file).href);
const handler = mod[name];
let n = 0;
process.on('message', async (m) => {
  const deadline = Date.now() + m.timeoutMs;
  const context = {
    callbackWaitsForEmptyEventLoop: true,
    functionName: fnName,
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:${REGION}:${ACCOUNT}:function:' + fnName,
    memoryLimitInMB: memory,
    awsRequestId: 'req-' + process.pid + '-' + ++n,
    logGroupName: '/aws/lambda/' + fnName,
    logStreamName: 'packaged',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done() {}, fail() {}, succeed() {},
  };
  try {
    const result = await handler(m.event, context);
    process.send({ id: m.id, ok: true, result: result === undefined ? null : result });
  } catch (err) {
    process.send({ id: m.id, ok: false, errorType: err?.name ?? 'Error', errorMessage: String(err?.message ?? err) });
  }
});
process.send({ ready: true });
`;

export type Invocation =
  | { ok: true; result: unknown }
  | { ok: false; errorType: string; errorMessage: string };

interface FunctionProcess {
  proc: ChildProcess;
  ready: Promise<void>;
  pending: Map<string, (r: Invocation) => void>;
  /** One invocation at a time, as one execution environment serves them. */
  chain: Promise<unknown>;
  output: string[];
}

export interface PackagedFunction {
  key: string;
  logicalId: string;
  name: string;
  handlerFile: string;
  handlerExport: string;
  timeoutMs: number;
  memory: number;
  /** The environment the template gives it, resolved, plus the Lambda runtime's and the local endpoints. */
  env: Record<string, string>;
  taskRoot: string;
}

// ---- the EKS endpoint stand-in -----------------------------------------------------------------

/** A CA-less self-signed certificate for 127.0.0.1 (the cluster's `caData` is the certificate itself). */
function selfSignedCert(dir: string): { key: string; cert: string } {
  const key = join(dir, 'eks.key');
  const cert = join(dir, 'eks.crt');
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
      '-subj',
      '/CN=kubernetes',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
  return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
}

/**
 * What EKS's authenticator checks before it asks STS: `k8s-aws-v1.` + base64url of a presigned
 * sts:GetCallerIdentity URL that signs the `x-k8s-aws-id` header naming the cluster. Returns the
 * access key that signed it, or why the token is refused.
 */
export function checkEksToken(
  header: string | undefined,
  clusterName: string,
): { accessKey: string } | { error: string } {
  const m = /^Bearer k8s-aws-v1\.([A-Za-z0-9_-]+)$/.exec(header ?? '');
  if (!m?.[1]) return { error: 'no k8s-aws-v1 bearer token' };
  let url: URL;
  try {
    url = new URL(Buffer.from(m[1], 'base64url').toString('utf8'));
  } catch {
    return { error: 'token is not a URL' };
  }
  const q = url.searchParams;
  if (!/^sts(\.[a-z0-9-]+)?\.amazonaws\.com$/.test(url.hostname))
    return { error: `not STS: ${url.hostname}` };
  if (q.get('Action') !== 'GetCallerIdentity') return { error: 'not GetCallerIdentity' };
  if (!(q.get('X-Amz-SignedHeaders') ?? '').split(';').includes('x-k8s-aws-id')) {
    return { error: 'x-k8s-aws-id is not signed' };
  }
  if (!q.get('X-Amz-Signature')) return { error: 'unsigned' };
  const credential = q.get('X-Amz-Credential') ?? '';
  void clusterName;
  return { accessKey: credential.split('/')[0] ?? '' };
}

interface EksFront {
  url: string;
  caData: string;
  /** Access keys of the tokens it accepted, in order. */
  callers: string[];
  refused: string[];
  close(): Promise<void>;
}

async function startEksFront(sim: ClusterSimulator, dir: string, clusterName: string): Promise<EksFront> {
  const { key, cert } = selfSignedCert(dir);
  const callers: string[] = [];
  const refused: string[] = [];
  const server: Server = createHttpsServer({ key, cert }, (req, res) => {
    const checked = checkEksToken(req.headers.authorization, clusterName);
    if ('error' in checked) {
      refused.push(checked.error);
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          code: 401,
          reason: 'Unauthorized',
        }),
      );
      return;
    }
    callers.push(checked.accessKey);
    const { authorization: _a, ...headers } = req.headers;
    const up = httpRequest(
      `${sim.url}${req.url}`,
      { method: req.method, headers: { ...headers, host: new URL(sim.url).host } },
      (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    caData: Buffer.from(cert).toString('base64'),
    callers,
    refused,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

// ---- the stack -----------------------------------------------------------------------------------

export interface PackagedStack {
  dir: string;
  template: Template;
  functions: Map<string, PackagedFunction>;
  resolver: Resolver;
  s3: S3Client;
  sqs: SQSClient;
  bucket: string;
  /** Queue logical id → URL / ARN (fauxqs). */
  queues: Map<string, { url: string; arn: string }>;
  table: LocalStateTable;
  sfn: LocalStepFunctions;
  stateMachineArn: string;
  sim: ClusterSimulator;
  eks: EksFront;
  /** Invoke a packaged function as Lambda would (a fresh process at the first call). */
  invoke(key: string, event: unknown, opts?: { timeoutMs?: number }): Promise<Invocation>;
  /** What a function's process printed (its logs). */
  output(key: string): string;
  close(): Promise<void>;
}

export interface PackagedStackOptions {
  /** Simulated seconds per real second in the cluster simulator (default 600). */
  simSpeed?: number;
  /**
   * A function's credentials (AWS_ACCESS_KEY_ID, …), asked for when its process starts: e.g. a
   * session of its own role. Default: `test` keys.
   */
  credentialsFor?: (key: string) => Record<string, string>;
  /** S3 and SQS elsewhere (moto's server), with credentials that may create the bucket and queues. */
  storage?: {
    s3Endpoint: string;
    sqsEndpoint: string;
    credentials: { accessKeyId: string; secretAccessKey: string };
  };
}

/** The name a role of the template gets (CloudFormation would add a random suffix). */
export const roleName = (logicalId: string) => `gantry-${STAGE}-${logicalId}`.slice(0, 64);

export async function startPackagedStack(opts: PackagedStackOptions = {}): Promise<PackagedStack> {
  const dir = mkdtempSync(join(tmpdir(), 'gantry-packaged-'));
  const closers: Array<() => Promise<unknown>> = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const pkg = join(dir, 'package');
    const template = packageStack(pkg);
    const r = template.Resources;

    // Stand-ins: fauxqs (S3, SQS) and the S3 proxy (conditional writes), or the given S3 and SQS
    // (moto's server, enforcing IAM); the state table.
    const credentials = opts.storage?.credentials ?? { accessKeyId: 'test', secretAccessKey: 'test' };
    let s3Endpoint: string;
    let sqsEndpoint: string;
    if (opts.storage) {
      s3Endpoint = opts.storage.s3Endpoint;
      sqsEndpoint = opts.storage.sqsEndpoint;
    } else {
      const fauxqs = await onLoopback(() => startFauxqs({ port: 0, logger: false, host: '127.0.0.1' }));
      closers.push(() => fauxqs.stop());
      const proxy = await startConditionalS3Proxy({ upstream: `http://127.0.0.1:${fauxqs.port}` });
      closers.push(() => proxy.close());
      s3Endpoint = proxy.url;
      sqsEndpoint = `http://127.0.0.1:${fauxqs.port}`;
    }
    const s3 = new S3Client({ endpoint: s3Endpoint, forcePathStyle: true, region: REGION, credentials });
    const sqs = new SQSClient({ endpoint: sqsEndpoint, region: REGION, credentials });
    closers.push(async () => {
      s3.destroy();
      sqs.destroy();
    });
    const tableName = `gantry-${STAGE}-StateTable-PACKAGED`;
    const table = await startLocalStateTable({ tableName });
    closers.push(() => table.close());

    // The template's queues, by their QueueName; the bucket by its BucketName.
    const queues = new Map<string, { url: string; arn: string }>();
    const early: Resolver = {
      ref: (id) => {
        throw new Error(`Ref ${id} before the stand-ins exist`);
      },
      getAtt: (id) => {
        throw new Error(`GetAtt ${id} before the stand-ins exist`);
      },
    };
    for (const [id, res] of Object.entries(r).filter(([, x]) => x.Type === 'AWS::SQS::Queue')) {
      const QueueName = String(res.Properties.QueueName);
      const fifo = res.Properties.FifoQueue === true;
      const url = (
        await sqs.send(
          new CreateQueueCommand({
            QueueName,
            Attributes: {
              ...(fifo ? { FifoQueue: 'true' } : {}),
              ...(res.Properties.VisibilityTimeout
                ? { VisibilityTimeout: String(res.Properties.VisibilityTimeout) }
                : {}),
            },
          }),
        )
      ).QueueUrl as string;
      const arn = (
        await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))
      ).Attributes?.QueueArn as string;
      queues.set(id, { url, arn });
    }
    const bucket = String(resolveValue(r.GantryBucket?.Properties.BucketName, early));
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));

    // The cluster: the simulator behind the EKS endpoint stand-in.
    const sim = await startClusterSimulator({
      trainerVersion: '2.2',
      speed: opts.simSpeed ?? 600,
      s3,
      namespaces: ['vision'],
      defaultDurationSeconds: 600,
      queues: [
        {
          name: 'vision-queue',
          clusterQueue: 'vision-cq',
          quota: { 'nvidia.com/gpu': 8, cpu: 64, memory: '512Gi' },
        },
      ],
      log: () => undefined,
    });
    closers.push(() => sim.close());
    const eks = await startEksFront(sim, dir, 'gantry-training');
    closers.push(() => eks.close());

    const fnName = (key: string) => `gantry-${STAGE}-${key}`;
    const lambdaArn = (key: string) => `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${fnName(key)}`;
    const resolver: Resolver = {
      ref(id) {
        const q = queues.get(id);
        if (q) return q.url;
        if (id === 'GantryBucket') return bucket;
        if (id === 'StateTable') return tableName;
        if (id === 'TrainingRunStateMachine') return stateMachineArn;
        const res = r[id];
        if (res?.Type === 'AWS::IAM::Role') return roleName(id);
        if (res?.Type === 'AWS::Lambda::Function') return fnName(functionKey(id));
        throw new Error(`no local stand-in for Ref ${id}`);
      },
      getAtt(id, att) {
        const q = queues.get(id);
        if (q && att === 'Arn') return q.arn;
        if (q && att === 'QueueName') return q.arn.split(':').pop() as string;
        if (id === 'GantryBucket' && att === 'Arn') return `arn:aws:s3:::${bucket}`;
        if (id === 'StateTable' && att === 'Arn')
          return `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${tableName}`;
        if (id === 'StateTable' && att === 'StreamArn')
          return `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${tableName}/stream/1970-01-01T00:00:00.000`;
        if (r[id]?.Type === 'AWS::Lambda::Function' && att === 'Arn') return lambdaArn(functionKey(id));
        if (r[id]?.Type === 'AWS::IAM::Role' && att === 'Arn')
          return `arn:aws:iam::${ACCOUNT}:role/${roleName(id)}`;
        throw new Error(`no local stand-in for GetAtt ${id}.${att}`);
      },
    };

    // Step Functions on the packaged definition; its tasks are the packaged step bundles.
    const sm = r.TrainingRunStateMachine?.Properties as Json;
    const smName = String(sm.StateMachineName);
    const stateMachineArn = `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${smName}`;
    const definition = JSON.parse(String(resolveValue(sm.DefinitionString, resolver)));
    const byArn = new Map<string, string>();
    for (const id of Object.keys(r).filter((k) => r[k]?.Type === 'AWS::Lambda::Function'))
      byArn.set(lambdaArn(functionKey(id)), functionKey(id));
    let invoke!: PackagedStack['invoke'];
    const sfn = createLocalStepFunctions({
      definitions: { [smName]: definition },
      region: REGION,
      accountId: ACCOUNT,
      resolveTask: (resource) => {
        const key = byArn.get(resource);
        if (!key) return undefined;
        return async (payload) => {
          const out = await invoke(key, payload);
          if (out.ok) return out.result;
          const e = new Error(JSON.stringify({ errorType: out.errorType, errorMessage: out.errorMessage }));
          e.name = out.errorType;
          throw e;
        };
      },
    });
    const sfnServer = await startStepFunctionsServer({ engine: sfn, port: 0, host: '127.0.0.1' });
    closers.push(() => sfnServer.close());

    // Each function's package, unzipped, with its resolved environment.
    const functions = new Map<string, PackagedFunction>();
    for (const [id, res] of Object.entries(r).filter(([, x]) => x.Type === 'AWS::Lambda::Function')) {
      const key = functionKey(id);
      const taskRoot = join(dir, 'task', key);
      unzipInto(join(pkg, `${key}.zip`), taskRoot);
      const p = res.Properties;
      const handler = String(p.Handler);
      const dot = handler.lastIndexOf('.');
      const vars = resolveValue((p.Environment as Json | undefined)?.Variables ?? {}, resolver) as Record<
        string,
        string
      >;
      const configFile = vars.GANTRY_CONFIG_FILE?.replace(/^\/var\/task\//, `${taskRoot}/`);
      if (configFile) {
        // The one rewrite of what ships: the cluster's endpoint and CA exist only now.
        const config = JSON.parse(readFileSync(configFile, 'utf8')) as { clusters: Array<{ eks?: Json }> };
        for (const c of config.clusters)
          if (c.eks) Object.assign(c.eks, { endpoint: eks.url, caData: eks.caData });
        writeFileSync(configFile, JSON.stringify(config));
      }
      functions.set(key, {
        key,
        logicalId: id,
        name: String(p.FunctionName),
        handlerFile: join(taskRoot, `${handler.slice(0, dot)}.mjs`),
        handlerExport: handler.slice(dot + 1),
        timeoutMs: Number(p.Timeout ?? 6) * 1000,
        memory: Number(p.MemorySize ?? 128),
        taskRoot,
        env: {
          ...Object.fromEntries(Object.entries(vars).map(([k, v]) => [k, String(v)])),
          ...(configFile ? { GANTRY_CONFIG_FILE: configFile } : {}),
          // Lambda's runtime environment.
          AWS_REGION: REGION,
          AWS_DEFAULT_REGION: REGION,
          AWS_LAMBDA_FUNCTION_NAME: String(p.FunctionName),
          AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(p.MemorySize ?? 128),
          AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
          AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs24.x',
          LAMBDA_TASK_ROOT: taskRoot,
          TZ: ':UTC',
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          AWS_ACCESS_KEY_ID: 'test',
          AWS_SECRET_ACCESS_KEY: 'test',
          // The local stand-ins (on AWS: the SDK's default endpoints).
          GANTRY_S3_ENDPOINT: s3Endpoint,
          GANTRY_SQS_ENDPOINT: sqsEndpoint,
          GANTRY_SFN_ENDPOINT: sfnServer.url,
          GANTRY_DYNAMODB_ENDPOINT: table.endpoint,
        },
      });
    }

    const procs = new Map<string, FunctionProcess>();
    const runtimeFile = join(dir, 'runtime.mjs');
    writeFileSync(runtimeFile, RUNTIME);
    function processOf(key: string): FunctionProcess {
      const existing = procs.get(key);
      if (existing) return existing;
      const fn = functions.get(key);
      if (!fn) throw new Error(`no packaged function ${key}`);
      const proc = fork(runtimeFile, [fn.handlerFile, fn.handlerExport, fn.name, String(fn.memory)], {
        execPath: NODE24,
        cwd: fn.taskRoot,
        // Credentials are asked for when the environment starts (the roles may be made after the stack).
        env: { ...fn.env, ...opts.credentialsFor?.(key) },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      });
      const fp: FunctionProcess = {
        proc,
        pending: new Map(),
        chain: Promise.resolve(),
        output: [],
        ready: new Promise<void>((resolve, reject) => {
          proc.once('exit', (code) => reject(new Error(`${key} exited ${code}: ${fp.output.join('')}`)));
          proc.on('message', (m: { ready?: boolean; id?: string } & Invocation) => {
            if (m.ready) resolve();
            else if (m.id) {
              fp.pending.get(m.id)?.(m);
              fp.pending.delete(m.id);
            }
          });
        }),
      };
      fp.ready.catch(() => undefined);
      proc.stdout?.on('data', (d: Buffer) => fp.output.push(d.toString()));
      proc.stderr?.on('data', (d: Buffer) => fp.output.push(d.toString()));
      proc.on('exit', (code) => {
        for (const [, done] of fp.pending)
          done({ ok: false, errorType: 'Runtime.ExitError', errorMessage: `exited ${code}` });
        fp.pending.clear();
      });
      procs.set(key, fp);
      return fp;
    }
    invoke = async (key, event, o = {}) => {
      const fp = processOf(key);
      const fn = functions.get(key) as PackagedFunction;
      const run = async (): Promise<Invocation> => {
        await fp.ready;
        const id = randomUUID();
        return new Promise<Invocation>((resolve) => {
          fp.pending.set(id, resolve);
          fp.proc.send({ id, event, timeoutMs: o.timeoutMs ?? fn.timeoutMs });
        });
      };
      const next = fp.chain.then(run, run);
      fp.chain = next.catch(() => undefined);
      return next;
    };
    closers.push(async () => {
      for (const fp of procs.values()) {
        if (fp.proc.exitCode === null) {
          const exited = new Promise<void>((res) => fp.proc.once('exit', () => res()));
          fp.proc.kill('SIGKILL');
          await exited;
        }
      }
    });

    return {
      dir,
      template,
      functions,
      resolver,
      s3,
      sqs,
      bucket,
      queues,
      table,
      sfn,
      stateMachineArn,
      sim,
      eks,
      invoke,
      output: (key) => procs.get(key)?.output.join('') ?? '',
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

// ---- events as AWS delivers them ----------------------------------------------------------------

/** An HTTP API (payload format 2.0) event for a route, with the authorizer block as API Gateway fills it. */
export function httpApiEvent(o: {
  method: string;
  path: string;
  routeKey: string;
  pathParameters?: Record<string, string>;
  body?: unknown;
  headers?: Record<string, string>;
  authorizer: Json;
  queryStringParameters?: Record<string, string>;
}): Json {
  const now = new Date();
  const body = o.body === undefined ? undefined : JSON.stringify(o.body);
  return {
    version: '2.0',
    routeKey: o.routeKey,
    rawPath: o.path,
    rawQueryString: new URLSearchParams(o.queryStringParameters ?? {}).toString(),
    headers: {
      accept: 'application/json',
      host: 'abcdef1234.execute-api.us-east-1.amazonaws.com',
      'user-agent': 'gantry-test',
      'x-forwarded-for': '198.51.100.7',
      'x-forwarded-proto': 'https',
      ...(body
        ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }
        : {}),
      ...o.headers,
    },
    ...(o.queryStringParameters ? { queryStringParameters: o.queryStringParameters } : {}),
    requestContext: {
      accountId: ACCOUNT,
      apiId: 'abcdef1234',
      authorizer: o.authorizer,
      domainName: 'abcdef1234.execute-api.us-east-1.amazonaws.com',
      domainPrefix: 'abcdef1234',
      http: {
        method: o.method,
        path: o.path,
        protocol: 'HTTP/1.1',
        sourceIp: '198.51.100.7',
        userAgent: 'gantry-test',
      },
      requestId: randomUUID().replace(/-/g, '').slice(0, 16),
      routeKey: o.routeKey,
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    ...(o.pathParameters ? { pathParameters: o.pathParameters } : {}),
    ...(body !== undefined ? { body, isBase64Encoded: false } : { isBase64Encoded: false }),
  };
}

/** `requestContext.authorizer` of the IAM authorizer for a caller whose STS ARN is `userArn`. */
export function iamAuthorizer(userArn: string, userId: string, accessKey = 'ASIAEXAMPLEKEY000001'): Json {
  return {
    iam: {
      accessKey,
      accountId: ACCOUNT,
      callerId: userId,
      cognitoIdentity: null,
      principalOrgId: null,
      userArn,
      userId,
    },
  };
}

/** `requestContext.authorizer` of a JWT authorizer (claims as strings; arrays flattened to `[a b]`). */
export function jwtAuthorizer(claims: Record<string, string | number>, scopes: string[] | null = null): Json {
  return { jwt: { claims, scopes } };
}

/** An SQS batch as Lambda's event source mapping delivers it. */
export function sqsEvent(
  queueArn: string,
  messages: Array<{
    messageId: string;
    receiptHandle: string;
    body: string;
    attributes?: Json;
    messageAttributes?: Json;
  }>,
): Json {
  return {
    Records: messages.map((m) => ({
      messageId: m.messageId,
      receiptHandle: m.receiptHandle,
      body: m.body,
      attributes: {
        ApproximateReceiveCount: '1',
        SentTimestamp: String(Date.now()),
        SenderId: 'AROAEXAMPLE:gantry',
        ApproximateFirstReceiveTimestamp: String(Date.now()),
        ...m.attributes,
      },
      messageAttributes: m.messageAttributes ?? {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: queueArn,
      awsRegion: REGION,
    })),
  };
}

/** The role (logical id) the template gives a function. */
export function roleOf(stack: Pick<PackagedStack, 'template' | 'functions'>, key: string): string {
  const fn = stack.functions.get(key);
  const role =
    fn && (stack.template.Resources[fn.logicalId]?.Properties.Role as { 'Fn::GetAtt': [string, string] });
  if (!role) throw new Error(`no role for ${key}`);
  return role['Fn::GetAtt'][0];
}

/**
 * A run through the packaged bundles as AWS would drive it: submitRun (HTTP API event) → the runs
 * queue → runsConsumer (the SQS batch, deleted when none failed) → the state machine on the
 * packaged steps, with the reconciler invoked as its schedule does. Resolves with the run id, the
 * execution's final status and the reconciler's invocation (still running: it passes until its
 * timeout).
 */
export async function runThroughPackagedBundles(
  stack: PackagedStack,
  authorizer: Json,
  body: unknown,
  key: string,
): Promise<{
  runId: string;
  status: string;
  submit: Invocation;
  consumed: Invocation;
  reconciling: Promise<Invocation>;
  failures: string[];
}> {
  const { DeleteMessageCommand, ReceiveMessageCommand } = await import('@aws-sdk/client-sqs');
  const submit = await stack.invoke(
    'submitRun',
    httpApiEvent({
      method: 'POST',
      path: '/v1/runs',
      routeKey: 'POST /v1/runs',
      body,
      headers: { 'idempotency-key': key },
      authorizer,
    }),
  );
  if (!submit.ok) throw new Error(`submitRun failed: ${submit.errorType} ${submit.errorMessage}`);
  const res = submit.result as { statusCode: number; body: string };
  if (res.statusCode !== 202) throw new Error(`submitRun answered ${res.statusCode}: ${res.body}`);
  const runId = (JSON.parse(res.body) as { runId: string }).runId;
  const q = stack.queues.get('RunsQueue') as { url: string; arn: string };
  const got = await stack.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: q.url,
      MaxNumberOfMessages: 10,
      WaitTimeSeconds: 2,
      MessageAttributeNames: ['All'],
    }),
  );
  const messages = got.Messages ?? [];
  const consumed = await stack.invoke(
    'runsConsumer',
    sqsEvent(
      q.arn,
      messages.map((m) => ({
        messageId: m.MessageId as string,
        receiptHandle: m.ReceiptHandle as string,
        body: m.Body as string,
        messageAttributes: Object.fromEntries(
          Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [
            k,
            { stringValue: v.StringValue, stringListValues: [], binaryListValues: [], dataType: v.DataType },
          ]),
        ),
      })),
    ),
  );
  const failed = consumed.ok
    ? ((consumed.result as { batchItemFailures?: unknown[] }).batchItemFailures ?? [])
    : [];
  if (consumed.ok && failed.length === 0)
    for (const m of messages)
      await stack.sqs.send(new DeleteMessageCommand({ QueueUrl: q.url, ReceiptHandle: m.ReceiptHandle }));
  const rule = Object.values(stack.template.Resources).find((x) => x.Type === 'AWS::Events::Rule');
  const input = JSON.parse(
    String(((rule?.Properties.Targets ?? []) as Array<{ Input?: string }>)[0]?.Input ?? '{}'),
  );
  const reconciling = stack.invoke('reconciler', input);
  const executionArn = `${stack.stateMachineArn.replace(':stateMachine:', ':execution:')}:${runId}`;
  let status = 'RUNNING';
  for (let i = 0; i < 120 && status === 'RUNNING'; i++) {
    await new Promise((r) => setTimeout(r, 500));
    status = await stack.sfn.describeExecution({ executionArn }).then(
      (d) => d.status,
      () => 'RUNNING',
    );
  }
  // Why it failed, when it did: the task failures of its history.
  const failures =
    status === 'SUCCEEDED'
      ? []
      : (await stack.sfn.getExecutionHistory({ executionArn }).catch(() => ({ events: [] }))).events
          .filter((e) => e.type === 'LambdaFunctionFailed' || e.type === 'ExecutionFailed')
          .map((e) => JSON.stringify(e));
  return { runId, status, submit, consumed, reconciling, failures };
}
