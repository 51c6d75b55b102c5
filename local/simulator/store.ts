import type { Json } from '../../lib/json.ts';
import { apiVersionOf, defKey, type Registry, type ResourceDef } from './registry.ts';

/**
 * The apiserver's storage: one bucket of objects per resource, the resourceVersion counter, and
 * the event stream (listeners and the recent history a watch resumes from). No request
 * semantics: `ApiServer` decides what is written, this keeps it and tells the watchers.
 */

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  def: ResourceDef;
  object: Json;
  rv: number;
}

export const meta = (o: Json): Json => o.metadata as Json;
export const objKey = (ns: string | undefined, name: string): string => (ns ? `${ns}/${name}` : name);

/** The storage key of a stored object. */
export function keyOf(def: ResourceDef, o: Json): string {
  const m = meta(o);
  return objKey(def.namespaced ? (m.namespace as string) : undefined, m.name as string);
}

/**
 * The object as served at `version`. Stored objects are never changed in place (every write
 * stores a new object), so callers get them as they are: read-only, to serialise or copy.
 */
export function viewAt(def: ResourceDef, version: string, o: Json): Json {
  const av = apiVersionOf(def.group, version);
  return o.apiVersion === av ? o : { ...o, apiVersion: av };
}

export class ObjectStore {
  private readonly registry: Registry;
  private readonly data = new Map<string, Map<string, Json>>();
  private rv = 1000;
  private readonly listeners = new Set<(e: WatchEvent) => void>();
  /** Recent events for watches that resume from a resourceVersion. */
  private readonly history: WatchEvent[] = [];
  private readonly historyLimit = 2000;

  constructor(registry: Registry) {
    this.registry = registry;
  }

  onEvent(fn: (e: WatchEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  currentRv(): number {
    return this.rv;
  }

  nextRv(): string {
    this.rv += 1;
    return String(this.rv);
  }

  /** Events after `rv`, or undefined when `rv` is older than the kept history (a watch then gets 410). */
  eventsSince(rv: number): WatchEvent[] | undefined {
    const first = this.history[0];
    if (first && rv < first.rv - 1 && this.history.length >= this.historyLimit) return undefined;
    return this.history.filter((e) => e.rv > rv);
  }

  emit(type: WatchEvent['type'], def: ResourceDef, object: Json): void {
    const e: WatchEvent = { type, def, object, rv: Number(meta(object).resourceVersion) };
    this.history.push(e);
    if (this.history.length > this.historyLimit)
      this.history.splice(0, this.history.length - this.historyLimit);
    for (const l of this.listeners) l(e);
  }

  bucket(def: ResourceDef): Map<string, Json> {
    const k = defKey(def.group, def.plural);
    let b = this.data.get(k);
    if (!b) {
      b = new Map();
      this.data.set(k, b);
    }
    return b;
  }

  /** Forget every object of a kind (its CRD is gone). */
  dropKind(group: string, plural: string): void {
    this.data.delete(defKey(group, plural));
  }

  /** The stored object (storage version), or undefined. Do not mutate. */
  peek(def: ResourceDef, ns: string | undefined, name: string): Json | undefined {
    return this.bucket(def).get(objKey(def.namespaced ? ns : undefined, name));
  }

  /** Stored objects of a kind, optionally in one namespace. Do not mutate. */
  peekAll(def: ResourceDef, ns?: string): Json[] {
    const out: Json[] = [];
    for (const o of this.bucket(def).values()) {
      if (ns === undefined || meta(o).namespace === ns) out.push(o);
    }
    return out;
  }

  findByUid(uid: string): { def: ResourceDef; obj: Json } | undefined {
    for (const def of this.registry.all()) {
      for (const o of this.bucket(def).values()) if (meta(o).uid === uid) return { def, obj: o };
    }
    return undefined;
  }
}
