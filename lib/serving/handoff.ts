import type { ModelOwners } from '../artifacts/ownership.ts';
import type { GantryConfig } from '../config.ts';
import { ClusterAccessDeniedError, NotFoundError, RetryableError } from '../errors.ts';
import { aliasMovedLifecycleEvent, type ModelLifecycleEvent } from '../events/model-event.ts';
import type { CallOptions, Clock, ObjectStore } from '../ports.ts';
import type { AliasPointer } from '../registry/aliases.ts';
import { aliasHistoryKey, aliasKey } from '../registry/layout.ts';
import {
  type IsvcTarget,
  kservePatch,
  type Readiness,
  readinessOf,
  type ServingState,
  servingKey,
  settled,
  targetsFor,
} from './kserve.ts';

/**
 * What happens after an alias moved, off the mover's path (the mover only enqueues the move; this
 * runs in the function that has Kubernetes access): the move's lifecycle event goes to the events
 * queue (EventBridge, the team's webhooks), and every InferenceService configured for the alias is
 * patched to the version the alias points at *now* and watched until Ready. Level-triggered: a late
 * or repeated message patches to the current pointer, never back to an older move's version.
 */

/** A message of the alias-moves queue. `check`: look at readiness again (a delayed re-send). */
export interface AliasMoveMessage {
  kind: 'moved' | 'check';
  model: string;
  alias: string;
  seq: number;
  /** `check`: stop watching after this time (ISO). */
  until?: string;
}

/** The alias-moves queue, as the mover and the watcher send to it. */
export interface AliasMoveQueue {
  send(message: AliasMoveMessage, delaySeconds: number, opts?: CallOptions): Promise<void>;
}

/** An InferenceService as Gantry reads it (metadata.generation, status). */
export interface IsvcObject {
  metadata?: { generation?: number; name?: string; namespace?: string };
  spec?: unknown;
  status?: unknown;
}

/** KServe InferenceServices of one cluster: merge patch and get (lib/adapters/kubernetes/inference-services.ts). */
export interface InferenceServices {
  patch(namespace: string, name: string, body: unknown, opts?: CallOptions): Promise<IsvcObject>;
  get(namespace: string, name: string, opts?: CallOptions): Promise<IsvcObject | undefined>;
}

export interface HandOffDeps {
  config: Pick<GantryConfig, 'teams' | 'clusters' | 'defaultCluster'>;
  store: ObjectStore;
  owners: Pick<ModelOwners, 'ownerOf'>;
  clock: Clock;
  /** The model's lifecycle event to its team's targets (lib/events/outbox.ts `emitModel`). */
  emit: (event: ModelLifecycleEvent, opts?: CallOptions) => Promise<unknown>;
  /** The cluster's InferenceServices; loads the Kubernetes client on first call only. */
  inferenceServices: (cluster: string) => Promise<InferenceServices>;
  queue: AliasMoveQueue;
  /** How often readiness is looked at again, and for how long after a move. */
  watch: { everySeconds: number; forSeconds: number };
  log?: (line: Record<string, unknown>) => void;
}

