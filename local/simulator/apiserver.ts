import { randomUUID } from 'node:crypto';
import { isObj, type Json } from '../../lib/json.ts';
import { rfc3339, type SimClock } from './clock.ts';
import { type DecodeOptions, decode, pruneFields } from './decode.ts';
import { type DeleteOptions, Deletion } from './deletion.ts';
import {
  ApiError,
  alreadyExists,
  badRequest,
  CONFLICT_MODIFIED,
  conflict,
  type FieldError,
  forbidden,
  goQuote,
  invalid,
  notFound,
  type QualifiedResource,
  type StatusBody,
  unsupportedMediaType,
} from './errors.ts';
import { jsonPatch, mergePatch, PatchError } from './patch.ts';
import { apiVersionOf, defFromCrd, type Registry, type ResourceDef } from './registry.ts';
import { applyDefaults, type Schema } from './schema.ts';
import {
  type FieldRequirement,
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
} from './selectors.ts';
import { keyOf, meta, ObjectStore, viewAt, type WatchEvent } from './store.ts';
import {
  deepEqual,
  generateSuffix,
  prepareBuiltinCreate,
  schemaOf,
  selectableFields,
  specPart,
  statusSub as statusSubAt,
  validate,
} from './strategy.ts';

export type { Json } from '../../lib/json.ts';
export type { FieldValidation } from './decode.ts';
export type { DeleteOptions } from './deletion.ts';
export type { WatchEvent } from './store.ts';

/**
 * The apiserver's storage and request semantics, without HTTP: create / get / list / update /
 * patch / delete for every served resource, with the real server's order of checks (decode →
 * strict field validation → namespace lifecycle → mutating admission → defaulting and
 * validation → validating admission → storage), resourceVersion and generation bookkeeping,
 * finalizers, garbage collection of dependents and namespace deletion. Controllers write through
 * the same methods (with `system: true`, which skips the simulated webhooks), so their writes
 * bump resourceVersions and reach watchers like anyone else's.
 */

export type Operation = 'CREATE' | 'UPDATE' | 'DELETE';

export interface WriteOptions extends DecodeOptions {
  dryRun?: boolean;
  /** Controllers' writes: no simulated webhooks. */
  system?: boolean;
}

/** A simulated admission webhook (Kueue's and Trainer's): mutate in place, or throw an ApiError to deny. */
export interface AdmissionHook {
  mutate?(op: Operation, def: ResourceDef, obj: Json, old: Json | undefined): void;
  validate?(op: Operation, def: ResourceDef, obj: Json, old: Json | undefined): void;
}

export interface ListOptions {
  labelSelector?: string | null;
  fieldSelector?: string | null;
  limit?: number;
  continue?: string | null;
}

const qr = (def: ResourceDef): QualifiedResource => ({ group: def.group, resource: def.plural });

export class ApiServer {
  readonly registry: Registry;
  readonly clock: SimClock;
  private readonly objects: ObjectStore;
  private readonly deletion: Deletion;
  private readonly hooks: AdmissionHook[] = [];

  constructor(registry: Registry, clock: SimClock) {
    this.registry = registry;
    this.clock = clock;
    this.objects = new ObjectStore(registry);
    this.deletion = new Deletion(this.objects, this);
  }

  addAdmission(hook: AdmissionHook): void {
    this.hooks.push(hook);
  }

  onEvent(fn: (e: WatchEvent) => void): () => void {
    return this.objects.onEvent(fn);
  }

  currentRv(): number {
    return this.objects.currentRv();
  }

  /** Events after `rv`, or undefined when `rv` is older than the kept history (a watch then gets 410). */
  eventsSince(rv: number): WatchEvent[] | undefined {
    return this.objects.eventsSince(rv);
  }

  now(): string {
    return rfc3339(this.clock.stamp());
  }

  // -------------------------------------------------------------------------------------------
  // reads (stored objects are never handed out: callers get copies)

  /** The stored object (storage version), or undefined. Do not mutate. */
  peek(def: ResourceDef, ns: string | undefined, name: string): Json | undefined {
    return this.objects.peek(def, ns, name);
  }

