import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../lib/config.ts';
import { ValidationError } from '../../../lib/errors.ts';
import type { Caller } from '../../../lib/intake/caller.ts';
import {
  callerMatchesPrincipal,
  isSsoRoleOf,
  parsePrincipal,
  roleSessionOf,
} from '../../../lib/intake/principals.ts';
import { teamsOf } from '../../../lib/intake/tenancy.ts';

/**
 * Team principals against callers as API Gateway's IAM authorizer presents them
 * (`requestContext.authorizer.iam.userArn`): users as `arn:aws:iam::A:user/…`, role callers as
 * sessions `arn:aws:sts::A:assumed-role/ROLE/SESSION` (no path), Identity Center users as sessions
 * of `AWSReservedSSO_<set>_<hex>` roles, federated users as `arn:aws:sts::A:federated-user/NAME`.
 */

const A = '111122223333';
const B = '444455556666';
const iam = (arn: string): Caller => ({ iamArn: arn, groups: [] });
const session = (role: string, name = 'alice', account = A) =>
  iam(`arn:aws:sts::${account}:assumed-role/${role}/${name}`);

describe('a configured principal against each caller shape', () => {
  it.each<[string, string, Caller, boolean]>([
    // IAM users: exact.
    ['user', `arn:aws:iam::${A}:user/alice`, iam(`arn:aws:iam::${A}:user/alice`), true],
    ['user, another user', `arn:aws:iam::${A}:user/alice`, iam(`arn:aws:iam::${A}:user/alicia`), false],
    ['user with a path', `arn:aws:iam::${A}:user/ml/alice`, iam(`arn:aws:iam::${A}:user/ml/alice`), true],
    ['user prefix', `arn:aws:iam::${A}:user/vision-*`, iam(`arn:aws:iam::${A}:user/vision-ci`), true],
    // Roles: every session of the role, as STS names it.
    ['role → its session', `arn:aws:iam::${A}:role/vision-mlops`, session('vision-mlops'), true],
    [
      'role → a CLI session',
      `arn:aws:iam::${A}:role/vision-mlops`,
      session('vision-mlops', 'botocore-session-1733'),
      true,
    ],
    ['role → another role', `arn:aws:iam::${A}:role/vision-mlops`, session('vision-mlops-admin'), false],
    [
      'role → same name, other account',
      `arn:aws:iam::${A}:role/vision-mlops`,
      session('vision-mlops', 'a', B),
      false,
    ],
    [
      'role → other partition',
      `arn:aws:iam::${A}:role/vision-mlops`,
      iam(`arn:aws-cn:sts::${A}:assumed-role/vision-mlops/a`),
      false,
    ],
    [
      'role with a path → its session (path dropped)',
      `arn:aws:iam::${A}:role/teams/vision-mlops`,
      session('vision-mlops'),
      true,
    ],
    [
      'role-name prefix → sessions of matching roles',
      `arn:aws:iam::${A}:role/vision-*`,
      session('vision-ci'),
      true,
    ],
    ['role-name prefix → other roles', `arn:aws:iam::${A}:role/vision-*`, session('nlp-ci'), false],
    [
      'role → a user of that name',
      `arn:aws:iam::${A}:role/vision-mlops`,
      iam(`arn:aws:iam::${A}:user/vision-mlops`),
      false,
    ],
    // Identity Center: the reserved role's ARN, or the permission set's name.
    [
      'SSO role ARN (with region path) → its session',
      `arn:aws:iam::${A}:role/aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_DataScience_0123456789abcdef`,
      session('AWSReservedSSO_DataScience_0123456789abcdef', 'alice@example.com'),
      true,
    ],
    [
      'SSO role ARN (no region) → its session',
      `arn:aws:iam::${A}:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_DataScience_0123456789abcdef`,
      session('AWSReservedSSO_DataScience_0123456789abcdef', 'alice@example.com'),
      true,
    ],
    [
      'sso:account:set → its session',
      `sso:${A}:DataScience`,
      session('AWSReservedSSO_DataScience_0123456789abcdef', 'alice@example.com'),
      true,
    ],
    [
      'sso: set with an underscore',
      `sso:${A}:Data_Science`,
      session('AWSReservedSSO_Data_Science_a1b2c3d4e5f60718'),
      true,
    ],
    [
      'sso: a longer set name is another set',
      `sso:${A}:Data`,
      session('AWSReservedSSO_Data_Science_a1b2c3d4e5f60718'),
      false,
    ],
    [
      'sso: other account',
      `sso:${A}:DataScience`,
      session('AWSReservedSSO_DataScience_0123456789abcdef', 'a', B),
      false,
    ],
    ['sso: a plain role named like the set', `sso:${A}:DataScience`, session('DataScience'), false],
    // Sessions and federated users named exactly.
    ['session exactly', `arn:aws:sts::${A}:assumed-role/ci/deploy`, session('ci', 'deploy'), true],
    ['session prefix', `arn:aws:sts::${A}:assumed-role/ci/*`, session('ci', 'run-17'), true],
    [
      'federated user',
      `arn:aws:sts::${A}:federated-user/bob`,
      iam(`arn:aws:sts::${A}:federated-user/bob`),
      true,
    ],
    [
      'federated user, another',
      `arn:aws:sts::${A}:federated-user/bob`,
      iam(`arn:aws:sts::${A}:federated-user/bobby`),
      false,
    ],
    // JWT values never match IAM callers and vice versa.
    ['JWT group → JWT caller', 'vision-group', { sub: 'u-1', groups: ['vision-group'] }, true],
    ['JWT group → IAM caller of that name', 'vision-group', iam('vision-group'), false],
    [
      'role → JWT sub spelled like its session',
      `arn:aws:iam::${A}:role/vision-mlops`,
      { sub: `arn:aws:sts::${A}:assumed-role/vision-mlops/x`, groups: [] },
      false,
    ],
    // local: names only come from the local host (API Gateway always presents an ARN).
    ['local name → the local host identity', 'local:vision', iam('local:vision'), true],
    ['local name → a JWT sub of that name', 'local:vision', { sub: 'local:vision', groups: [] }, false],
  ])('%s', (_name, principal, caller, expected) => {
    expect(callerMatchesPrincipal(caller, principal)).toBe(expected);
  });
});

