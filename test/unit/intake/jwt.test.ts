import { describe, expect, it } from 'vitest';
import { JWT_DEFAULTS, parseConfig } from '../../../lib/config.ts';
import { ForbiddenError, ValidationError } from '../../../lib/errors.ts';
import { UnauthenticatedError } from '../../../lib/intake/errors.ts';
import {
  type Access,
  accessOf,
  type JwtSettings,
  jwtCaller,
  jwtSettings,
  scopeGrants,
  scopesOf,
} from '../../../lib/intake/jwt.ts';
import { authenticate, type Caller, requireTeams, teamsOf } from '../../../lib/intake/tenancy.ts';

const ISSUER = 'https://idp.example.com/realms/acme';
const JWT: JwtSettings = { ...JWT_DEFAULTS, issuer: ISSUER };
const CLUSTER = { name: 'c', kubeconfig: '/dev/null' };

function outcome(fn: () => Caller): Caller | string {
  try {
    return fn();
  } catch (err) {
    if (err instanceof UnauthenticatedError) return `401 ${err.message}`;
    if (err instanceof ForbiddenError) return `403 ${err.rule}`;
    throw err;
  }
}

describe('accessOf', () => {
  it.each<[string, Access]>([
    ['GET', 'read'],
    ['get', 'read'],
    ['POST', 'write'],
    ['DELETE', 'write'],
  ])('%s → %s', (method, access) => {
    expect(accessOf(method)).toBe(access);
  });
});

describe('scopesOf: `scope` (space-separated) and `scp` (a list)', () => {
  it.each<[string, Record<string, unknown>, string[]]>([
    ['scope string', { scope: 'openid gantry/read' }, ['openid', 'gantry/read']],
    ['scp array', { scp: ['gantry/write', 'x'] }, ['gantry/write', 'x']],
    ['scp flattened by API Gateway', { scp: '[gantry/read gantry/write]' }, ['gantry/read', 'gantry/write']],
    ['scp as one space-separated string', { scp: 'a b' }, ['a', 'b']],
    ['both, deduplicated', { scope: 'a b', scp: ['b', 'c'] }, ['a', 'b', 'c']],
    ['extra whitespace', { scope: '  a   b ' }, ['a', 'b']],
    ['none', {}, []],
    ['non-string values ignored', { scope: 42, scp: [1, 'ok'] }, ['ok']],
  ])('%s', (_name, claims, scopes) => {
    expect(scopesOf(claims)).toEqual(scopes);
  });
});

describe('scopeGrants: GET needs read, POST needs write; write implies read', () => {
  it.each<[string[], Access, boolean]>([
    [['gantry/read'], 'read', true],
    [['gantry/write'], 'read', true],
    [['gantry/read'], 'write', false],
    [['gantry/write'], 'write', true],
    [['gantry/read', 'gantry/write'], 'write', true],
    [[], 'read', false],
    [['gantry/admin', 'openid'], 'read', false],
    [['gantry/read/extra'], 'read', false],
  ])('%j for %s → %s', (scopes, access, granted) => {
    expect(scopeGrants(scopes, access, JWT)).toBe(granted);
  });
});