  /** Stored objects of a kind, optionally in one namespace. Do not mutate. */
  peekAll(def: ResourceDef, ns?: string): Json[] {
    return this.objects.peekAll(def, ns);
  }

  findByUid(uid: string): { def: ResourceDef; obj: Json } | undefined {
    return this.objects.findByUid(uid);
  }

  private view(def: ResourceDef, version: string, o: Json): Json {
    return viewAt(def, version, o);
  }

  get(def: ResourceDef, version: string, ns: string | undefined, name: string): Json {
    const o = this.peek(def, ns, name);
    if (!o) throw notFound(qr(def), name);
    return this.view(def, version, o);
  }

  list(def: ResourceDef, version: string, ns: string | undefined, opts: ListOptions = {}): Json {
    const labels = opts.labelSelector ? parseLabelSelector(opts.labelSelector) : [];
    const fields: FieldRequirement[] = opts.fieldSelector
      ? parseFieldSelector(opts.fieldSelector, selectableFields(def))
      : [];
    let start = '';
    if (opts.continue) {
      try {
        const tok = JSON.parse(Buffer.from(opts.continue, 'base64').toString('utf8')) as { start?: unknown };
        if (typeof tok.start !== 'string') throw new Error('no start');
        start = tok.start;
      } catch {
        throw badRequest(
          'continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)',
        );
      }
    }
    const entries = [...this.objects.bucket(def).entries()]
      .filter(([, o]) => ns === undefined || meta(o).namespace === ns)
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    const matched: Array<[string, Json]> = [];
    for (const [k, o] of entries) {
      if (start && !(k > start)) continue;
      if (!matchesLabels(labels, meta(o).labels as Record<string, string> | undefined)) continue;
      if (fields.length > 0 && !matchesFields(fields, o)) continue;
      matched.push([k, o]);
    }
    const limit = opts.limit && opts.limit > 0 ? opts.limit : undefined;
    const page = limit ? matched.slice(0, limit) : matched;
    const rv = this.objects.currentRv();
    const listMeta: Json = { resourceVersion: String(rv) };
    if (limit && matched.length > limit) {
      const last = page[page.length - 1]![0];
      listMeta.continue = Buffer.from(
        JSON.stringify({ v: 'meta.k8s.io/v1', rv, start: `${last}\u0000` }),
      ).toString('base64');
      listMeta.remainingItemCount = matched.length - limit;
    } else if (!def.builtin) {
      listMeta.continue = '';
    }
    return {
      apiVersion: apiVersionOf(def.group, version),
      // Shallow views: list results are serialised at once, never mutated. Items of built-in
      // (typed) lists carry no apiVersion/kind, custom resources' do.
      items: page.map(([, o]) => {
        if (def.builtin) {
          const { apiVersion: _a, kind: _k, ...rest } = o;
          return rest;
        }
        return o.apiVersion === apiVersionOf(def.group, version)
          ? o
          : { ...o, apiVersion: apiVersionOf(def.group, version) };
      }),
      kind: def.listKind,
      metadata: listMeta,
    };
  }

  schemaOf(def: ResourceDef, version: string): Schema | undefined {
    return schemaOf(def, version);
  }

  private checkNamespace(def: ResourceDef, ns: string | undefined, name: string): void {
    if (!def.namespaced || ns === undefined) return;
    const nsDef = this.registry.get('', 'namespaces')!;
    const n = this.peek(nsDef, undefined, ns);
    if (!n) throw notFound({ group: '', resource: 'namespaces' }, ns);
    if (meta(n).deletionTimestamp) {
      throw forbidden(
        qr(def),
        name,
        `unable to create new content in namespace ${ns} because it is being terminated`,
        [
          {
            reason: 'NamespaceTerminating',
            message: `namespace ${ns} is being terminated`,
            field: 'metadata.namespace',
          },
        ],
      );
    }
  }

  /** The simulated webhooks of one stage (mutating, then later validating); none for controllers' writes. */
  private admit(
    stage: 'mutate' | 'validate',
    op: Operation,
    def: ResourceDef,
    obj: Json,
    old: Json | undefined,
    opts: WriteOptions,
  ): void {
    if (opts.system) return;
    for (const h of this.hooks) h[stage]?.(op, def, obj, old);
  }