describe('parsePrincipal: the rule a bad principal breaks', () => {
  it.each([
    [`arn:aws:iam::1:role/x`, /account .* must be 12 digits/],
    [`arn:aws:iam::${A}:group/admins`, /must name a user .* a role .* or the account root/],
    [`arn:aws:iam::${A}:role/teams/*`, /role's path is not in its sessions' ARNs/],
    [
      `arn:aws:sts::${A}:assumed-role/vision-mlops`,
      /name the role: arn:aws:iam::111122223333:role\/vision-mlops/,
    ],
    [`arn:aws:sts::${A}:user/x`, /role session .* or a federated user/],
    ['arn:aws:s3:::bucket', /arn:aws:iam::<12-digit account>/],
    [`arn:aws:iam::${A}:user/a*b`, /a \* may only end a principal/],
    ['sso:123:DataScience', /sso:<12-digit account>:<permission set name>/],
    [`sso:${A}:Data Science`, /whitespace/],
    ['local:', /local:NAME/],
    ['local:a/b', /local:NAME/],
  ])('%s', (principal, rule) => {
    const parsed = parsePrincipal(principal);
    expect('error' in parsed && parsed.error).toMatch(rule);
  });

  it('accepts each documented form', () => {
    for (const p of [
      `arn:aws:iam::${A}:user/alice`,
      `arn:aws:iam::${A}:role/teams/vision-mlops`,
      `arn:aws:iam::${A}:role/aws-reserved/sso.amazonaws.com/eu-west-1/AWSReservedSSO_DataScience_0123456789abcdef`,
      `sso:${A}:DataScience`,
      `arn:aws:sts::${A}:assumed-role/ci/*`,
      `arn:aws:sts::${A}:federated-user/bob`,
      `arn:aws:iam::${A}:root`,
      'local:vision',
      'vision-group',
      'alice@example.com',
    ]) {
      expect(parsePrincipal(p), p).toHaveProperty('kind');
    }
  });

  it('the configuration names the field and the rule', () => {
    const config = (principals: string[]) => ({
      clusters: [{ name: 'local', kubeconfig: '/dev/null' }],
      teams: [{ name: 'vision', principals, namespaces: ['vision'], imagePrefixes: ['r/'] }],
    });
    let issues: unknown;
    try {
      parseConfig(config(['vision-group', `arn:aws:iam::${A}:role/teams/*`]));
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      issues = err.issues;
    }
    expect(issues).toEqual([
      {
        field: 'teams.0.principals.1',
        rule: expect.stringMatching(/role's path is not in its sessions' ARNs/),
      },
    ]);
    expect(parseConfig(config([`sso:${A}:DataScience`])).teams[0]?.principals).toEqual([
      `sso:${A}:DataScience`,
    ]);
  });
});