describe('jwtCaller', () => {
  const good = { iss: ISSUER, sub: 'u-1', scope: 'gantry/write', groups: '[vision-group]' };
  it.each<[string, Record<string, unknown>, JwtSettings, Access, Caller | string]>([
    ['a good token', good, JWT, 'write', { sub: 'u-1', groups: ['vision-group'] }],
    [
      'another issuer',
      { ...good, iss: 'https://evil.example.com/' },
      JWT,
      'read',
      `401 the token's issuer https://evil.example.com/ is not the configured issuer ${ISSUER}`,
    ],
    [
      'an issuer that only starts like the pinned one',
      { ...good, iss: `${ISSUER}-evil` },
      JWT,
      'read',
      `401 the token's issuer ${ISSUER}-evil is not the configured issuer ${ISSUER}`,
    ],
    [
      'no iss',
      { sub: 'u-1', scope: 'gantry/write' },
      JWT,
      'read',
      `401 the token has no iss claim; tokens must come from ${ISSUER}`,
    ],
    [
      'no issuer pinned at all',
      good,
      { ...JWT_DEFAULTS },
      'read',
      '401 JWT callers are not accepted: no issuer is configured (auth.jwt.issuer, or the jwtIssuerUrl param)',
    ],
    [
      'a read token on a POST route',
      { ...good, scope: 'gantry/read' },
      JWT,
      'write',
      '403 write access needs the scope gantry/write; the token has gantry/read',
    ],
    [
      'no scopes on a GET route',
      { ...good, scope: undefined },
      JWT,
      'read',
      '403 read access needs the scope gantry/read or gantry/write; the token has no scopes',
    ],
    [
      'scp list granting write',
      { ...good, scope: undefined, scp: ['gantry/write'] },
      JWT,
      'write',
      { sub: 'u-1', groups: ['vision-group'] },
    ],
    [
      'groups from the default claims only',
      { ...good, groups: ['a'], 'cognito:groups': '[b a]', roles: ['vision-group'] },
      JWT,
      'read',
      { sub: 'u-1', groups: ['a', 'b'] },
    ],
    [
      'configured claims: principal from email, groups from roles only',
      { ...good, email: 'ann@acme.io', roles: ['r1'], groups: ['vision-group'] },
      { ...JWT, principalClaim: 'email', groupsClaims: ['roles'] },
      'read',
      { sub: 'ann@acme.io', groups: ['r1'] },
    ],
    [
      'configured scope names',
      { ...good, scope: 'api://gantry/Runs.Write' },
      { ...JWT, readScope: 'api://gantry/Runs.Read', writeScope: 'api://gantry/Runs.Write' },
      'write',
      { sub: 'u-1', groups: ['vision-group'] },
    ],
    [
      'neither the principal claim nor a group claim',
      { iss: ISSUER, scope: 'gantry/read', email: 'a@b.c', roles: ['x'] },
      JWT,
      'read',
      '403 the token has no sub claim nor a group claim (groups, cognito:groups) to match a team by',
    ],
    [
      'a non-string principal is no principal',
      { ...good, sub: 7 },
      JWT,
      'read',
      { groups: ['vision-group'] },
    ],
  ])('%s', (_name, claims, jwt, access, expected) => {
    expect(outcome(() => jwtCaller(claims, jwt, access))).toEqual(expected);
  });
});

describe('authenticate', () => {
  it.each<[string, unknown, Access, Caller | string]>([
    [
      'an IAM caller is not checked for scopes',
      { iam: { userArn: 'arn:aws:iam::1:user/u' } },
      'write',
      { iamArn: 'arn:aws:iam::1:user/u', groups: [] },
    ],
    ['an anonymous request', undefined, 'read', { groups: [] }],
    [
      'a JWT caller is checked',
      { jwt: { claims: { iss: 'https://x/', sub: 'u' } } },
      'read',
      `401 the token's issuer https://x/ is not the configured issuer ${ISSUER}`,
    ],
    [
      'a JWT caller that passes',
      { jwt: { claims: { iss: ISSUER, sub: 'u', scope: 'gantry/read' } } },
      'read',
      { sub: 'u', groups: [] },
    ],
  ])('%s', (_name, authorizer, access, expected) => {
    expect(outcome(() => authenticate(authorizer, JWT, access))).toEqual(expected);
  });

  it('names a caller known only by its groups in a refusal', () => {
    const config = parseConfig({
      clusters: [CLUSTER],
      teams: [{ name: 'vision', principals: ['vision-group'], namespaces: ['v'], imagePrefixes: ['r/'] }],
    });
    const caller = authenticate(
      { jwt: { claims: { iss: ISSUER, scope: 'gantry/read', groups: ['a', 'b'] } } },
      JWT,
      'read',
    );
    expect(() => requireTeams(caller, config)).toThrow('a JWT caller in groups a, b belongs to no team');
  });

  it('a group in a claim that is not configured does not make the caller a team member', () => {
    const config = parseConfig({
      clusters: [CLUSTER],
      teams: [{ name: 'vision', principals: ['vision-group'], namespaces: ['v'], imagePrefixes: ['r/'] }],
    });
    const claims = { iss: ISSUER, sub: 'u-9', scope: 'gantry/read', roles: ['vision-group'] };
    const caller = authenticate({ jwt: { claims } }, JWT, 'read');
    expect(teamsOf(caller, config)).toEqual([]);
    const configured = authenticate({ jwt: { claims } }, { ...JWT, groupsClaims: ['roles'] }, 'read');
    expect(teamsOf(configured, config).map((t) => t.name)).toEqual(['vision']);
  });
});

