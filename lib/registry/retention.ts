import { latestKey, manifestKey, modelPrefix, versionPrefix, versionsKey } from '../artifacts/layout.ts';
import type { ModelManifest } from '../artifacts/manifest.ts';
import type { LatestPointer, VersionCounter } from '../artifacts/versioning.ts';
import { ConcurrentUpdateError } from '../errors.ts';
import type { CallOptions, Clock, ObjectStore } from '../ports.ts';
import type { Aliases } from './aliases.ts';
import { keepLastFor, planRetention, type RetentionSettings, type RetentionState } from './retention-plan.ts';

/**
 * The retention sweeper: after a publish, the model's versions older than the team's last N that
 * no alias (nor `latest`) points at lose their files; each keeps its manifest, marked `retired`,
 * so its lineage stays readable. Bounded (at most `maxRetire` versions a call), idempotent (a
 * retired version is finished again, never un-retired), and safe against an alias move: the
 * manifest is marked first (If-Match), the aliases are read again, and only then are files
 * deleted — an alias that moved to the version in between gets the manifest back unmarked, and a
 * move that reads the marked manifest is refused (lib/registry/aliases.ts).
 */

/** `models/<model>/retention.json`: how far the sweeper has looked (lib/registry/retention-plan.ts). */
export const retentionStateKey = (model: string) => `${modelPrefix(model)}retention.json`;

/** Versions retired by one sweep at most: a NotifyServing call stays short; the next publish goes on. */
export const MAX_RETIRE_PER_SWEEP = 5;

export interface RetentionResult {
  keepLastVersions: number;
  /** Versions whose files this sweep deleted (or finished deleting). */
  retired: number[];
  /** Older versions that keep their files: an alias or `latest` points at them (or a publish is in flight). */
  kept: number[];
}

export function makeRetention(deps: {
  store: ObjectStore;
  aliases: Aliases;
  clock: Clock;
  /** The team's retention settings (config `teams[].retention`); undefined = keep everything. */
  settings: (team: string) => RetentionSettings | undefined;
  maxRetire?: number;
}) {
  const { store, aliases, clock } = deps;
  const maxRetire = deps.maxRetire ?? MAX_RETIRE_PER_SWEEP;

  async function protectedVersions(model: string, opts?: CallOptions): Promise<Set<number>> {
    const [pointers, latest] = await Promise.all([
      aliases.list(model, opts),
      store.getJson<LatestPointer>(latestKey(model), opts),
    ]);
    return new Set([...pointers.map((p) => p.version), ...(latest ? [latest.value.version] : [])]);
  }

  /** Every object of the version but its manifest. */
  async function deleteFiles(model: string, version: number, opts?: CallOptions): Promise<void> {
    const keep = manifestKey(model, version);
    const keys = (await store.list(versionPrefix(model, version), opts))
      .map((o) => o.key)
      .filter((k) => k !== keep);
    for (let i = 0; i < keys.length; i += 10) {
      await Promise.all(keys.slice(i, i + 10).map((k) => store.delete(k, opts)));
    }
  }

  async function retireOne(
    model: string,
    version: number,
    keep: number,
    opts?: CallOptions,
  ): Promise<'retired' | 'kept' | 'absent'> {
    const found = await store.getJson<ModelManifest>(manifestKey(model, version), opts);
    if (!found) {
      // Objects without a manifest: a publish still copying (or to be retried). Nothing: a gap in the numbers.
      const objects = await store.list(versionPrefix(model, version), opts);
      return objects.length > 0 ? 'kept' : 'absent';
    }
    if (found.value.retired) {
      await deleteFiles(model, version, opts);
      return 'retired';
    }
    const marked: ModelManifest = {
      ...found.value,
      retired: {
        at: clock.now().toISOString(),
        reason: `retention: older than the last ${keep} versions of ${model} and no alias points at it; its files were deleted`,
      },
    };
    let etag: string;
    try {
      etag = (await store.putJson(manifestKey(model, version), marked, { ifMatch: found.etag }, opts)).etag;
    } catch (err) {
      if (err instanceof ConcurrentUpdateError) return 'kept';
      throw err;
    }
    // An alias may have moved here since the plan was made: read them again now that moves are refused.
    if ((await protectedVersions(model, opts)).has(version)) {
      await store.putJson(manifestKey(model, version), found.value, { ifMatch: etag }, opts);
      return 'kept';
    }
    await deleteFiles(model, version, opts);
    return 'retired';
  }

  /** Retire what the team's retention allows for the model; undefined when the team keeps every version. */
  async function sweep(
    model: string,
    team: string,
    opts?: CallOptions,
  ): Promise<RetentionResult | undefined> {
    const keep = keepLastFor(deps.settings(team), model);
    if (keep === undefined) return undefined;
    const counter = await store.getJson<VersionCounter>(versionsKey(model), opts);
    const last = counter?.value.last ?? 0;
    const state = await store.getJson<RetentionState>(retentionStateKey(model), opts);
    const plan = planRetention({
      last,
      keepLastVersions: keep,
      protectedVersions: await protectedVersions(model, opts),
      state: state?.value,
      maxRetire,
    });
    const retired: number[] = [];
    const kept = [...plan.kept];
    for (const v of plan.retire) {
      const outcome = await retireOne(model, v, keep, opts);
      if (outcome === 'retired') retired.push(v);
      if (outcome === 'kept') kept.push(v);
    }
    kept.sort((a, b) => a - b);
    const next: RetentionState = {
      model,
      examinedThrough: plan.examinedThrough,
      kept,
      updatedAt: clock.now().toISOString(),
    };
    const changed =
      !state ||
      state.value.examinedThrough !== next.examinedThrough ||
      state.value.kept.join() !== kept.join();
    if (changed) {
      await store
        .putJson(
          retentionStateKey(model),
          next,
          state ? { ifMatch: state.etag } : { ifNoneMatch: true },
          opts,
        )
        .catch((err) => {
          // Another sweep of the model wrote first: the next sweep starts from its state and
          // finishes whatever this one retired again (retiring is idempotent).
          if (!(err instanceof ConcurrentUpdateError)) throw err;
        });
    }
    return { keepLastVersions: keep, retired, kept };
  }

  return { sweep };
}

export type Retention = ReturnType<typeof makeRetention>;
