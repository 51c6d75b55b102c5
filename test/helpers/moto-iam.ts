import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, Socket } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import {
  CreateAccessKeyCommand,
  CreateRoleCommand,
  CreateUserCommand,
  IAMClient,
  PutRolePolicyCommand,
  PutUserPolicyCommand,
} from '@aws-sdk/client-iam';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/client-sts';
import { ACCOUNT, REGION, type Resolver, resolveValue, roleName, type Template } from './packaged-stack.ts';

/**
 * moto's server (5.2.6, installed by scripts/ci-install.sh) enforcing IAM, and the template's roles
 * in it. A starter of this branch's own: test/helpers/moto.ts (another branch) starts moto for the
 * deploy tier too; the two are to be folded together.
 *
 * moto authorizes every request after the first INITIAL_NO_AUTH_ACTION_COUNT: those three make an
 * admin user (`*` on `*`) and its access key, and everything else is signed with that key or with a
 * role session's. What moto 5.2.6 evaluates (moto/iam/access_control.py, read before relying on
 * it): identity policies of users and of assumed roles (inline and attached); Action and NotAction
 * with `*` wildcards; Resource only where the service names one — S3 (the bucket or object ARN)
 * and SQS (the queue ARN); every other service (DynamoDB, Step Functions, STS) asks with Resource
 * `*`, which a statement scoped to an ARN never matches, so moto denies it. Conditions: only
 * StringEquals on keys the request carries (none, for identity policies); every other operator is
 * ignored (treated as met). Resource policies (bucket, queue) are not evaluated. What it cannot
 * enforce is evaluated with @cloud-copilot/iam-simulate (docs/least-privilege.md).
 */

interface PolicyDocument {
  Version: string;
  Statement: Array<{ Action: string | string[]; Resource: unknown; Condition?: unknown }>;
}

/**
 * S3 operations AWS authorizes under an IAM action, by the operation name moto 5.2.6 asks for
 * instead (it authorizes an S3 request by its operation: HeadObject, CopyObject, ListObjectsV2, …;
 * seen as 403s on calls the role allows).
 */
const MOTO_S3_OPERATIONS: Record<string, string[]> = {
  's3:GetObject': ['s3:HeadObject'],
  's3:PutObject': [
    's3:CopyObject',
    's3:CreateMultipartUpload',
    's3:UploadPart',
    's3:UploadPartCopy',
    's3:CompleteMultipartUpload',
  ],
  's3:ListBucket': ['s3:ListObjectsV2', 's3:ListObjects', 's3:HeadBucket'],
};

/**
 * Shim: in moto's copy of a policy, a statement granting an S3 IAM action also names the
 * operations AWS authorizes under it (MOTO_S3_OPERATIONS), on the same resources. What this leaves
 * unchecked — CopyObject's read of its source, s3:prefix conditions — iam-simulate covers
 * (test/deploy/least-privilege.test.ts).
 */
export function motoS3OperationShim(doc: PolicyDocument): PolicyDocument {
  return {
    ...doc,
    Statement: doc.Statement.map((st) => {
      const actions = Array.isArray(st.Action) ? st.Action : [st.Action];
      const extra = actions.flatMap((a) => MOTO_S3_OPERATIONS[a] ?? []);
      return extra.length === 0 ? st : { ...st, Action: [...actions, ...extra] };
    }),
  };
}

export const MOTO_VERSION = process.env.MOTO_VERSION ?? '5.2.6';

/** moto_server: $MOTO_SERVER, else the cached venv scripts/ci-install.sh makes. */
export function motoServerBinary(): string | undefined {
  if (process.env.MOTO_SERVER) return process.env.MOTO_SERVER;
  const cache = process.env.GANTRY_CACHE || join(homedir(), '.cache', 'gantry');
  const bin = join(cache, `venv-moto-${MOTO_VERSION}`, 'bin', 'moto_server');
  return existsSync(bin) ? bin : undefined;
}

export interface MotoIam {
  endpoint: string;
  admin: { accessKeyId: string; secretAccessKey: string };
  iam: IAMClient;
  sts: STSClient;
  /** Make the template's roles (resolved), each trusting the admin user too so a test can assume it. */
  createRoles(template: Template, resolver: Resolver): Promise<Map<string, string>>;
  /** A session of a role (sts:AssumeRole as the admin user). */
  assume(logicalId: string, session?: string): Promise<RoleCredentials>;
  output(): string;
  close(): Promise<void>;
}

