import { isObj, type Json } from '../../lib/json.ts';
import { ApiError, conflict, notFound, type QualifiedResource, type StatusBody, success } from './errors.ts';
import type { Registry, ResourceDef } from './registry.ts';
import { meta, type ObjectStore, objKey, viewAt } from './store.ts';

/**
 * Deletion as the real server and its controllers carry it out: preconditions, dry runs,
 * finalizers (`foregroundDeletion`, `orphan`), the garbage collector's removal (or orphaning) of
 * dependents, and namespace deletion (Terminating, then its contents, then the namespace).
 */

export interface DeleteOptions {
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun?: boolean;
}

/** What deletion needs from the apiserver: its registry, clock and controllers' read-modify-write. */
export interface DeletionHost {
  readonly registry: Registry;
  now(): string;
  mutate(def: ResourceDef, ns: string | undefined, name: string, fn: (o: Json) => void): Json | undefined;
}

const qr = (def: ResourceDef): QualifiedResource => ({ group: def.group, resource: def.plural });

export class Deletion {
  private readonly store: ObjectStore;
  private readonly host: DeletionHost;
  private readonly registry: Registry;

  constructor(store: ObjectStore, host: DeletionHost) {
    this.store = store;
    this.host = host;
    this.registry = host.registry;
  }

  private now(): string {
    return this.host.now();
  }

  private mutate(def: ResourceDef, ns: string | undefined, name: string, fn: (o: Json) => void): void {
    this.host.mutate(def, ns, name, fn);
  }

  delete(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    options: DeleteOptions = {},
  ): { body: Json | StatusBody; code: number } {
    const current = this.store.peek(def, ns, name);
    if (!current) throw notFound(qr(def), name);
    const m = meta(current);
    const pre = options.preconditions;
    const byKind = { group: def.group, resource: def.kind };
    if (pre?.uid !== undefined && pre.uid !== m.uid) {
      throw conflict(
        byKind,
        name,
        `the UID in the precondition (${pre.uid}) does not match the UID in record (${String(m.uid)}). The object might have been deleted and then recreated`,
      );
    }
    if (pre?.resourceVersion !== undefined && pre.resourceVersion !== m.resourceVersion) {
      throw conflict(
        byKind,
        name,
        `the ResourceVersion in the precondition (${pre.resourceVersion}) does not match the ResourceVersion in record (${String(m.resourceVersion)}). The object might have been modified`,
      );
    }
    const policy = options.propagationPolicy ?? (def.builtin === 'namespaces' ? 'Background' : 'Background');
    if (options.dryRun) {
      const fin = Array.isArray(m.finalizers) && m.finalizers.length > 0;
      if (!fin && policy !== 'Foreground' && policy !== 'Orphan') {
        const st = success(qr(def), name, String(m.uid));
        delete st.details?.uid;
        return { body: st, code: 200 };
      }
      return { body: viewAt(def, version, current), code: 200 };
    }

    if (def.builtin === 'namespaces') {
      const next: Json = { ...current, metadata: { ...meta(current) } };
      const nm = meta(next);
      if (!nm.deletionTimestamp) {
        nm.deletionTimestamp = this.now();
        next.status = { ...(next.status as Json), phase: 'Terminating' };
        nm.resourceVersion = this.store.nextRv();
        this.store.bucket(def).set(name, next);
        this.store.emit('MODIFIED', def, next);
        // The namespace controller takes a moment: meanwhile the namespace is Terminating.
        setTimeout(() => this.purgeNamespace(name), 500).unref();
      }
      return { body: viewAt(def, version, next), code: 200 };
    }

    const finalizers = Array.isArray(m.finalizers) ? [...(m.finalizers as string[])] : [];
    if (policy === 'Foreground' && !finalizers.includes('foregroundDeletion'))
      finalizers.push('foregroundDeletion');
    if (policy === 'Orphan' && !finalizers.includes('orphan')) finalizers.push('orphan');
    if (finalizers.length > 0) {
      const obj = this.markDeleting(def, current, finalizers);
      setImmediate(() => this.collect(def, obj, policy));
      return { body: viewAt(def, version, obj), code: 200 };
    }
    this.remove(def, current);
    return { body: success(qr(def), name, String(m.uid)), code: 200 };
  }

