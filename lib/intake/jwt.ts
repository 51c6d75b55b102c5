import type { GantryConfig, JwtConfig } from '../config.ts';
import { ForbiddenError } from '../errors.ts';
import type { Caller } from './caller.ts';
import { UnauthenticatedError } from './errors.ts';

/**
 * JWT callers, checked in the handler whatever API Gateway already checked, so the embedded
 * default, an IAM stack and a JWT stack treat a token alike: the token's issuer must be the pinned
 * one, its scopes must grant the route's access (GET routes read, POST routes write; the write
 * scope grants read too), and the principal and groups come only from the configured claims.
 */

/** What a route does: GET routes read, every other method writes. */
export type Access = 'read' | 'write';

export function accessOf(method: string): Access {
  return method.toUpperCase() === 'GET' ? 'read' : 'write';
}

/** The JWT settings in force: the configuration's, with the issuer the stack pins. */
export interface JwtSettings extends JwtConfig {
  issuer?: string;
}

/**
 * The configuration's `auth.jwt`, with the issuer the deployment names (GANTRY_JWT_ISSUER, from
 * the stack's `jwtIssuerUrl`). An empty value means none. Two different issuers are a
 * misconfiguration (a plain Error: the API answers 500, not the caller's fault).
 */
export function jwtSettings(config: Pick<GantryConfig, 'auth'>, stackIssuer?: string): JwtSettings {
  const jwt = config.auth.jwt;
  const pinned = stackIssuer ? stackIssuer : undefined;
  if (pinned && jwt.issuer && pinned !== jwt.issuer) {
    throw new Error(
      `auth.jwt.issuer (${jwt.issuer}) differs from the stack's JWT issuer GANTRY_JWT_ISSUER (${pinned})`,
    );
  }
  const issuer = pinned ?? jwt.issuer;
  const { issuer: _configured, ...rest } = jwt;
  return { ...rest, ...(issuer !== undefined ? { issuer } : {}) };
}

/**
 * A list claim. HTTP API JWT authorizers flatten array claims into one string, `[a b c]`;
 * a real array (e.g. from a test event) or a single value are accepted as well.
 */
export function claimList(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string' && v.length > 0);
  if (typeof value !== 'string' || value.length === 0) return [];
  const bracketed = /^\[(.*)\]$/s.exec(value.trim());
  if (!bracketed) return [value];
  return (bracketed[1] ?? '').split(/[\s,]+/).filter(Boolean);
}

/**
 * The token's scopes: `scope` (OAuth 2.0, space-separated; Cognito, Auth0, Keycloak) and `scp`
 * (a list; Okta, Entra ID — API Gateway flattens it to `[a b]`, some issuers send a
 * space-separated string).
 */
export function scopesOf(claims: Record<string, unknown>): string[] {
  const out = new Set<string>();
  for (const value of [claims.scope, claims.scp]) {
    for (const item of claimList(value)) for (const s of item.split(/\s+/)) if (s) out.add(s);
  }
  return [...out];
}

/** Does a token with these scopes get this access? The write scope grants read as well. */
export function scopeGrants(scopes: readonly string[], access: Access, jwt: JwtConfig): boolean {
  if (scopes.includes(jwt.writeScope)) return true;
  return access === 'read' && scopes.includes(jwt.readScope);
}

/** The claims of a JWT authorizer context, or undefined when the caller did not come with a JWT. */
export function jwtClaimsOf(authorizer: unknown): Record<string, unknown> | undefined {
  const claims = (authorizer as { jwt?: { claims?: unknown } } | null | undefined)?.jwt?.claims;
  return claims && typeof claims === 'object' && !Array.isArray(claims)
    ? (claims as Record<string, unknown>)
    : undefined;
}

/** Who the claims name, from the configured claims only: the principal claim and the group claims. */
export function identityOf(
  claims: Record<string, unknown>,
  names: Pick<JwtConfig, 'principalClaim' | 'groupsClaims'>,
): Caller {
  const caller: Caller = { groups: [] };
  // Own claims only: a claim name such as `constructor` must not read Object.prototype.
  const claim = (name: string) => (Object.hasOwn(claims, name) ? claims[name] : undefined);
  const principal = claim(names.principalClaim);
  if (typeof principal === 'string' && principal.length > 0) caller.sub = principal;
  caller.groups = [...new Set(names.groupsClaims.flatMap((name) => claimList(claim(name))))];
  return caller;
}

/**
 * The caller of a JWT-authorized request, or why it is refused: UnauthenticatedError (401) when
 * no issuer is pinned or the token's `iss` is another one; ForbiddenError (403) when its scopes do
 * not grant the route's access. The principal is the `principalClaim` value; groups come from the
 * `groupsClaims` and nowhere else.
 */
export function jwtCaller(claims: Record<string, unknown>, jwt: JwtSettings, access: Access): Caller {
  if (!jwt.issuer) {
    throw new UnauthenticatedError(
      'JWT callers are not accepted: no issuer is configured (auth.jwt.issuer, or the jwtIssuerUrl param)',
    );
  }
  const iss = claims.iss;
  if (iss !== jwt.issuer) {
    throw new UnauthenticatedError(
      typeof iss === 'string' && iss.length > 0
        ? `the token's issuer ${iss.slice(0, 200)} is not the configured issuer ${jwt.issuer}`
        : `the token has no iss claim; tokens must come from ${jwt.issuer}`,
    );
  }
  const scopes = scopesOf(claims);
  if (!scopeGrants(scopes, access, jwt)) {
    const needed = access === 'read' ? `${jwt.readScope} or ${jwt.writeScope}` : jwt.writeScope;
    throw new ForbiddenError(
      `${access} access needs the scope ${needed}; the token has ${scopes.length ? scopes.join(' ') : 'no scopes'}`,
    );
  }
  const caller = identityOf(claims, jwt);
  if (caller.sub === undefined && caller.groups.length === 0) {
    const groups = jwt.groupsClaims.length ? ` nor a group claim (${jwt.groupsClaims.join(', ')})` : '';
    throw new ForbiddenError(`the token has no ${jwt.principalClaim} claim${groups} to match a team by`);
  }
  return caller;
}