export function makeAliasHandOff(deps: HandOffDeps) {
  const { store, clock } = deps;

  /** The state of one InferenceService for the pointer: patched if it serves an older move, then read. */
  async function sync(target: IsvcTarget, pointer: AliasPointer, opts?: CallOptions): Promise<ServingState> {
    const key = servingKey(pointer.model, pointer.alias, target);
    const before = (await store.getJson<ServingState>(key, opts))?.value;
    const now = () => clock.now().toISOString();
    const base = {
      kind: 'kserve' as const,
      cluster: target.cluster,
      namespace: target.namespace,
      inferenceService: target.name,
      seq: pointer.seq,
      version: pointer.version,
      storageUri: pointer.storageUri,
      ...(target.canaryTrafficPercent !== undefined
        ? { canaryTrafficPercent: target.canaryTrafficPercent }
        : {}),
    };
    const isvcs = await deps.inferenceServices(target.cluster);
    let state: ServingState;
    try {
      if (before && before.seq === pointer.seq && before.patchedGeneration !== undefined) {
        const isvc = await isvcs.get(target.namespace, target.name, opts);
        if (!isvc)
          throw new NotFoundError(`InferenceService ${target.namespace}/${target.name} does not exist`);
        const { reason: _r, message: _m, observedGeneration: _o, ...kept } = before;
        state = { ...kept, ...readable(readinessOf(isvc, before.patchedGeneration)), checkedAt: now() };
      } else {
        const patched = await isvcs.patch(
          target.namespace,
          target.name,
          kservePatch(target, pointer.storageUri),
          opts,
        );
        const generation = Number(patched.metadata?.generation ?? 0);
        state = {
          ...base,
          patchedGeneration: generation,
          patchedAt: now(),
          ...readable(readinessOf(patched, generation)),
          checkedAt: now(),
        };
      }
    } catch (err) {
      // Retried by the queue: the cluster did not answer.
      if (err instanceof RetryableError) throw err;
      const reason =
        err instanceof NotFoundError
          ? 'InferenceServiceNotFound'
          : err instanceof ClusterAccessDeniedError
            ? 'AccessDenied'
            : 'PatchRefused';
      state = {
        ...(before && before.seq === pointer.seq ? before : base),
        ready: 'Unknown',
        reason,
        message: err instanceof Error ? err.message : String(err),
        checkedAt: now(),
      };
    }
    await store.putJson(key, state, {}, opts);
    deps.log?.({
      level: 'INFO',
      msg: 'inference service synced',
      model: pointer.model,
      alias: pointer.alias,
      version: pointer.version,
      inferenceService: `${target.namespace}/${target.name}`,
      ready: state.ready,
      reason: state.reason,
    });
    return state;
  }

  /** One message: the move's event (for `moved`), then the alias's InferenceServices. */
  async function handle(message: AliasMoveMessage, opts?: CallOptions): Promise<{ settled: boolean }> {
    const { model, alias } = message;
    const owner = await deps.owners.ownerOf(model, opts);
    if (!owner) return { settled: true };
    const pointerNow = async () => (await store.getJson<AliasPointer>(aliasKey(model, alias), opts))?.value;
    let pointer = await pointerNow();
    if (message.kind === 'moved') {
      const entry =
        (await store.getJson<AliasPointer>(aliasHistoryKey(model, alias, message.seq), opts))?.value ??
        (pointer?.seq === message.seq ? pointer : undefined);
      if (entry) await deps.emit(aliasMovedLifecycleEvent(entry, owner.team), opts);
    }
    const team = deps.config.teams.find((t) => t.name === owner.team);
    if (!team || !pointer) return { settled: true };
    const cluster = team.cluster ?? deps.config.defaultCluster ?? (deps.config.clusters[0]?.name as string);
    const targets = targetsFor(team, cluster, model, alias);
    if (targets.length === 0) return { settled: true };
    // A check for an older move than the pointer's: the newer move's own messages watch it.
    if (message.kind === 'check' && message.seq < pointer.seq) return { settled: true };
    let states: ServingState[] = [];
    for (let round = 0; round < 3; round++) {
      states = [];
      for (const t of targets) states.push(await sync(t, pointer, opts));
      // Moved again while this patched: patch to the newer version, so a slow consumer never leaves
      // the InferenceService on an older move's version.
      const again = await pointerNow();
      if (!again || again.seq === pointer.seq) break;
      pointer = again;
    }
    const done = states.every((s) => settled({ ready: s.ready }) || s.patchedGeneration === undefined);
    const until =
      message.until ?? new Date(clock.now().getTime() + deps.watch.forSeconds * 1000).toISOString();
    if (!done && clock.now().getTime() < Date.parse(until)) {
      await deps.queue.send(
        { kind: 'check', model, alias, seq: pointer.seq, until },
        deps.watch.everySeconds,
        opts,
      );
    }
    return { settled: done };
  }

  return { handle, sync };
}

export type AliasHandOff = ReturnType<typeof makeAliasHandOff>;

const readable = (r: Readiness) => ({
  ready: r.ready,
  ...(r.reason !== undefined ? { reason: r.reason } : {}),
  ...(r.message !== undefined ? { message: r.message } : {}),
  ...(r.observedGeneration !== undefined ? { observedGeneration: r.observedGeneration } : {}),
});