  // -------------------------------------------------------------------------------------------
  // writes

  create(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    body: unknown,
    opts: WriteOptions = {},
  ): Json {
    const obj = decode(def, version, body, opts);
    const m = meta(obj);
    if (def.namespaced) {
      if (m.namespace !== undefined && m.namespace !== '' && m.namespace !== ns) {
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      }
      m.namespace = ns;
    } else {
      delete m.namespace;
    }
    if (
      (typeof m.name !== 'string' || m.name === '') &&
      typeof m.generateName === 'string' &&
      m.generateName !== ''
    ) {
      m.name = `${m.generateName}${generateSuffix()}`;
    }
    const name = typeof m.name === 'string' ? m.name : '';
    pruneFields(def, version, obj, opts);
    this.checkNamespace(def, ns, name);

    // PrepareForCreate: server-owned metadata, and status is not writable through the main resource.
    const statusSub = statusSubAt(def, version);
    if (statusSub && !def.builtin) delete obj.status;
    m.uid = randomUUID();
    m.creationTimestamp = this.now();
    // Built-in kinds without a spec/status split (Namespace, Event) carry no generation.
    if (!def.builtin || def.builtin === 'customresourcedefinitions') m.generation = 1;
    else delete m.generation;
    delete m.resourceVersion;
    delete m.deletionTimestamp;
    delete m.deletionGracePeriodSeconds;
    delete m.selfLink;
    delete m.managedFields;
    if (def.builtin) prepareBuiltinCreate(def, obj, this.now());

    this.admit('mutate', 'CREATE', def, obj, undefined, opts);
    applyDefaults(obj, schemaOf(def, version));
    validate(def, version, obj, undefined);
    this.admit('validate', 'CREATE', def, obj, undefined, opts);

    if (this.objects.peek(def, ns, name) !== undefined) throw alreadyExists(qr(def), name);
    if (opts.dryRun) return obj;
    return this.store(def, version, obj, 'ADDED');
  }

  /** Keep `obj` (the caller hands it over) as the new stored version. */
  private store(def: ResourceDef, version: string, obj: Json, type: 'ADDED' | 'MODIFIED'): Json {
    const stored = obj;
    stored.metadata = { ...meta(obj) };
    stored.apiVersion = apiVersionOf(def.group, def.storageVersion);
    meta(stored).resourceVersion = this.objects.nextRv();
    this.objects.bucket(def).set(keyOf(def, stored), stored);
    if (def.builtin === 'customresourcedefinitions' && type === 'ADDED')
      this.registry.add(defFromCrd(stored));
    this.objects.emit(type, def, stored);
    return this.view(def, version, stored);
  }