export interface RoleCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number, proc: ChildProcess, output: () => string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (proc.exitCode !== null) throw new Error(`moto_server exited ${proc.exitCode}: ${output()}`);
    const open = await new Promise<boolean>((resolve) => {
      const s = new Socket();
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
      s.connect(port, '127.0.0.1');
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`moto_server did not listen on ${port}: ${output()}`);
}

export async function startMotoIam(binary: string): Promise<MotoIam> {
  const port = await freePort();
  const proc = spawn(binary, ['-H', '127.0.0.1', '-p', String(port)], {
    env: { ...process.env, INITIAL_NO_AUTH_ACTION_COUNT: '3', MOTO_ACCOUNT_ID: ACCOUNT },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr?.on('data', (d: Buffer) => {
    out = (out + d.toString()).slice(-20_000);
  });
  const close = async () => {
    if (proc.exitCode !== null) return;
    const exited = new Promise<void>((r) => proc.once('exit', () => r()));
    proc.kill('SIGTERM');
    await exited;
  };
  try {
    await waitForPort(port, proc, () => out);
    const endpoint = `http://127.0.0.1:${port}`;
    const bootstrap = new IAMClient({
      endpoint,
      region: REGION,
      credentials: { accessKeyId: 'AKIABOOTSTRAP0000000', secretAccessKey: 'bootstrap' },
    });
    // The three requests moto lets through unauthorized.
    const adminName = 'gantry-test-admin';
    await bootstrap.send(new CreateUserCommand({ UserName: adminName }));
    await bootstrap.send(
      new PutUserPolicyCommand({
        UserName: adminName,
        PolicyName: 'admin',
        PolicyDocument: JSON.stringify({
          Version: '2012-10-17',
          Statement: [{ Effect: 'Allow', Action: '*', Resource: '*' }],
        }),
      }),
    );
    const key = (await bootstrap.send(new CreateAccessKeyCommand({ UserName: adminName }))).AccessKey;
    bootstrap.destroy();
    const admin = {
      accessKeyId: key?.AccessKeyId as string,
      secretAccessKey: key?.SecretAccessKey as string,
    };
    const iam = new IAMClient({ endpoint, region: REGION, credentials: admin });
    const sts = new STSClient({ endpoint, region: REGION, credentials: admin });
    const roles = new Map<string, string>();

    return {
      endpoint,
      admin,
      iam,
      sts,
      async createRoles(template, resolver) {
        for (const [id, res] of Object.entries(template.Resources)) {
          if (res.Type !== 'AWS::IAM::Role') continue;
          const name = roleName(id);
          const created = await iam.send(
            new CreateRoleCommand({
              RoleName: name,
              // Shim: on AWS Lambda assumes the role (the template trusts lambda.amazonaws.com); here
              // the test's admin user does. moto 5.2.6 cannot evaluate a Service principal in a trust
              // policy (_check_principal: TypeError on a statement without an AWS principal), so the
              // moto copy trusts the admin user only.
              AssumeRolePolicyDocument: JSON.stringify({
                Version: '2012-10-17',
                Statement: [
                  {
                    Effect: 'Allow',
                    Principal: { AWS: `arn:aws:iam::${ACCOUNT}:user/${adminName}` },
                    Action: 'sts:AssumeRole',
                  },
                ],
              }),
            }),
          );
          roles.set(id, created.Role?.Arn as string);
          for (const p of (res.Properties.Policies ?? []) as Array<{
            PolicyName: string;
            PolicyDocument: unknown;
          }>) {
            await iam.send(
              new PutRolePolicyCommand({
                RoleName: name,
                PolicyName: p.PolicyName,
                PolicyDocument: JSON.stringify(
                  motoS3OperationShim(resolveValue(p.PolicyDocument, resolver) as PolicyDocument),
                ),
              }),
            );
          }
        }
        return roles;
      },
      async assume(logicalId, session = 'gantry-test') {
        const arn = roles.get(logicalId);
        if (!arn) throw new Error(`no role ${logicalId}`);
        const c = (await sts.send(new AssumeRoleCommand({ RoleArn: arn, RoleSessionName: session })))
          .Credentials;
        return {
          accessKeyId: c?.AccessKeyId as string,
          secretAccessKey: c?.SecretAccessKey as string,
          sessionToken: c?.SessionToken as string,
        };
      },
      output: () => out,
      close: async () => {
        iam.destroy();
        sts.destroy();
        await close();
      },
    };
  } catch (err) {
    await close();
    throw new Error(`moto: ${(err as Error).message}\n${out.slice(-4000)}`, { cause: err });
  }
}
