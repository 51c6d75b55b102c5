import { aliasMovedEvent } from '../artifacts/events.ts';
import { latestKey, manifestKey, versionsKey } from '../artifacts/layout.ts';
import type { ModelManifest } from '../artifacts/manifest.ts';
import type { ModelOwners } from '../artifacts/ownership.ts';
import type { ServingEvents } from '../artifacts/ports.ts';
import type { LatestPointer, VersionCounter } from '../artifacts/versioning.ts';
import type { GantryConfig } from '../config.ts';
import { NotFoundError } from '../errors.ts';
import { lazily } from '../lazily.ts';
import type { CallOptions, ObjectStore } from '../ports.ts';
import type { Aliases, AliasPointer, PendingPromotion } from '../registry/aliases.ts';
import { evaluationKey } from '../registry/evaluation.ts';
import { ALIAS_NAME, ALIAS_RULE, teamIndexPrefix } from '../registry/layout.ts';
import { RFC1035_LABEL } from '../run/limits.ts';
import { parseWith } from '../run/validate.ts';
import { type ServingState, servingPrefix } from '../serving/kserve.ts';
import * as z from '../zod.ts';
import { type Caller, describeCaller, requireTeams } from './tenancy.ts';

/**
 * The model registry's API (docs/model-registry.md): the caller's teams' models, their versions
 * with metrics and lineage, and their aliases — moved conditionally, with who and why kept. A
 * model of another team answers exactly as an unknown one (404): names must not reveal activity.
 */

export interface RegistryDeps {
  config: GantryConfig;
  store: ObjectStore;
  owners: ModelOwners;
  aliases: Aliases;
  serving?: ServingEvents;
}

/** How many versions `GET /v1/models/{name}` returns at most (newest first). */
export const MAX_VERSIONS = 100;
export const DEFAULT_VERSIONS = 20;
const HISTORY = 20;

const modelName = z
  .string()
  .check(z.regex(RFC1035_LABEL, 'must be a model name (an RFC 1035 label)'), z.maxLength(63));
const aliasName = z.string().check(z.regex(ALIAS_NAME, ALIAS_RULE));
const version = z.number().check(z.int('must be an integer'), z.gte(1, 'must be 1 or more'));

const pathSchema = /* @__PURE__ */ lazily(() => z.strictObject({ name: modelName }));
const versionPathSchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    name: modelName,
    version: z.string().check(z.regex(/^[1-9][0-9]{0,8}$/, 'must be a version number (1, 2, 3, …)')),
  }),
);
const aliasPathSchema = /* @__PURE__ */ lazily(() => z.strictObject({ name: modelName, alias: aliasName }));
const versionsQuerySchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    limit: z.optional(
      z.string().check(
        z.regex(/^[0-9]{1,3}$/, 'must be a number'),
        z.refine((v) => Number(v) >= 1 && Number(v) <= MAX_VERSIONS, `must be 1 to ${MAX_VERSIONS}`),
      ),
    ),
  }),
);
export const moveAliasSchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    version: z.described(version, 'The published version the alias should point at'),
    expectedVersion: z.described(
      z.optional(z.nullable(version)),
      'Move only if the alias points at this version now (null: only if it points nowhere); otherwise 409',
    ),
    reason: z.described(
      z.optional(z.string().check(z.minLength(1), z.maxLength(500))),
      'Why (kept in the alias history)',
    ),
  }),
);

/** A version as the registry lists it: the manifest without its file list. */
export function versionSummary(m: ModelManifest, aliases: readonly AliasPointer[], evaluation?: unknown) {
  return {
    version: m.version,
    runId: m.runId,
    publishedAt: m.timestamps.publishedAt,
    storageUri: m.storageUri,
    metrics: m.metrics,
    lineage: m.lineage,
    totals: m.totals,
    aliases: aliases.filter((a) => a.version === m.version).map((a) => a.alias),
    // Retention deleted the version's files; the manifest stays as its lineage.
    ...(m.retired ? { retired: m.retired } : {}),
    ...(evaluation ? { evaluation } : {}),
  };
}

