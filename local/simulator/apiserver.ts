import { randomBytes, randomUUID } from 'node:crypto';
import { rfc3339, type SimClock } from './clock.ts';
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
  sortKeys,
  success,
  unsupportedMediaType,
} from './errors.ts';
import { objectMetaErrors } from './meta.ts';
import { jsonPatch, mergePatch, PatchError } from './patch.ts';
import { apiVersionOf, defFromCrd, defKey, type Registry, type ResourceDef } from './registry.ts';
import {
  applyDefaults,
  CEL_BLOCKED,
  hasBlockingErr,
  prune,
  type Schema,
  validateCel,
  validateSchema,
} from './schema.ts';
import {
  type FieldRequirement,
  matchesFields,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
} from './selectors.ts';

/**
 * The apiserver's storage and request semantics, without HTTP: create / get / list / update /
 * patch / delete for every served resource, with the real server's order of checks (decode →
 * strict field validation → namespace lifecycle → mutating admission → defaulting and
 * validation → validating admission → storage), resourceVersion and generation bookkeeping,
 * finalizers, garbage collection of dependents and namespace deletion. Controllers write through
 * the same methods (with `system: true`, which skips the simulated webhooks), so their writes
 * bump resourceVersions and reach watchers like anyone else's.
 */

export type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';
export type Operation = 'CREATE' | 'UPDATE' | 'DELETE';

export interface WriteOptions {
  dryRun?: boolean;
  fieldValidation?: FieldValidation;
  /** Warnings for the response's `Warning` headers. */
  warnings?: string[];
  /** Controllers' writes: no simulated webhooks. */
  system?: boolean;
  /** The raw request text, for decode error messages. */
  raw?: string;
  /** The body is a fresh object the server may keep (a parsed request body): no defensive copy. */
  owned?: boolean;
}

/** A simulated admission webhook (Kueue's and Trainer's): mutate in place, or throw an ApiError to deny. */
export interface AdmissionHook {
  mutate?(op: Operation, def: ResourceDef, obj: Json, old: Json | undefined): void;
  validate?(op: Operation, def: ResourceDef, obj: Json, old: Json | undefined): void;
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  def: ResourceDef;
  object: Json;
  rv: number;
}

export interface ListOptions {
  labelSelector?: string | null;
  fieldSelector?: string | null;
  limit?: number;
  continue?: string | null;
}

export interface DeleteOptions {
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun?: boolean;
}

const meta = (o: Json): Json => o.metadata as Json;
const objKey = (ns: string | undefined, name: string): string => (ns ? `${ns}/${name}` : name);
const qr = (def: ResourceDef): QualifiedResource => ({ group: def.group, resource: def.plural });

/** Field selectors each kind supports (metadata.name / metadata.namespace everywhere, like the real server). */
function selectableFields(def: ResourceDef): string[] {
  const base = ['metadata.name', 'metadata.namespace'];
  if (def.builtin === 'events') {
    return [
      ...base,
      'involvedObject.kind',
      'involvedObject.namespace',
      'involvedObject.name',
      'involvedObject.uid',
      'involvedObject.apiVersion',
      'involvedObject.resourceVersion',
      'involvedObject.fieldPath',
      'reason',
      'reportingComponent',
      'source',
      'type',
    ];
  }
  if (def.builtin === 'namespaces') return [...base, 'status.phase'];
  if (def.builtin === 'pods') return [...base, 'spec.nodeName', 'spec.restartPolicy', 'status.phase'];
  return base;
}

const GENERATE_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