  /** PUT (main resource or `status`). */
  update(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    body: unknown,
    subresource: 'status' | undefined,
    opts: WriteOptions = {},
  ): Json {
    const obj = decode(def, version, body, opts);
    const m = meta(obj);
    if (m.name !== undefined && m.name !== name) {
      throw badRequest(
        `the name of the object (${String(m.name)}) does not match the name on the URL (${name})`,
      );
    }
    if (def.namespaced && m.namespace !== undefined && m.namespace !== '' && m.namespace !== ns) {
      throw badRequest(
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    }
    m.name = name;
    if (def.namespaced) m.namespace = ns;
    const current = this.peek(def, ns, name);
    if (!current) throw notFound(qr(def), name);
    if (m.resourceVersion === undefined || m.resourceVersion === '') {
      throw invalid(def.group, def.plural, name, [
        {
          type: 'FieldValueInvalid',
          field: 'metadata.resourceVersion',
          value: 0,
          detail: 'must be specified for an update',
        },
      ]);
    }
    if (String(m.resourceVersion) !== meta(current).resourceVersion)
      throw conflict(qr(def), name, CONFLICT_MODIFIED);
    pruneFields(def, version, obj, opts);
    return this.commitUpdate(def, version, current, obj, subresource, opts);
  }

  /** The shared tail of PUT and PATCH: strategy, admission, validation, storage. */
  private commitUpdate(
    def: ResourceDef,
    version: string,
    current: Json,
    incoming: Json,
    subresource: 'status' | undefined,
    opts: WriteOptions,
  ): Json {
    const old = this.view(def, version, current);
    const statusSub = statusSubAt(def, version);
    let next: Json;
    if (subresource === 'status') {
      // Everything but status comes from the stored object (shared: stored objects are immutable).
      next = { ...old, metadata: { ...meta(old) } };
      if (Object.hasOwn(incoming, 'status')) next.status = incoming.status;
      else delete next.status;
    } else {
      next = incoming;
      if (statusSub && !def.builtin) {
        if (Object.hasOwn(old, 'status')) next.status = old.status;
        else delete next.status;
      }
      // Server-owned metadata survives whatever the client sent.
      const m = meta(next);
      const om = meta(old);
      for (const k of [
        'uid',
        'creationTimestamp',
        'generation',
        'deletionTimestamp',
        'deletionGracePeriodSeconds',
      ]) {
        if (Object.hasOwn(om, k)) m[k] = om[k];
        else delete m[k];
      }
      delete m.managedFields;
      delete m.selfLink;
      if (om.deletionTimestamp && Array.isArray(m.finalizers)) {
        const oldF = new Set((om.finalizers as string[] | undefined) ?? []);
        const added = (m.finalizers as string[]).filter((f) => !oldF.has(f));
        if (added.length > 0) {
          // The real server reports this twice (ObjectMeta update validation runs twice for custom resources).
          const e: FieldError = {
            type: 'FieldValueForbidden',
            field: 'metadata.finalizers',
            value: '',
            detail: `no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map(goQuote).join(', ')}}`,
          };
          throw invalid(def.group, def.kind, String(m.name), [e, e]);
        }
      }
      this.admit('mutate', 'UPDATE', def, next, old, opts);
    }
    meta(next).resourceVersion = meta(old).resourceVersion;
    applyDefaults(next, schemaOf(def, version), subresource === 'status' ? 'status' : undefined);
    if (
      meta(old).generation !== undefined &&
      subresource !== 'status' &&
      !deepEqual(specPart(next, statusSub), specPart(old, statusSub))
    ) {
      meta(next).generation = Number(meta(old).generation ?? 1) + 1;
    }
    validate(def, version, next, old, subresource === 'status' ? 'status' : undefined);
    if (subresource !== 'status') this.admit('validate', 'UPDATE', def, next, old, opts);
    if (opts.dryRun) return next;
    // A write that changes nothing is not a write: no new resourceVersion, no event.
    if (deepEqual(next, old)) return old;
    const nm = meta(next);
    if (nm.deletionTimestamp && (!Array.isArray(nm.finalizers) || nm.finalizers.length === 0)) {
      this.deletion.remove(def, current);
      return next;
    }
    return this.store(def, version, next, 'MODIFIED');
  }

  patch(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    contentType: string,
    patchBody: unknown,
    subresource: 'status' | undefined,
    opts: WriteOptions & { fieldManager?: string | null } = {},
  ): { obj: Json; created: boolean } {
    const type = contentType.split(';')[0]!.trim().toLowerCase();
    const custom = !def.builtin || def.builtin === 'customresourcedefinitions';
    const accepted = [
      'application/json-patch+json',
      'application/merge-patch+json',
      'application/apply-patch+yaml',
    ];
    if (!custom) accepted.splice(2, 0, 'application/strategic-merge-patch+json');
    if (!accepted.includes(type)) throw unsupportedMediaType(accepted);

    if (type === 'application/apply-patch+yaml') {
      if (!opts.fieldManager) {
        throw invalid('meta.k8s.io', 'PatchOptions', '', [
          {
            type: 'FieldValueRequired',
            field: 'fieldManager',
            value: '',
            detail: 'is required for apply patch',
          },
        ]);
      }
      const current = this.peek(def, ns, name);
      if (!current) {
        if (subresource) throw notFound(qr(def), name);
        const body = isObj(patchBody)
          ? { ...patchBody, metadata: { ...(patchBody.metadata as Json), name } }
          : patchBody;
        return { obj: this.create(def, version, ns, body, opts), created: true };
      }
      // Server-side apply approximated as a merge of the applied configuration (no field ownership).
      const merged = mergePatch(this.view(def, version, current), patchBody) as Json;
      meta(merged).resourceVersion = meta(current).resourceVersion;
      return {
        obj: this.commitUpdate(def, version, current, decode(def, version, merged, opts), subresource, opts),
        created: false,
      };
    }

    const current = this.peek(def, ns, name);
    if (!current) throw notFound(qr(def), name);
    const base = this.view(def, version, current);
    if (type === 'application/json-patch+json' && !Array.isArray(patchBody)) {
      const what = patchBody === null ? 'null' : isObj(patchBody) ? 'object' : typeof patchBody;
      throw badRequest(
        `error decoding patch: json: cannot unmarshal ${what} into Go value of type []handlers.jsonPatchOp`,
      );
    }
    let patched: unknown;
    try {
      patched =
        type === 'application/json-patch+json' ? jsonPatch(base, patchBody) : mergePatch(base, patchBody);
    } catch (e) {
      if (e instanceof PatchError) {
        throw new ApiError(422, {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: 'the server rejected our request due to an error in our request',
          reason: 'Invalid',
          details: {},
          code: 422,
        });
      }
      throw e;
    }
    const obj = decode(def, version, patched, { ...opts, raw: JSON.stringify(patched) });
    const m = meta(obj);
    const patchedCopy = opts.fieldValidation === 'Strict' ? structuredClone(obj) : undefined;
    if (m.name !== name) {
      throw badRequest(
        `the name of the object (${String(m.name)}) does not match the name on the URL (${name})`,
      );
    }
    if (m.resourceVersion !== undefined && String(m.resourceVersion) !== meta(current).resourceVersion) {
      throw conflict(qr(def), name, CONFLICT_MODIFIED);
    }
    pruneFields(def, version, obj, opts, patchedCopy);
    return { obj: this.commitUpdate(def, version, current, obj, subresource, opts), created: false };
  }

  /** Read-modify-write for controllers: `fn` edits a copy; returns the stored result or undefined if gone. */
  mutate(
    def: ResourceDef,
    ns: string | undefined,
    name: string,
    fn: (o: Json) => void,
    subresource?: 'status',
  ): Json | undefined {
    const current = this.peek(def, ns, name);
    if (!current) return undefined;
    // A status write copies only the status (the rest is taken from the stored object anyway).
    const copy =
      subresource === 'status'
        ? { ...current, metadata: { ...meta(current) }, status: structuredClone(current.status) }
        : structuredClone(current);
    if (copy.status === undefined) delete copy.status;
    fn(copy);
    return this.commitUpdate(def, def.storageVersion, current, copy, subresource, { system: true });
  }

  delete(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    name: string,
    options: DeleteOptions = {},
  ): { body: Json | StatusBody; code: number } {
    return this.deletion.delete(def, version, ns, name, options);
  }

  deleteCollection(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    opts: ListOptions,
    del: DeleteOptions,
  ): Json {
    const listed = this.list(def, version, ns, {
      ...(opts.labelSelector !== undefined ? { labelSelector: opts.labelSelector } : {}),
      ...(opts.fieldSelector !== undefined ? { fieldSelector: opts.fieldSelector } : {}),
    });
    for (const o of listed.items as Json[]) {
      try {
        this.delete(def, version, meta(o).namespace as string | undefined, meta(o).name as string, del);
      } catch (e) {
        if (!(e instanceof ApiError && e.code === 404)) throw e;
      }
    }
    return listed;
  }

  /** Seed an object at start (CRDs, runtimes, queues): the full create path, as the system. */
  seed(def: ResourceDef, obj: Json): Json {
    const ns = def.namespaced ? (meta(obj).namespace as string | undefined) : undefined;
    return this.create(def, def.storageVersion, ns, obj, { system: true, fieldValidation: 'Ignore' });
  }
}