  markDeleting(def: ResourceDef, current: Json, finalizers: string[]): Json {
    const next = { ...current, metadata: { ...meta(current) } };
    const m = meta(next);
    if (!m.deletionTimestamp) {
      m.deletionTimestamp = this.now();
      m.deletionGracePeriodSeconds = 0;
      m.generation = Number(m.generation ?? 1) + 1;
    }
    m.finalizers = finalizers;
    m.resourceVersion = this.store.nextRv();
    this.store
      .bucket(def)
      .set(objKey(def.namespaced ? (m.namespace as string) : undefined, m.name as string), next);
    this.store.emit('MODIFIED', def, next);
    return next;
  }

  private removeFinalizer(def: ResourceDef, obj: Json, finalizer: string): void {
    const cur = this.store.peek(def, meta(obj).namespace as string | undefined, meta(obj).name as string);
    if (!cur || meta(cur).uid !== meta(obj).uid) return;
    const rest = ((meta(cur).finalizers as string[] | undefined) ?? []).filter((f) => f !== finalizer);
    if (rest.length === 0) this.remove(def, cur);
    else this.markDeleting(def, cur, rest);
  }

  /** Drop the object, then garbage-collect its dependents (background propagation). */
  remove(def: ResourceDef, current: Json): void {
    const m = meta(current);
    this.store
      .bucket(def)
      .delete(objKey(def.namespaced ? (m.namespace as string) : undefined, m.name as string));
    const gone = { ...current, metadata: { ...m, resourceVersion: this.store.nextRv() } };
    if (def.builtin === 'customresourcedefinitions') {
      const spec = current.spec as Json;
      const names = spec.names as Json;
      const target = this.registry.get(String(spec.group), String(names.plural));
      if (target) this.store.dropKind(target.group, target.plural);
      this.registry.remove(String(spec.group), String(names.plural));
    }
    this.store.emit('DELETED', def, gone);
    const uid = String(m.uid);
    setImmediate(() => this.collect(def, gone, 'Background', uid));
  }

  /** The garbage collector's part: dependents of a deleted (or deleting) owner. */
  private collect(
    ownerDef: ResourceDef,
    owner: Json,
    policy: 'Background' | 'Foreground' | 'Orphan',
    uid?: string,
  ): void {
    const ownerUid = uid ?? String(meta(owner).uid);
    const dependents: Array<{ def: ResourceDef; obj: Json }> = [];
    for (const def of this.registry.all()) {
      for (const o of this.store.bucket(def).values()) {
        const refs = meta(o).ownerReferences;
        if (Array.isArray(refs) && refs.some((r) => isObj(r) && r.uid === ownerUid))
          dependents.push({ def, obj: o });
      }
    }
    if (policy === 'Orphan') {
      for (const d of dependents) {
        this.mutate(d.def, meta(d.obj).namespace as string | undefined, meta(d.obj).name as string, (o) => {
          const om = meta(o);
          om.ownerReferences = (om.ownerReferences as Json[]).filter((r) => r.uid !== ownerUid);
          if ((om.ownerReferences as Json[]).length === 0) delete om.ownerReferences;
        });
      }
      this.removeFinalizer(ownerDef, owner, 'orphan');
      return;
    }
    for (const d of dependents) {
      const dm = meta(d.obj);
      // An owner that still exists (another owner reference) keeps the dependent alive.
      const refs = (dm.ownerReferences as Json[]).filter((r) => r.uid !== ownerUid);
      const alive = refs.some((r) => this.store.findByUid(String(r.uid)) !== undefined);
      if (alive) continue;
      try {
        this.delete(d.def, d.def.storageVersion, dm.namespace as string | undefined, dm.name as string, {
          propagationPolicy: policy === 'Foreground' ? 'Foreground' : 'Background',
        });
      } catch (e) {
        if (!(e instanceof ApiError && e.code === 404)) throw e;
      }
    }
    if (policy === 'Foreground') this.removeFinalizer(ownerDef, owner, 'foregroundDeletion');
  }

  private purgeNamespace(ns: string): void {
    for (const def of this.registry.all()) {
      if (!def.namespaced) continue;
      for (const o of [...this.store.bucket(def).values()]) {
        if (meta(o).namespace !== ns) continue;
        const fin = meta(o).finalizers;
        if (Array.isArray(fin) && fin.length > 0) {
          if (!meta(o).deletionTimestamp) this.markDeleting(def, o, fin as string[]);
          continue;
        }
        this.remove(def, o);
      }
    }
    const nsDef = this.registry.get('', 'namespaces')!;
    const left = this.registry.all().some((d) => d.namespaced && this.store.peekAll(d, ns).length > 0);
    if (left) {
      setTimeout(() => this.purgeNamespace(ns), 50).unref();
      return;
    }
    const n = this.store.peek(nsDef, undefined, ns);
    if (n) this.remove(nsDef, n);
  }
}