function generateSuffix(): string {
  const bytes = randomBytes(5);
  let s = '';
  for (const b of bytes) s += GENERATE_ALPHABET[b % GENERATE_ALPHABET.length];
  return s;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObj(a) && isObj(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

/** Everything but metadata (and status, when it is a subresource): what bumps `generation`. */
function specPart(obj: Json, statusSub: boolean): Json {
  const { metadata: _m, apiVersion: _a, kind: _k, ...rest } = obj;
  if (statusSub) delete rest.status;
  return rest;
}

/** `summarizeData`: the first 30 bytes, ` ...` when longer. */
function summarize(raw: string): string {
  return raw.length > 30 ? `${raw.slice(0, 30)} ...` : raw;
}

export class ApiServer {
  readonly registry: Registry;
  readonly clock: SimClock;
  private readonly data = new Map<string, Map<string, Json>>();
  private rv = 1000;
  private readonly listeners = new Set<(e: WatchEvent) => void>();
  private readonly hooks: AdmissionHook[] = [];
  /** Recent events for watches that resume from a resourceVersion. */
  private readonly history: WatchEvent[] = [];
  private readonly historyLimit = 2000;

  constructor(registry: Registry, clock: SimClock) {
    this.registry = registry;
    this.clock = clock;
  }

  addAdmission(hook: AdmissionHook): void {
    this.hooks.push(hook);
  }

  onEvent(fn: (e: WatchEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  currentRv(): number {
    return this.rv;
  }

  /** Events after `rv`, or undefined when `rv` is older than the kept history (a watch then gets 410). */
  eventsSince(rv: number): WatchEvent[] | undefined {
    const first = this.history[0];
    if (first && rv < first.rv - 1 && this.history.length >= this.historyLimit) return undefined;
    return this.history.filter((e) => e.rv > rv);
  }

  private emit(type: WatchEvent['type'], def: ResourceDef, object: Json): void {
    const e: WatchEvent = { type, def, object, rv: Number(meta(object).resourceVersion) };
    this.history.push(e);
    if (this.history.length > this.historyLimit)
      this.history.splice(0, this.history.length - this.historyLimit);
    for (const l of this.listeners) l(e);
  }

  private bucket(def: ResourceDef): Map<string, Json> {
    const k = defKey(def.group, def.plural);
    let b = this.data.get(k);
    if (!b) {
      b = new Map();
      this.data.set(k, b);
    }
    return b;
  }

  private nextRv(): string {
    this.rv += 1;
    return String(this.rv);
  }

  private now(): string {
    return rfc3339(this.clock.stamp());
  }

  // -------------------------------------------------------------------------------------------
  // reads (stored objects are never handed out: callers get copies)

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

  /**
   * The object as served at `version`. Stored objects are never changed in place (every write
   * stores a new object), so callers get them as they are: read-only, to serialise or copy.
   */
  private view(def: ResourceDef, version: string, o: Json): Json {
    const av = apiVersionOf(def.group, version);
    return o.apiVersion === av ? o : { ...o, apiVersion: av };
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
    const entries = [...this.bucket(def).entries()]
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
    const listMeta: Json = { resourceVersion: String(this.rv) };
    if (limit && matched.length > limit) {
      const last = page[page.length - 1]![0];
      listMeta.continue = Buffer.from(
        JSON.stringify({ v: 'meta.k8s.io/v1', rv: this.rv, start: `${last}\u0000` }),
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

  // -------------------------------------------------------------------------------------------
  // decode-level checks shared by create and update

  private decode(def: ResourceDef, version: string, input: unknown, opts: WriteOptions): Json {
    const raw = opts.raw ?? JSON.stringify(input);
    if (!isObj(input)) {
      const body = input;
      const what = Array.isArray(body) ? 'array' : body === null ? 'null' : typeof body;
      throw badRequest(
        `the object provided is unrecognized (must be of type ${def.kind}): couldn't get version/kind; json parse error: json: cannot unmarshal ${what} into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" } (${Buffer.from(summarize(raw)).toString('hex')})`,
      );
    }
    let body: Json = input;
    if (def.builtin && def.builtin !== 'customresourcedefinitions') {
      // Typed (built-in) kinds take a missing apiVersion/kind from the request path.
      if (body.kind === undefined || body.kind === '') body = { ...body, kind: def.kind };
      if (body.apiVersion === undefined || body.apiVersion === '')
        body = { ...body, apiVersion: apiVersionOf(def.group, version) };
    }
    if (typeof body.kind !== 'string' || body.kind === '') {
      throw badRequest(
        `the object provided is unrecognized (must be of type ${def.kind}): Object 'Kind' is missing in '${raw}' (${summarize(raw)})`,
      );
    }
    const expected = apiVersionOf(def.group, version);
    if (body.apiVersion !== expected) {
      throw badRequest(
        `the API version in the data (${typeof body.apiVersion === 'string' ? body.apiVersion : ''}) does not match the expected API version (${expected})`,
      );
    }
    // HTTP bodies are ours already; anything else may share structure with stored objects.
    const obj = opts.owned ? body : structuredClone(body);
    if (!isObj(obj.metadata)) obj.metadata = {};
    else if (opts.owned) obj.metadata = { ...obj.metadata };
    tidyMeta(meta(obj));
    return obj;
  }

  /** Prune unknown fields per `fieldValidation` (Strict → 400, Warn → warnings, Ignore → silent). */
  private pruneFields(
    def: ResourceDef,
    version: string,
    obj: Json,
    opts: WriteOptions,
    patched?: Json,
  ): void {
    const schema = this.schemaOf(def, version);
    if (!schema) return;
    const unknown = prune(obj, schema);
    if (unknown.length === 0) return;
    const mode = opts.fieldValidation ?? 'Warn';
    const strictError = `strict decoding error: ${unknown.map((u) => `unknown field ${goQuote(u)}`).join(', ')}`;
    if (mode === 'Strict' && patched) {
      throw invalid('', '', '', [
        {
          type: 'FieldValueInvalid',
          field: 'patch',
          value: JSON.stringify(sortKeys(patched)),
          detail: strictError,
        },
      ]);
    }
    if (mode === 'Strict') {
      throw badRequest(
        `${def.kind} in version ${goQuote(version)} cannot be handled as a ${def.kind}: strict decoding error: ${unknown
          .map((u) => `unknown field ${goQuote(u)}`)
          .join(', ')}`,
      );
    }
    if (mode === 'Warn') for (const u of unknown) opts.warnings?.push(`unknown field ${goQuote(u)}`);
  }

  schemaOf(def: ResourceDef, version: string): Schema | undefined {
    return def.versions.find((v) => v.name === version)?.schema;
  }

  private statusSub(def: ResourceDef, version: string): boolean {
    return def.versions.find((v) => v.name === version)?.status ?? false;
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

  /** Schema + CEL + metadata + kind validation (the strategy's Validate / ValidateUpdate). */
  private validate(
    def: ResourceDef,
    version: string,
    obj: Json,
    old: Json | undefined,
    only?: 'status',
  ): void {
    const errs: FieldError[] = [];
    const m = meta(obj);
    if (!only) {
      if (obj.kind !== def.kind) {
        errs.push({
          type: 'FieldValueInvalid',
          field: 'kind',
          value: obj.kind,
          detail: `must be ${def.kind}`,
        });
      }
      errs.push(...objectMetaErrors(m, def.builtin === 'namespaces' ? 'label' : 'subdomain'));
      if (old) {
        const om = meta(old);
        if (m.namespace !== om.namespace) {
          errs.push({
            type: 'FieldValueInvalid',
            field: 'metadata.namespace',
            value: m.namespace ?? '',
            detail: 'field is immutable',
          });
        }
      }
    }
    if (def.builtin) errs.push(...builtinErrors(def, obj));
    const schema = this.schemaOf(def, version);
    if (schema) {
      errs.push(...validateSchema(obj, schema, only));
      if (hasBlockingErr(errs)) errs.push(CEL_BLOCKED);
      else errs.push(...validateCel(obj, old, schema, only));
    }
    if (errs.length > 0) {
      const kind = obj.kind === def.kind || typeof obj.kind !== 'string' ? def.kind : obj.kind;
      throw invalid(def.group, kind, String(m.name ?? ''), errs);
    }
  }

  private runMutating(
    op: Operation,
    def: ResourceDef,
    obj: Json,
    old: Json | undefined,
    opts: WriteOptions,
  ): void {
    if (opts.system) return;
    for (const h of this.hooks) h.mutate?.(op, def, obj, old);
  }

  private runValidating(
    op: Operation,
    def: ResourceDef,
    obj: Json,
    old: Json | undefined,
    opts: WriteOptions,
  ): void {
    if (opts.system) return;
    for (const h of this.hooks) h.validate?.(op, def, obj, old);
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
    const obj = this.decode(def, version, body, opts);
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
    this.pruneFields(def, version, obj, opts);
    this.checkNamespace(def, ns, name);

    // PrepareForCreate: server-owned metadata, and status is not writable through the main resource.
    const statusSub = this.statusSub(def, version);
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

    this.runMutating('CREATE', def, obj, undefined, opts);
    applyDefaults(obj, this.schemaOf(def, version));
    this.validate(def, version, obj, undefined);
    this.runValidating('CREATE', def, obj, undefined, opts);

    const key = objKey(def.namespaced ? ns : undefined, name);
    if (this.bucket(def).has(key)) throw alreadyExists(qr(def), name);
    if (opts.dryRun) return obj;
    return this.store(def, version, obj, 'ADDED');
  }

  /** Keep `obj` (the caller hands it over) as the new stored version. */
  private store(def: ResourceDef, version: string, obj: Json, type: 'ADDED' | 'MODIFIED'): Json {
    const stored = obj;
    stored.metadata = { ...meta(obj) };
    stored.apiVersion = apiVersionOf(def.group, def.storageVersion);
    meta(stored).resourceVersion = this.nextRv();
    this.bucket(def).set(
      objKey(def.namespaced ? (meta(stored).namespace as string) : undefined, meta(stored).name as string),
      stored,
    );
    if (def.builtin === 'customresourcedefinitions' && type === 'ADDED')
      this.registry.add(defFromCrd(stored));
    this.emit(type, def, stored);
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
    const obj = this.decode(def, version, body, opts);
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
    this.pruneFields(def, version, obj, opts);
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
    const statusSub = this.statusSub(def, version);
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
      this.runMutating('UPDATE', def, next, old, opts);
    }
    meta(next).resourceVersion = meta(old).resourceVersion;
    applyDefaults(next, this.schemaOf(def, version), subresource === 'status' ? 'status' : undefined);
    if (
      meta(old).generation !== undefined &&
      subresource !== 'status' &&
      !deepEqual(specPart(next, statusSub), specPart(old, statusSub))
    ) {
      meta(next).generation = Number(meta(old).generation ?? 1) + 1;
    }
    this.validate(def, version, next, old, subresource === 'status' ? 'status' : undefined);
    if (subresource !== 'status') this.runValidating('UPDATE', def, next, old, opts);
    if (opts.dryRun) return next;
    // A write that changes nothing is not a write: no new resourceVersion, no event.
    if (deepEqual(next, old)) return old;
    const nm = meta(next);
    if (nm.deletionTimestamp && (!Array.isArray(nm.finalizers) || nm.finalizers.length === 0)) {
      this.remove(def, current);
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
        obj: this.commitUpdate(
          def,
          version,
          current,
          this.decode(def, version, merged, opts),
          subresource,
          opts,
        ),
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
    const obj = this.decode(def, version, patched, { ...opts, raw: JSON.stringify(patched) });
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
    this.pruneFields(def, version, obj, opts, patchedCopy);
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
    const current = this.peek(def, ns, name);
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
      return { body: this.view(def, version, current), code: 200 };
    }

    if (def.builtin === 'namespaces') {
      const next: Json = { ...current, metadata: { ...meta(current) } };
      const nm = meta(next);
      if (!nm.deletionTimestamp) {
        nm.deletionTimestamp = this.now();
        next.status = { ...(next.status as Json), phase: 'Terminating' };
        nm.resourceVersion = this.nextRv();
        this.bucket(def).set(name, next);
        this.emit('MODIFIED', def, next);
        // The namespace controller takes a moment: meanwhile the namespace is Terminating.
        setTimeout(() => this.purgeNamespace(name), 500).unref();
      }
      return { body: this.view(def, version, next), code: 200 };
    }

    const finalizers = Array.isArray(m.finalizers) ? [...(m.finalizers as string[])] : [];
    if (policy === 'Foreground' && !finalizers.includes('foregroundDeletion'))
      finalizers.push('foregroundDeletion');
    if (policy === 'Orphan' && !finalizers.includes('orphan')) finalizers.push('orphan');
    if (finalizers.length > 0) {
      const obj = this.markDeleting(def, current, finalizers);
      setImmediate(() => this.collect(def, obj, policy));
      return { body: this.view(def, version, obj), code: 200 };
    }
    this.remove(def, current);
    return { body: success(qr(def), name, String(m.uid)), code: 200 };
  }

  private markDeleting(def: ResourceDef, current: Json, finalizers: string[]): Json {
    const next = { ...current, metadata: { ...meta(current) } };
    const m = meta(next);
    if (!m.deletionTimestamp) {
      m.deletionTimestamp = this.now();
      m.deletionGracePeriodSeconds = 0;
      m.generation = Number(m.generation ?? 1) + 1;
    }
    m.finalizers = finalizers;
    m.resourceVersion = this.nextRv();
    this.bucket(def).set(
      objKey(def.namespaced ? (m.namespace as string) : undefined, m.name as string),
      next,
    );
    this.emit('MODIFIED', def, next);
    return next;
  }

  private removeFinalizer(def: ResourceDef, obj: Json, finalizer: string): void {
    const cur = this.peek(def, meta(obj).namespace as string | undefined, meta(obj).name as string);
    if (!cur || meta(cur).uid !== meta(obj).uid) return;
    const rest = ((meta(cur).finalizers as string[] | undefined) ?? []).filter((f) => f !== finalizer);
    if (rest.length === 0) this.remove(def, cur);
    else this.markDeleting(def, cur, rest);
  }

  /** Drop the object, then garbage-collect its dependents (background propagation). */
  private remove(def: ResourceDef, current: Json): void {
    const m = meta(current);
    this.bucket(def).delete(objKey(def.namespaced ? (m.namespace as string) : undefined, m.name as string));
    const gone = { ...current, metadata: { ...m, resourceVersion: this.nextRv() } };
    if (def.builtin === 'customresourcedefinitions') {
      const spec = current.spec as Json;
      const names = spec.names as Json;
      const target = this.registry.get(String(spec.group), String(names.plural));
      if (target) this.data.delete(defKey(target.group, target.plural));
      this.registry.remove(String(spec.group), String(names.plural));
    }
    this.emit('DELETED', def, gone);
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
      for (const o of this.bucket(def).values()) {
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
      const alive = refs.some((r) => this.findByUid(String(r.uid)) !== undefined);
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
      for (const o of [...this.bucket(def).values()]) {
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
    const left = this.registry.all().some((d) => d.namespaced && this.peekAll(d, ns).length > 0);
    if (left) {
      setTimeout(() => this.purgeNamespace(ns), 50).unref();
      return;
    }
    const n = this.peek(nsDef, undefined, ns);
    if (n) this.remove(nsDef, n);
  }

  deleteCollection(
    def: ResourceDef,
    version: string,
    ns: string | undefined,
    opts: ListOptions,
    del: DeleteOptions,
  ): Json {
    const listed = this.list(def, version, ns, {
      labelSelector: opts.labelSelector,
      fieldSelector: opts.fieldSelector,
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

/** Empty maps and lists in ObjectMeta vanish (they are `omitempty` in the real server's types). */
function tidyMeta(m: Json): void {
  for (const k of ['labels', 'annotations'])
    if (isObj(m[k]) && Object.keys(m[k] as Json).length === 0) delete m[k];
  for (const k of ['finalizers', 'ownerReferences', 'managedFields'])
    if (Array.isArray(m[k]) && (m[k] as unknown[]).length === 0) delete m[k];
}

function prepareBuiltinCreate(def: ResourceDef, obj: Json, now: string): void {
  const m = meta(obj);
  if (def.builtin === 'namespaces') {
    m.labels = { ...((m.labels as Json | undefined) ?? {}), 'kubernetes.io/metadata.name': m.name };
    obj.spec = { finalizers: ['kubernetes'] };
    obj.status = { phase: 'Active' };
  } else if (def.builtin === 'pods') {
    // The pod strategy's PrepareForCreate: a new pod is Pending (the simulated controllers create
    // theirs with the status they need, see pods.ts).
    if (!isObj(obj.status)) obj.status = { phase: 'Pending', qosClass: 'BestEffort' };
  } else if (def.builtin === 'events') {
    obj.source ??= {};
    obj.firstTimestamp ??= null;
    obj.lastTimestamp ??= null;
    obj.eventTime ??= null;
    obj.reportingComponent ??= '';
    obj.reportingInstance ??= '';
    if (!isObj(obj.involvedObject)) obj.involvedObject = {};
  } else if (def.builtin === 'customresourcedefinitions') {
    const spec = obj.spec as Json;
    const names = isObj(spec?.names) ? spec.names : {};
    const versions = Array.isArray(spec?.versions) ? (spec.versions as Json[]) : [];
    obj.status = {
      acceptedNames: names,
      conditions: [
        {
          type: 'NamesAccepted',
          status: 'True',
          lastTransitionTime: now,
          reason: 'NoConflicts',
          message: 'no conflicts found',
        },
        {
          type: 'Established',
          status: 'True',
          lastTransitionTime: now,
          reason: 'InitialNamesAccepted',
          message: 'the initial names have been accepted',
        },
      ],
      storedVersions: versions.filter((v) => v.storage === true).map((v) => String(v.name)),
    };
  }
}

function builtinErrors(def: ResourceDef, obj: Json): FieldError[] {
  const errs: FieldError[] = [];
  if (def.builtin === 'events') {
    const io = obj.involvedObject as Json;
    const ns = meta(obj).namespace;
    if (io.namespace !== undefined && io.namespace !== ns) {
      errs.push({
        type: 'FieldValueInvalid',
        field: 'involvedObject.namespace',
        value: io.namespace,
        detail: 'does not match event.namespace',
      });
    }
  }
  if (def.builtin === 'customresourcedefinitions') {
    const spec = obj.spec;
    if (
      !isObj(spec) ||
      typeof spec.group !== 'string' ||
      !isObj(spec.names) ||
      !Array.isArray(spec.versions)
    ) {
      errs.push({ type: 'FieldValueRequired', field: 'spec', value: '', detail: '' });
    } else if (meta(obj).name !== `${String(spec.names.plural)}.${spec.group}`) {
      errs.push({
        type: 'FieldValueInvalid',
        field: 'metadata.name',
        value: meta(obj).name,
        detail: `must be spec.names.plural+"."+spec.group`,
      });
    }
  }
  return errs;
}
