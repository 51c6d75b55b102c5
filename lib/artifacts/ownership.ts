import { ConcurrentUpdateError } from '../errors.ts';
import type { CallOptions, Clock, ObjectStore } from '../ports.ts';
import { latestKey, manifestKey, ownerKey } from './layout.ts';
import type { ModelManifest } from './manifest.ts';
import type { LatestPointer } from './versioning.ts';

/**
 * Who owns a model name. The first team to publish it does: `models/<model>/owner.json` is
 * created once (If-None-Match) by the first PublishArtifacts, and from then on only that team's
 * runs may publish under the name (another team's submit is a 403, its publish a
 * ModelOwnedError). A model published before owner files existed belongs to the team in its
 * latest manifest's lineage; the first publish after that records it.
 */
export interface ModelOwner {
  model: string;
  team: string;
  /** The run whose publish recorded the owner (for a migrated model, the latest version's run). */
  runId: string;
  claimedAt: string;
}

/** The owner of a model, and the rule an owner sets (pure). */
export function ownedByAnother(owner: ModelOwner | undefined, team: string): owner is ModelOwner {
  return owner !== undefined && owner.team !== team;
}

export function ownershipRule(owner: ModelOwner): string {
  return `model ${owner.model} belongs to team ${owner.team}; choose another modelName`;
}

export interface ModelOwners {
  /** The model's owner: its owner file, else the team of its latest manifest, else none. */
  ownerOf(model: string, opts?: CallOptions): Promise<ModelOwner | undefined>;
  /** The owner, recording this team (and run) as the owner when the model has none yet. */
  claim(model: string, team: string, runId: string, opts?: CallOptions): Promise<ModelOwner>;
}

export function makeModelOwners(deps: { store: ObjectStore; clock: Clock }): ModelOwners {
  const { store, clock } = deps;

  async function legacyOwner(model: string, opts?: CallOptions): Promise<ModelOwner | undefined> {
    const latest = await store.getJson<LatestPointer>(latestKey(model), opts);
    if (!latest) return undefined;
    const manifest = await store.getJson<ModelManifest>(manifestKey(model, latest.value.version), opts);
    if (!manifest) return undefined;
    const m = manifest.value;
    return { model, team: m.lineage.team, runId: m.runId, claimedAt: m.timestamps.publishedAt };
  }

  async function ownerOf(model: string, opts?: CallOptions): Promise<ModelOwner | undefined> {
    const recorded = await store.getJson<ModelOwner>(ownerKey(model), opts);
    return recorded?.value ?? (await legacyOwner(model, opts));
  }

  async function claim(model: string, team: string, runId: string, opts?: CallOptions): Promise<ModelOwner> {
    const recorded = await store.getJson<ModelOwner>(ownerKey(model), opts);
    if (recorded) return recorded.value;
    const owner = (await legacyOwner(model, opts)) ?? {
      model,
      team,
      runId,
      claimedAt: clock.now().toISOString(),
    };
    try {
      await store.putJson(ownerKey(model), owner, { ifNoneMatch: true }, opts);
      return owner;
    } catch (err) {
      // Another team's publish of the same name created it first: theirs it is.
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      const winner = await store.getJson<ModelOwner>(ownerKey(model), opts);
      if (!winner) throw err;
      return winner.value;
    }
  }

  return { ownerOf, claim };
}
