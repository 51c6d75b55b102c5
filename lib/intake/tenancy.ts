import { type GantryConfig, JWT_DEFAULTS, type JwtConfig, type TeamConfig } from '../config.ts';
import { ForbiddenError } from '../errors.ts';
import { parseQuantity } from '../run/limits.ts';
import type { RunRequest } from '../run/schema.ts';
import type { Caller } from './caller.ts';
import { type Access, identityOf, type JwtSettings, jwtCaller, jwtClaimsOf } from './jwt.ts';
import { callerMatchesPrincipal } from './principals.ts';

export type { Caller } from './caller.ts';
export { principalMatches } from './principals.ts';

/**
 * Who is calling and what their team may do. The caller comes from the API Gateway authorizer
 * (never from the request body); a team's `principals` name IAM users, roles (matching their
 * sessions), Identity Center permission sets, federated users, `local:` names of the embedded
 * default, or JWT principal / group claim values (lib/intake/principals.ts).
 */

/**
 * The caller from an HTTP API v2 `requestContext.authorizer` (IAM or JWT); anything else is
 * anonymous. JWT claims are read as named by `claims` but not checked (issuer, scopes): requests
 * are authorized with `authenticate` (lib/intake/jwt.ts); this is what the request logs show.
 */
export function callerFromAuthorizer(
  authorizer: unknown,
  claims: Pick<JwtConfig, 'principalClaim' | 'groupsClaims'> = JWT_DEFAULTS,
): Caller {
  const a = (authorizer ?? {}) as { iam?: { userArn?: unknown } };
  const jwt = jwtClaimsOf(authorizer);
  const caller: Caller = jwt ? identityOf(jwt, claims) : { groups: [] };
  if (typeof a.iam?.userArn === 'string' && a.iam.userArn.length > 0) caller.iamArn = a.iam.userArn;
  return caller;
}

/**
 * The caller of a request to a route with this access. IAM callers are as API Gateway's IAM
 * authorizer described them (their policy authorized the route); a JWT caller must pass
 * `jwtCaller`'s checks (pinned issuer, the route's scope, the configured claims) — the same on the
 * embedded default, an IAM stack and a JWT stack.
 */
export function authenticate(authorizer: unknown, jwt: JwtSettings, access: Access): Caller {
  const claims = jwtClaimsOf(authorizer);
  if (claims) return jwtCaller(claims, jwt, access);
  return callerFromAuthorizer(authorizer, jwt);
}

/** Does the caller match one of these configured principals? */
function callerMatches(caller: Caller, principals: readonly string[]): boolean {
  return principals.some((p) => callerMatchesPrincipal(caller, p));
}

/** How the caller is named in messages. */
export function describeCaller(caller: Caller): string {
  if (caller.iamArn) return caller.iamArn;
  if (caller.sub) return `JWT principal ${caller.sub}`;
  if (caller.groups.length > 0) return `a JWT caller in groups ${caller.groups.join(', ')}`;
  return 'an anonymous caller';
}

/** Every configured team the caller belongs to. */
export function teamsOf(caller: Caller, config: GantryConfig): TeamConfig[] {
  return config.teams.filter((t) => callerMatches(caller, t.principals));
}

/** The caller's teams; ForbiddenError when there is no identity or no team. */
export function requireTeams(caller: Caller, config: GantryConfig): TeamConfig[] {
  if (!caller.iamArn && !caller.sub && caller.groups.length === 0) {
    throw new ForbiddenError('the request carries no caller identity (IAM or JWT authorizer)');
  }
  const teams = teamsOf(caller, config);
  if (teams.length === 0) {
    throw new ForbiddenError(
      `${describeCaller(caller)} belongs to no team: no team's principals match it (a role's sessions match the role's ARN; Identity Center users match sso:<account>:<PermissionSetName>)`,
    );
  }
  return teams;
}

/** The team a request names, which must be one of the caller's teams. */
export function requireTeam(caller: Caller, config: GantryConfig, team: string): TeamConfig {
  const teams = requireTeams(caller, config);
  const match = teams.find((t) => t.name === team);
  if (!match) {
    throw new ForbiddenError(
      `team ${team} is not the caller's team (${describeCaller(caller)} belongs to ${teams.map((t) => t.name).join(', ')})`,
    );
  }
  return match;
}

/** Where a request runs, once its team's rules allow it. */
export interface Placement {
  team: TeamConfig;
  cluster: string;
  namespace: string;
  /** The Kueue LocalQueue: the request's, or the team's first when the team has queues. */
  queue?: string;
}

