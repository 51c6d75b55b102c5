import type { Caller } from './caller.ts';

/**
 * The forms a team's `principals` entry takes, and how each matches a caller as API Gateway
 * presents it. The IAM authorizer names a role's caller by its session,
 * `arn:aws:sts::A:assumed-role/ROLE/SESSION`, without the role's path; IAM Identity Center users
 * arrive as sessions of `AWSReservedSSO_<PermissionSet>_<hex>` roles. So:
 *
 * | form                                            | matches                                                         |
 * | ----------------------------------------------- | --------------------------------------------------------------- |
 * | `arn:aws:iam::A:user/[path/]NAME`               | that IAM user, exactly                                          |
 * | `arn:aws:iam::A:role/[path/]NAME`               | every session `arn:aws:sts::A:assumed-role/NAME/*` (path dropped) |
 * | `arn:aws:iam::A:role/[path/]PREFIX*`            | sessions of every role whose name starts with PREFIX            |
 * | `sso:A:PermissionSetName`                       | sessions of `AWSReservedSSO_PermissionSetName_<hex>` in account A |
 * | `arn:aws:sts::A:assumed-role/ROLE/SESSION[*]`   | that session (or session-name prefix)                           |
 * | `arn:aws:sts::A:federated-user/NAME`            | that federated user, exactly                                    |
 * | `arn:aws:iam::A:root`                           | the account's root user                                         |
 * | `local:NAME`                                    | only the embedded default's host (`x-gantry-principal: local:NAME`) |
 * | anything else                                   | a JWT principal-claim or group value (exact, or prefix with `*`) |
 *
 * A `local:` principal can never match on AWS: API Gateway's IAM authorizer always presents an ARN.
 */

export type Principal =
  /** An ARN compared as written: exact, or a prefix with a trailing `*`. */
  | { kind: 'arn'; text: string }
  /** An IAM role: its sessions (role name exact, or a prefix with a trailing `*`). */
  | { kind: 'role'; text: string; partition: string; account: string; name: string }
  /** The sessions of an IAM Identity Center permission set's role in an account. */
  | { kind: 'sso'; text: string; account: string; permissionSet: string }
  /** A name the local host (npm run dev) accepts; never an AWS caller. */
  | { kind: 'local'; text: string }
  /** A JWT principal or group claim value. */
  | { kind: 'claim'; text: string };

const ARN = /^arn:(aws|aws-cn|aws-us-gov):(iam|sts)::([^:]*):(.*)$/;
/** IAM names: users, roles and paths use `[\w+=,.@-]` (IAM quotas page, "IAM name requirements"). */
const IAM_NAME = /^(?:[\w+=,.@-]+\*?|\*)$/;
const SSO = /^sso:(\d{12}):([\w+=,.@-]{1,32})$/;
const LOCAL = /^local:[A-Za-z0-9._@-]{1,64}$/;

export const PRINCIPAL_FORMS =
  'arn:aws:iam::<account>:user/NAME, arn:aws:iam::<account>:role/[path/]NAME (matches its sessions), ' +
  'sso:<account>:<PermissionSetName>, arn:aws:sts::<account>:assumed-role/ROLE/SESSION, ' +
  'arn:aws:sts::<account>:federated-user/NAME, local:NAME (npm run dev only), or a JWT principal/group value';

/** A principal as configured, or the rule it breaks (a message naming the form expected). */
export function parsePrincipal(text: string): Principal | { error: string } {
  if (text.length === 0) return { error: 'must not be empty' };
  if (/\s/.test(text)) return { error: 'must not contain whitespace' };
  if (text.slice(0, -1).includes('*')) {
    return { error: 'a * may only end a principal (a prefix match)' };
  }
  if (text.startsWith('arn:')) return parseArn(text);
  if (text.startsWith('sso:')) {
    const m = SSO.exec(text);
    if (!m) {
      return {
        error:
          'must be sso:<12-digit account>:<permission set name> (the name as IAM Identity Center shows it, ≤ 32 of A-Z a-z 0-9 _+=,.@-)',
      };
    }
    return { kind: 'sso', text, account: m[1] as string, permissionSet: m[2] as string };
  }
  if (text.startsWith('local:')) {
    if (!LOCAL.test(text)) return { error: 'must be local:NAME (1–64 of A-Z a-z 0-9 . _ @ -)' };
    return { kind: 'local', text };
  }
  return { kind: 'claim', text };
}

