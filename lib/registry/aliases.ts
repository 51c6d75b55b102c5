import { manifestKey } from '../artifacts/layout.ts';
import type { ModelManifest } from '../artifacts/manifest.ts';
import { ConcurrentUpdateError, NotFoundError, TerminalError, ValidationError } from '../errors.ts';
import type { CallOptions, Clock, ObjectStore } from '../ports.ts';
import {
  aliasesPrefix,
  aliasHistoryKey,
  aliasHistoryPrefix,
  aliasKey,
  aliasNamesOf,
  pendingKey,
} from './layout.ts';

/**
 * Model aliases (`production`, `staging`, …): a pointer per alias, moved only with a conditional
 * write on the pointer's ETag, so of two movers exactly one wins and the other learns where it
 * points now; every move is kept in the alias's history (who, why, from which version).
 */

/** `models/<model>/aliases/<alias>.json`: where an alias points; also one history entry. */
export interface AliasPointer {
  model: string;
  alias: string;
  version: number;
  /** The move's number for this alias, 1, 2, 3…: the history entry's key. */
  seq: number;
  previousVersion?: number;
  storageUri: string;
  manifestUri: string;
  movedAt: string;
  /** Who moved it: a caller (`user/…`, `role/…`), or `policy:<kind>` when a publish did. */
  movedBy: string;
  reason: string;
}

/** `models/<model>/aliases/<alias>/pending.json`: a version waiting for approval (policy `manual`). */
export interface PendingPromotion {
  model: string;
  alias: string;
  version: number;
  runId: string;
  requestedAt: string;
  reason: string;
}

/** The alias moved since the caller looked: where it points now. The API answers 409. */
export class AliasConflictError extends TerminalError {
  override readonly name = 'AliasConflictError' as const;
  readonly current: number | null;
  constructor(model: string, alias: string, current: number | null, expected: number | null) {
    super(
      `alias ${alias} of ${model} points at ${current === null ? 'no version' : `version ${current}`}, not ${
        expected === null ? 'no version' : `version ${expected}`
      }: it moved; read it again`,
    );
    this.current = current;
  }
}

export interface MoveAlias {
  model: string;
  alias: string;
  version: number;
  /** Move only if the alias points at this version now (`null`: only if it points nowhere). */
  expectedVersion?: number | null;
  movedBy: string;
  reason: string;
}

/**
 * The pointer is this very move already: same version, mover and reason, and the caller expected
 * what the pointer moved from. A retry, not a new move (a new move from elsewhere is a conflict).
 */
function isSameMove(pointer: AliasPointer, input: MoveAlias): boolean {
  return (
    pointer.version === input.version &&
    pointer.movedBy === input.movedBy &&
    pointer.reason === input.reason &&
    (input.expectedVersion === undefined || input.expectedVersion === (pointer.previousVersion ?? null))
  );
}