describe('session ARNs', () => {
  it('reads a role session, and nothing else', () => {
    expect(roleSessionOf(`arn:aws:sts::${A}:assumed-role/vision-mlops/alice@example.com`)).toEqual({
      partition: 'aws',
      account: A,
      role: 'vision-mlops',
      session: 'alice@example.com',
    });
    expect(roleSessionOf(`arn:aws:iam::${A}:role/vision-mlops`)).toBeUndefined();
    expect(roleSessionOf(`arn:aws:sts::${A}:federated-user/bob`)).toBeUndefined();
  });

  it.each([
    ['AWSReservedSSO_DataScience_0123456789abcdef', 'DataScience', true],
    ['AWSReservedSSO_DataScience_', 'DataScience', false],
    ['AWSReservedSSO_DataScience_xyz', 'DataScience', false],
    ['AWSReservedSSO_DataScienceX_0123456789abcdef', 'DataScience', false],
  ])('%s is a role of set %s: %s', (role, set, expected) => {
    expect(isSsoRoleOf(role, set)).toBe(expected);
  });
});

describe('teams of each caller shape', () => {
  const config = parseConfig({
    clusters: [{ name: 'local', kubeconfig: '/dev/null' }],
    teams: [
      {
        name: 'vision',
        principals: [`arn:aws:iam::${A}:role/vision-mlops`],
        namespaces: ['v'],
        imagePrefixes: ['r/'],
      },
      {
        name: 'nlp',
        principals: [`arn:aws:iam::${A}:role/teams/nlp-mlops`],
        namespaces: ['n'],
        imagePrefixes: ['r/'],
      },
      { name: 'science', principals: [`sso:${A}:DataScience`], namespaces: ['s'], imagePrefixes: ['r/'] },
      {
        name: 'ops',
        principals: [`arn:aws:iam::${A}:user/alice`, `arn:aws:sts::${A}:federated-user/bob`],
        namespaces: ['o'],
        imagePrefixes: ['r/'],
      },
    ],
  });
  it.each<[string, Caller, string[]]>([
    ['IAM user', iam(`arn:aws:iam::${A}:user/alice`), ['ops']],
    ['role session', session('vision-mlops', 'botocore-session-1'), ['vision']],
    ['role-with-path session', session('nlp-mlops', 'ci'), ['nlp']],
    [
      'Identity Center session',
      session('AWSReservedSSO_DataScience_0123456789abcdef', 'carol@example.com'),
      ['science'],
    ],
    ['federated user', iam(`arn:aws:sts::${A}:federated-user/bob`), ['ops']],
    ['the role ARN of another account', session('vision-mlops', 'x', B), []],
  ])('%s', (_name, caller, teams) => {
    expect(teamsOf(caller, config).map((t) => t.name)).toEqual(teams);
  });
});