function parseArn(text: string): Principal | { error: string } {
  const m = ARN.exec(text);
  if (!m) {
    return {
      error: `an ARN principal must be arn:aws:iam::<12-digit account>:… or arn:aws:sts::<12-digit account>:… (forms: ${PRINCIPAL_FORMS})`,
    };
  }
  const [, partition = '', service, account = '', resource = ''] = m;
  if (!/^\d{12}$/.test(account)) return { error: `the account in ${text} must be 12 digits` };
  if (service === 'iam') {
    if (resource === 'root') return { kind: 'arn', text };
    const parts = resource.split('/');
    const [type] = parts;
    const name = parts[parts.length - 1] as string;
    if (
      (type === 'user' || type === 'role') &&
      parts.length >= 2 &&
      parts.slice(1).every((p) => IAM_NAME.test(p))
    ) {
      if (type === 'user') return { kind: 'arn', text };
      if (name === '*') {
        return {
          error:
            "a role pattern needs part of the role's name before the *: a role's path is not in its sessions' ARNs, so role/PATH/* cannot be told apart from other roles",
        };
      }
      return { kind: 'role', text, partition, account, name };
    }
    return {
      error: `an IAM principal must name a user (…:user/[path/]NAME), a role (…:role/[path/]NAME) or the account root (…:root); API Gateway never presents ${type || 'it'} as a caller`,
    };
  }
  const parts = resource.split('/');
  if (parts[0] === 'assumed-role' && parts.length === 3 && parts.every((p) => IAM_NAME.test(p))) {
    return { kind: 'arn', text };
  }
  if (parts[0] === 'assumed-role' && parts.length === 2) {
    return {
      error: `to match every session of role ${parts[1]}, name the role: arn:${partition}:iam::${account}:role/${parts[1]}`,
    };
  }
  if (parts[0] === 'federated-user' && parts.length === 2 && IAM_NAME.test(parts[1] as string)) {
    return { kind: 'arn', text };
  }
  return {
    error:
      'an STS principal must be a role session (…:assumed-role/ROLE/SESSION) or a federated user (…:federated-user/NAME)',
  };
}

/** A principal pattern matches a value exactly, or as a prefix when it ends with `*`. */
export function principalMatches(pattern: string, value: string): boolean {
  if (pattern.endsWith('*')) return value.startsWith(pattern.slice(0, -1));
  return pattern === value;
}

/** A role session as STS names it: `arn:<partition>:sts::<account>:assumed-role/<role>/<session>`. */
export interface RoleSession {
  partition: string;
  account: string;
  role: string;
  session: string;
}

export function roleSessionOf(arn: string): RoleSession | undefined {
  const m = /^arn:(aws[\w-]*):sts::(\d{12}):assumed-role\/([^/]+)\/(.+)$/.exec(arn);
  if (!m) return undefined;
  return {
    partition: m[1] as string,
    account: m[2] as string,
    role: m[3] as string,
    session: m[4] as string,
  };
}

/** Is this role name the Identity Center role of the permission set (`AWSReservedSSO_<set>_<hex>`)? */
export function isSsoRoleOf(role: string, permissionSet: string): boolean {
  const prefix = `AWSReservedSSO_${permissionSet}_`;
  return role.startsWith(prefix) && /^[0-9a-f]+$/i.test(role.slice(prefix.length));
}

/** A configured principal string as a pattern; an invalid one (unvalidated input) is compared as written. */
function patternOf(text: string): Principal {
  const p = parsePrincipal(text);
  if ('kind' in p) return p;
  return text.startsWith('arn:') ? { kind: 'arn', text } : { kind: 'claim', text };
}

/**
 * Does the caller match this configured principal? IAM ARNs (and the local host's `local:` names)
 * are matched only against ARN, `sso:` and `local:` patterns, JWT values only against the others,
 * so a token whose `sub` looks like an ARN cannot pass for an IAM principal.
 */
export function callerMatchesPrincipal(caller: Caller, text: string): boolean {
  const p = patternOf(text);
  const arn = caller.iamArn;
  switch (p.kind) {
    case 'claim':
      return [caller.sub, ...caller.groups].some((v) => v !== undefined && principalMatches(p.text, v));
    case 'local':
      return arn === p.text;
    case 'arn':
      return arn?.startsWith('arn:') === true && principalMatches(p.text, arn);
    case 'role': {
      if (arn === undefined) return false;
      // The role's own ARN as written (only tests and the local host present one).
      if (principalMatches(p.text, arn)) return true;
      const s = roleSessionOf(arn);
      return (
        s !== undefined &&
        s.partition === p.partition &&
        s.account === p.account &&
        principalMatches(p.name, s.role)
      );
    }
    case 'sso': {
      const s = arn === undefined ? undefined : roleSessionOf(arn);
      return s !== undefined && s.account === p.account && isSsoRoleOf(s.role, p.permissionSet);
    }
  }
}