export function makeAliases(deps: {
  store: ObjectStore;
  clock: Clock;
  /**
   * Told of every move, whoever made it (a policy at publish, approve, promote, rollback): enqueues
   * the move for its lifecycle event and the KServe hand-off (lib/serving/handoff.ts). A failure
   * fails the call after the pointer moved; the move stands, and the caller's retry of the same
   * move (isSameMove) calls onMoved again with the same seq.
   */
  onMoved?: (moved: AliasPointer, opts?: CallOptions) => Promise<void>;
}) {
  const { store, clock } = deps;

  const get = async (model: string, alias: string, opts?: CallOptions) =>
    store.getJson<AliasPointer>(aliasKey(model, alias), opts);

  /** Every alias of the model and where it points. */
  async function list(model: string, opts?: CallOptions): Promise<AliasPointer[]> {
    const keys = (await store.list(aliasesPrefix(model), opts)).map((o) => o.key);
    const found = await Promise.all(aliasNamesOf(model, keys).map((a) => get(model, a, opts)));
    return found.flatMap((f) => (f ? [f.value] : []));
  }

  /**
   * Point the alias at a published version. The pointer is written first (If-Match / If-None-Match:
   * the race's one winner), then its history entry (If-None-Match on its sequence number); a crash
   * between the two leaves the pointer, which `history` shows as the newest move.
   */
  async function move(input: MoveAlias, opts?: CallOptions): Promise<AliasPointer> {
    const { model, alias, version } = input;
    const manifest = await store.getJson<ModelManifest>(manifestKey(model, version), opts);
    if (!manifest) throw new NotFoundError(`model ${model} has no published version ${version}`);
    if (manifest.value.retired) {
      // Retention deleted its files (lib/registry/retention.ts): serving could not load it.
      throw new ValidationError([
        {
          field: 'version',
          rule: `version ${version} of ${model} was retired (${manifest.value.retired.at}): its files were deleted, so no alias can point at it`,
        },
      ]);
    }
    const current = await get(model, alias, opts);
    const now = current?.value.version ?? null;
    if (current && isSameMove(current.value, input)) {
      // The caller's retry of a move that went through (its answer lost, or onMoved failed after the
      // pointer moved): the move's tail again, with the same seq, so its event keeps its id.
      await finishMove(current.value, opts);
      return current.value;
    }
    if (input.expectedVersion !== undefined && input.expectedVersion !== now) {
      throw new AliasConflictError(model, alias, now, input.expectedVersion);
    }
    const next: AliasPointer = {
      model,
      alias,
      version,
      seq: (current?.value.seq ?? 0) + 1,
      ...(current ? { previousVersion: current.value.version } : {}),
      storageUri: manifest.value.storageUri,
      manifestUri: manifest.value.manifestUri,
      movedAt: clock.now().toISOString(),
      movedBy: input.movedBy,
      reason: input.reason,
    };
    try {
      await store.putJson(
        aliasKey(model, alias),
        next,
        current ? { ifMatch: current.etag } : { ifNoneMatch: true },
        opts,
      );
    } catch (err) {
      if (!(err instanceof ConcurrentUpdateError)) throw err;
      const winner = await get(model, alias, opts);
      throw new AliasConflictError(model, alias, winner?.value.version ?? null, now);
    }
    await finishMove(next, opts);
    return next;
  }

  /** After the pointer: its history entry, the approval it settles, and onMoved (each safe to repeat). */
  async function finishMove(moved: AliasPointer, opts?: CallOptions): Promise<void> {
    const { model, alias, version } = moved;
    await store
      .putJson(aliasHistoryKey(model, alias, moved.seq), moved, { ifNoneMatch: true }, opts)
      .catch((err) => {
        // Written already (a retried call of the same move): the entry is the pointer's own.
        if (!(err instanceof ConcurrentUpdateError)) throw err;
      });
    const pending = await store.getJson<PendingPromotion>(pendingKey(model, alias), opts);
    if (pending && pending.value.version <= version) await store.delete(pendingKey(model, alias), opts);
    if (deps.onMoved) await deps.onMoved(moved, opts);
  }

  /** The alias's moves, newest first (at most `limit`). */
  async function history(
    model: string,
    alias: string,
    limit: number,
    opts?: CallOptions,
  ): Promise<AliasPointer[]> {
    const keys = (await store.list(aliasHistoryPrefix(model, alias), opts))
      .map((o) => o.key)
      .sort()
      .reverse();
    const entries = await Promise.all(keys.slice(0, limit).map((k) => store.getJson<AliasPointer>(k, opts)));
    const moves = entries.flatMap((e) => (e ? [e.value] : []));
    const pointer = (await get(model, alias, opts))?.value;
    if (pointer && !moves.some((m) => m.seq === pointer.seq)) moves.unshift(pointer);
    return moves.slice(0, limit);
  }

  const pending = async (model: string, alias: string, opts?: CallOptions) =>
    (await store.getJson<PendingPromotion>(pendingKey(model, alias), opts))?.value;

  async function propose(p: PendingPromotion, opts?: CallOptions): Promise<void> {
    await store.putJson(pendingKey(p.model, p.alias), p, {}, opts);
  }

  return { get, list, move, history, pending, propose };
}

export type Aliases = ReturnType<typeof makeAliases>;