describe('jwtSettings: the pinned issuer', () => {
  const withIssuer = (issuer?: string) =>
    parseConfig({ clusters: [CLUSTER], auth: { jwt: issuer ? { issuer } : {} } });
  it.each<[string, string | undefined, string | undefined, string | undefined]>([
    ['from the stack', undefined, ISSUER, ISSUER],
    ['from the configuration', ISSUER, undefined, ISSUER],
    ['both, equal', ISSUER, ISSUER, ISSUER],
    ['an empty stack value is none (IAM stacks)', undefined, '', undefined],
    ['neither', undefined, undefined, undefined],
  ])('%s', (_name, configured, stack, expected) => {
    expect(jwtSettings(withIssuer(configured), stack).issuer).toBe(expected);
  });

  it('refuses two different issuers', () => {
    expect(() => jwtSettings(withIssuer(ISSUER), 'https://other.example.com/')).toThrow(
      `auth.jwt.issuer (${ISSUER}) differs from the stack's JWT issuer GANTRY_JWT_ISSUER (https://other.example.com/)`,
    );
  });
});

describe('auth.jwt configuration', () => {
  const issues = (jwt: unknown) => {
    try {
      parseConfig({ clusters: [CLUSTER], auth: { jwt } });
    } catch (err) {
      if (err instanceof ValidationError) return err.issues.map((i) => `${i.field}: ${i.rule}`);
      throw err;
    }
    return [];
  };

  it('defaults: sub, groups + cognito:groups, gantry/read, gantry/write, no issuer', () => {
    expect(parseConfig({ clusters: [CLUSTER] }).auth.jwt).toEqual({
      principalClaim: 'sub',
      groupsClaims: ['groups', 'cognito:groups'],
      readScope: 'gantry/read',
      writeScope: 'gantry/write',
    });
  });

  it.each<[string, unknown, RegExp]>([
    [
      'a scope with a space',
      { readScope: 'gantry read' },
      /^auth\.jwt\.readScope: must be a non-empty scope name without spaces$/,
    ],
    [
      'the same read and write scope',
      { readScope: 'a', writeScope: 'a' },
      /^auth\.jwt\.writeScope: must differ from readScope$/,
    ],
    ['an issuer that is not a URL', { issuer: 'acme' }, /^auth\.jwt\.issuer: /],
    ['an empty principal claim', { principalClaim: '' }, /^auth\.jwt\.principalClaim: /],
    [
      'the principal claim among the group claims',
      { groupsClaims: ['sub'] },
      /^auth\.jwt\.groupsClaims: must not include the principalClaim \(sub\)$/,
    ],
    ['an unknown field', { scopes: ['x'] }, /^auth\.jwt/],
  ])('names the field: %s', (_name, jwt, expected) => {
    const found = issues(jwt);
    expect(found.length, JSON.stringify(found)).toBeGreaterThan(0);
    expect(found[0]).toMatch(expected);
  });
});