/**
 * An image is allowed when it starts with an allowed prefix at a path boundary: a prefix that does
 * not end in `/`, `:` or `@` must be followed by one of them (or end the image), so
 * `ghcr.io/acme` allows `ghcr.io/acme/train:1` but not `ghcr.io/acme-evil/train:1`.
 */
export function imageAllowed(image: string, prefixes: readonly string[]): boolean {
  return prefixes.some((p) => {
    if (!image.startsWith(p)) return false;
    if (/[/:@]$/.test(p) || image.length === p.length) return true;
    return '/:@'.includes(image[p.length] as string);
  });
}

function quantityOf(q: string | number | undefined): number {
  if (q === undefined) return 0;
  return typeof q === 'number' ? q : parseQuantity(q);
}

/** Total resources a request asks for across its nodes (CPU cores, memory bytes, GPUs). */
export function requestedTotals(request: RunRequest): { cpu: number; memory: number; gpu: number } {
  const r = request.resourcesPerNode ?? {};
  return {
    cpu: quantityOf(r.cpu) * request.numNodes,
    memory: quantityOf(r.memory) * request.numNodes,
    gpu: (r.gpu ?? 0) * request.numNodes,
  };
}

const list = (items: readonly string[]) => (items.length ? items.join(', ') : 'none');

/**
 * Where a run may write: its own prefix in Gantry's bucket (records, other runs' output and
 * published models live elsewhere in that bucket), then the team's `outputPrefixes`.
 */
export function outputLocations(team: TeamConfig, where: { bucket: string; runId: string }): string[] {
  return [`s3://${where.bucket}/runs/${where.runId}/`, ...team.outputPrefixes];
}

/**
 * The team's rules for a request: namespace, queue, runtime, image, size, priority class, output
 * location. Every broken rule is named (joined) in one ForbiddenError.
 */
export function checkTenancy(
  request: RunRequest,
  team: TeamConfig,
  config: GantryConfig,
  where: { bucket: string; runId: string },
): Placement {
  const broken: string[] = [];
  const namespace = request.namespace ?? (team.namespaces[0] as string);
  if (!team.namespaces.includes(namespace)) {
    broken.push(
      `namespace ${namespace} is not allowed for team ${team.name} (allowed: ${list(team.namespaces)})`,
    );
  }
  const queue = request.queue ?? team.queues[0];
  if (request.queue !== undefined && !team.queues.includes(request.queue)) {
    broken.push(
      `queue ${request.queue} is not allowed for team ${team.name} (allowed: ${list(team.queues)})`,
    );
  }
  for (const q of request.fallbackQueues ?? []) {
    if (!team.queues.includes(q)) {
      broken.push(
        `fallbackQueues: queue ${q} is not allowed for team ${team.name} (allowed: ${list(team.queues)})`,
      );
    }
  }
  if (team.runtimes.length > 0 && !team.runtimes.includes(request.runtime.name)) {
    broken.push(
      `runtime ${request.runtime.name} is not allowed for team ${team.name} (allowed: ${list(team.runtimes)})`,
    );
  }
  if (!imageAllowed(request.image, team.imagePrefixes)) {
    broken.push(
      `image ${request.image} is not allowed for team ${team.name} (allowed prefixes: ${list(team.imagePrefixes)})`,
    );
  }
  if (request.numNodes > team.maxNodes) {
    broken.push(`numNodes ${request.numNodes} exceeds team ${team.name}'s maxNodes ${team.maxNodes}`);
  }
  const gpus = requestedTotals(request).gpu;
  if (gpus > team.maxGpusPerRun) {
    broken.push(
      `${gpus} GPUs (numNodes × resourcesPerNode.gpu) exceed team ${team.name}'s maxGpusPerRun ${team.maxGpusPerRun}`,
    );
  }
  const pc = request.priorityClass;
  if (pc?.startsWith('system-')) {
    broken.push(`priorityClass ${pc} is reserved for the cluster (system-*)`);
  } else if (pc !== undefined && !team.priorityClasses.includes(pc)) {
    broken.push(
      `priorityClass ${pc} is not allowed for team ${team.name} (allowed: ${list(team.priorityClasses)})`,
    );
  }
  const output = request.output?.uri;
  if (output !== undefined) {
    const allowed = outputLocations(team, where);
    if (!allowed.some((prefix) => output.startsWith(prefix))) {
      broken.push(`output.uri ${output} is outside team ${team.name}'s output locations (${list(allowed)})`);
    }
  }
  if (broken.length > 0) throw new ForbiddenError(broken.join('; '));
  const cluster = team.cluster ?? config.defaultCluster ?? (config.clusters[0]?.name as string);
  return { team, cluster, namespace, ...(queue !== undefined ? { queue } : {}) };
}