export function makeRegistry(deps: RegistryDeps) {
  const { store, owners, aliases, config } = deps;

  /** The model, if one of the caller's teams owns it; else 404 (as an unknown name). */
  async function ownModel(caller: Caller, name: string, opts?: CallOptions) {
    const teams = requireTeams(caller, config);
    const owner = await owners.ownerOf(name, opts);
    if (!owner || !teams.some((t) => t.name === owner.team))
      throw new NotFoundError(`model ${name} does not exist`);
    return owner;
  }

  async function listModels(input: { caller: Caller }, opts?: CallOptions) {
    const teams = requireTeams(input.caller, config);
    const models = [];
    for (const team of teams) {
      const keys = (await store.list(teamIndexPrefix(team.name), opts)).map((o) => o.key);
      for (const key of keys.sort()) {
        const name = key.slice(teamIndexPrefix(team.name).length, -'.json'.length);
        const [latest, pointers] = await Promise.all([
          store.getJson<LatestPointer>(latestKey(name), opts),
          aliases.list(name, opts),
        ]);
        models.push({
          name,
          team: team.name,
          ...(latest ? { latestVersion: latest.value.version, updatedAt: latest.value.updatedAt } : {}),
          aliases: Object.fromEntries(pointers.map((p) => [p.alias, p.version])),
        });
      }
    }
    return { models };
  }

  async function getModel(input: { caller: Caller; name: unknown; limit?: unknown }, opts?: CallOptions) {
    const { name } = parseWith(pathSchema(), { name: input.name });
    const { limit } = parseWith(
      versionsQuerySchema(),
      input.limit === undefined ? {} : { limit: input.limit },
    );
    const owner = await ownModel(input.caller, name, opts);
    const counter = await store.getJson<VersionCounter>(versionsKey(name), opts);
    const last =
      counter?.value.last ?? (await store.getJson<LatestPointer>(latestKey(name), opts))?.value.version ?? 0;
    const wanted = Array.from(
      { length: Math.min(Number(limit ?? DEFAULT_VERSIONS), last) },
      (_, i) => last - i,
    );
    const pointers = await aliases.list(name, opts);
    const [manifests, evaluations] = await Promise.all([
      Promise.all(wanted.map((v) => store.getJson<ModelManifest>(manifestKey(name, v), opts))),
      // The evaluation step's outcome, for the versions a policy evaluated (lib/registry/evaluation.ts).
      Promise.all(wanted.map((v) => store.getJson<unknown>(evaluationKey(name, v), opts))),
    ]);
    const aliasViews = await Promise.all(
      pointers.map(async (p) => {
        const [history, pending, serving] = await Promise.all([
          aliases.history(name, p.alias, HISTORY, opts),
          aliases.pending(name, p.alias, opts),
          servingOf(name, p.alias, opts),
        ]);
        return {
          ...p,
          history,
          ...(pending ? { pending } : {}),
          ...(serving.length > 0 ? { serving } : {}),
        };
      }),
    );
    const pendingOnly = await pendingWithoutPointer(name, owner.team, pointers, opts);
    return {
      name,
      team: owner.team,
      ...(last ? { latestVersion: last } : {}),
      aliases: [...aliasViews, ...pendingOnly],
      versions: manifests.flatMap((m, i) =>
        m ? [versionSummary(m.value, pointers, evaluations[i]?.value)] : [],
      ),
    };
  }

  /** The alias's InferenceServices as the hand-off last saw them (lib/serving/handoff.ts). */
  async function servingOf(name: string, alias: string, opts?: CallOptions): Promise<ServingState[]> {
    const keys = (await store.list(servingPrefix(name, alias), opts)).map((o) => o.key).sort();
    const states = await Promise.all(keys.map((k) => store.getJson<ServingState>(k, opts)));
    return states.flatMap((s) => (s ? [s.value] : []));
  }

  /** `manual` aliases that never pointed anywhere yet but have a candidate waiting. */
  async function pendingWithoutPointer(
    name: string,
    team: string,
    pointers: readonly AliasPointer[],
    opts?: CallOptions,
  ) {
    const policies = config.teams.find((t) => t.name === team)?.promotion ?? [];
    const names = [
      ...new Set(policies.filter((p) => p.model === name || p.model === '*').map((p) => p.alias)),
    ];
    const out: Array<{ alias: string; pending: PendingPromotion; history: never[] }> = [];
    for (const alias of names.filter((a) => !pointers.some((p) => p.alias === a))) {
      const pending = await aliases.pending(name, alias, opts);
      if (pending) out.push({ alias, pending, history: [] });
    }
    return out;
  }

  async function getVersion(input: { caller: Caller; name: unknown; version: unknown }, opts?: CallOptions) {
    const path = parseWith(versionPathSchema(), { name: input.name, version: input.version });
    await ownModel(input.caller, path.name, opts);
    const manifest = await store.getJson<ModelManifest>(manifestKey(path.name, Number(path.version)), opts);
    if (!manifest) throw new NotFoundError(`model ${path.name} has no version ${path.version}`);
    const [pointers, evaluation] = await Promise.all([
      aliases.list(path.name, opts),
      store.getJson<unknown>(evaluationKey(path.name, manifest.value.version), opts),
    ]);
    return {
      ...manifest.value,
      aliases: pointers.filter((p) => p.version === manifest.value.version).map((p) => p.alias),
      ...(evaluation ? { evaluation: evaluation.value } : {}),
    };
  }

  /** Point an alias at a version (promote, approve, roll back); 409 when `expectedVersion` is stale. */
  async function moveAlias(
    input: { caller: Caller; name: unknown; alias: unknown; body: unknown },
    opts?: CallOptions,
  ): Promise<{ alias: AliasPointer }> {
    const path = parseWith(aliasPathSchema(), { name: input.name, alias: input.alias });
    const body = parseWith(moveAliasSchema(), input.body);
    const owner = await ownModel(input.caller, path.name, opts);
    const moved = await aliases.move(
      {
        model: path.name,
        alias: path.alias,
        version: body.version,
        ...(body.expectedVersion !== undefined ? { expectedVersion: body.expectedVersion } : {}),
        movedBy: describeCaller(input.caller),
        reason: body.reason ?? 'moved through the API',
      },
      opts,
    );
    if (deps.serving) await deps.serving.publish(aliasMovedEvent(moved, owner.team), opts);
    return { alias: moved };
  }

  return { listModels, getModel, getVersion, moveAlias };
}

export type Registry = ReturnType<typeof makeRegistry>;
