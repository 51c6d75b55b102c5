import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import type { ApiServer, DeleteOptions, FieldValidation, Json, WatchEvent } from './apiserver.ts';
import {
  ApiError,
  badRequest,
  injectedFault,
  invalid,
  methodNotAllowed,
  notFound,
  pageNotFound,
  type StatusBody,
  unsupportedMediaType,
} from './errors.ts';
import { containerLogState, logBody, logContainer } from './logs.ts';
import { apiVersionOf, compareVersions, type ResourceDef, storageVersionHash } from './registry.ts';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.ts';

/**
 * The HTTP face of the simulator: Kubernetes REST paths, discovery documents, request decoding
 * (JSON or YAML), `Warning` headers, watch streams, fault injection and request statistics.
 * Admin calls under `/_sim/` are delegated to the caller.
 */

const MAX_BODY = 3 * 1024 * 1024;
const VERBS = ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'];

export interface Fault {
  /** Substring of the request path (pathname + query), or a RegExp tested against it. */
  path: string | RegExp;
  method?: string;
  /** 429, 500, 503 or 504. */
  status: number;
  /** How many matching requests fail (then the fault is used up). */
  times: number;
  retryAfterSeconds?: number;
}

export interface RequestStats {
  total: number;
  byVerb: Record<string, number>;
  byResource: Record<string, number>;
  byVerbResource: Record<string, number>;
  faultsServed: number;
}

export interface HttpDeps {
  api: ApiServer;
  version: Json;
  /** `/_sim/...` handler; resolve to a JSON body, or undefined for 404. */
  admin(method: string, path: string, body: unknown): Promise<unknown>;
  /** Address for `/api`'s serverAddressByClientCIDRs. */
  address(): string;
  /**
   * What a pod's container has printed (the simulated training script), oldest first; `last` asks
   * for the run before a crash. Without it every container's log is empty.
   */
  podLog?(pod: Json, container: string, last: boolean): string[];
}

interface Route {
  def: ResourceDef;
  version: string;
  namespace?: string;
  name?: string;
  subresource?: string;
}

export class HttpFront {
  readonly stats: RequestStats = {
    total: 0,
    byVerb: {},
    byResource: {},
    byVerbResource: {},
    faultsServed: 0,
  };
  private readonly faults: Array<Fault & { left: number }> = [];
  private readonly watches = new Set<() => void>();

  private readonly deps: HttpDeps;

  constructor(deps: HttpDeps) {
    this.deps = deps;
  }

  inject(fault: Fault): void {
    if (!(fault.times >= 1)) throw new RangeError('fault.times must be ≥ 1');
    this.faults.push({ ...fault, left: fault.times });
  }

  clearFaults(): void {
    this.faults.length = 0;
  }

  pendingFaults(): number {
    return this.faults.reduce((n, f) => n + f.left, 0);
  }

  /** End every open watch stream (on close). */
  endWatches(): void {
    for (const end of [...this.watches]) end();
  }

  private count(verb: string, resource: string): void {
    this.stats.total += 1;
    this.stats.byVerb[verb] = (this.stats.byVerb[verb] ?? 0) + 1;
    this.stats.byResource[resource] = (this.stats.byResource[resource] ?? 0) + 1;
    const k = `${verb} ${resource}`;
    this.stats.byVerbResource[k] = (this.stats.byVerbResource[k] ?? 0) + 1;
  }

  private takeFault(method: string, pathAndQuery: string): Fault | undefined {
    const i = this.faults.findIndex(
      (f) =>
        (!f.method || f.method.toUpperCase() === method) &&
        (typeof f.path === 'string' ? pathAndQuery.includes(f.path) : f.path.test(pathAndQuery)),
    );
    if (i < 0) return undefined;
    const f = this.faults[i]!;
    f.left -= 1;
    if (f.left <= 0) this.faults.splice(i, 1);
    this.stats.faultsServed += 1;
    return f;
  }

  handle = (req: IncomingMessage, res: ServerResponse): void => {
    this.serve(req, res).catch((e: unknown) => {
      if (!res.headersSent) {
        const status: StatusBody = {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: `an error on the server ("${String(e instanceof Error ? e.message : e).replace(/"/g, "'")}") has prevented the request from succeeding`,
          reason: 'InternalError',
          code: 500,
        };
        send(res, 500, status);
      } else res.destroy();
    });
  };

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = (req.method ?? 'GET').toUpperCase();
    const url = new URL(req.url ?? '/', 'http://sim');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const seg = path.split('/').filter(Boolean);

    if (seg[0] === '_sim') {
      const body = await readBody(req);
      let parsed: unknown;
      try {
        parsed = body.length ? JSON.parse(body) : undefined;
      } catch {
        return send(res, 400, { error: 'malformed JSON' });
      }
      try {
        const out = await this.deps.admin(method, `/${seg.slice(1).join('/')}`, parsed);
        if (out === undefined) return send(res, 404, { error: 'no such admin endpoint' });
        return send(res, 200, out);
      } catch (e) {
        return send(res, 400, { error: e instanceof Error ? e.message : String(e) });
      }
    }

    const fault = this.takeFault(method, url.pathname + url.search);
    if (fault) {
      this.count('fault', String(fault.status));
      await readBody(req);
      return sendError(res, injectedFault(fault.status, fault.retryAfterSeconds));
    }

    try {
      if (['healthz', 'livez', 'readyz'].includes(seg[0] ?? '') && method === 'GET') {
        this.count('get', 'healthz');
        res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' });
        res.end('ok');
        return;
      }
      if (seg[0] === 'version' && seg.length === 1) {
        this.count('get', 'version');
        return send(res, 200, this.deps.version);
      }
      const discovery = this.discovery(seg);
      if (discovery !== undefined) {
        this.count('get', 'discovery');
        if (method !== 'GET') throw methodNotAllowed('GET');
        return send(res, 200, discovery);
      }
      const route = this.route(seg);
      if (!route) throw pageNotFound();
      await this.dispatch(method, url, route, req, res);
    } catch (e) {
      if (e instanceof ApiError) return sendError(res, e);
      throw e;
    }
  }

  // -------------------------------------------------------------------------------------------
  // discovery

  private discovery(seg: string[]): Json | undefined {
    const reg = this.deps.api.registry;
    if (seg.length === 1 && seg[0] === 'api') {
      return {
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: this.deps.address() }],
      };
    }
    if (seg.length === 2 && seg[0] === 'api' && seg[1] === 'v1') {
      return { kind: 'APIResourceList', groupVersion: 'v1', resources: this.resourceList('', 'v1') };
    }
    if (seg.length === 1 && seg[0] === 'apis') {
      return {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: reg.groups().map((g) => groupDoc(g.name, g.versions, false)),
      };
    }
    if (seg.length === 2 && seg[0] === 'apis') {
      const g = reg.groups().find((x) => x.name === seg[1]);
      if (!g) return undefined;
      return groupDoc(g.name, g.versions, true);
    }
    if (seg.length === 3 && seg[0] === 'apis') {
      const defs = reg.servedAt(seg[1]!, seg[2]!);
      if (defs.length === 0) return undefined;
      return {
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: `${seg[1]}/${seg[2]}`,
        resources: this.resourceList(seg[1]!, seg[2]!),
      };
    }
    return undefined;
  }

  private resourceList(group: string, version: string): Json[] {
    const out: Json[] = [];
    const defs = this.deps.api.registry
      .servedAt(group, version)
      .sort((a, b) => a.plural.localeCompare(b.plural));
    for (const d of defs) {
      const r: Json = {
        name: d.plural,
        singularName: d.singular,
        namespaced: d.namespaced,
        kind: d.kind,
        verbs:
          d.builtin === 'namespaces'
            ? ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch']
            : VERBS,
      };
      if (d.shortNames.length) r.shortNames = d.shortNames;
      if (d.categories.length) r.categories = d.categories;
      r.storageVersionHash = storageVersionHash(d.group, d.storageVersion, d.kind);
      out.push(r);
      if (d.versions.find((v) => v.name === version)?.status) {
        out.push({
          name: `${d.plural}/status`,
          singularName: '',
          namespaced: d.namespaced,
          kind: d.kind,
          verbs: ['get', 'patch', 'update'],
        });
      }
    }
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // resource routes

  private route(seg: string[]): Route | undefined {
    let group: string;
    let version: string;
    let rest: string[];
    if (seg[0] === 'api' && seg[1] === 'v1') {
      group = '';
      version = 'v1';
      rest = seg.slice(2);
    } else if (seg[0] === 'apis' && seg.length >= 4) {
      group = seg[1]!;
      version = seg[2]!;
      rest = seg.slice(3);
    } else return undefined;
    const reg = this.deps.api.registry;
    if (rest[0] === 'namespaces' && rest.length >= 3) {
      const def = reg.lookup(group, version, rest[2]!);
      if (def?.namespaced && rest.length <= 5) {
        const r: Route = { def, version, namespace: rest[1]! };
        if (rest[3] !== undefined) r.name = rest[3];
        if (rest[4] !== undefined) r.subresource = rest[4];
        return r;
      }
    }
    const def = reg.lookup(group, version, rest[0]!);
    if (!def || rest.length > 3) return undefined;
    const r: Route = { def, version };
    if (rest[1] !== undefined) {
      if (def.namespaced) return undefined; // namespaced objects are only addressable inside their namespace
      r.name = rest[1];
    }
    if (rest[2] !== undefined) r.subresource = rest[2];
    return r;
  }

  private async dispatch(
    method: string,
    url: URL,
    r: Route,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const api = this.deps.api;
    const q = url.searchParams;
    const { def, version, namespace: ns } = r;
    if (r.subresource === 'log' && def.group === '' && def.plural === 'pods' && r.name !== undefined) {
      if (method !== 'GET') throw methodNotAllowed('GET');
      this.count('get', 'pods/log');
      return this.podLog(api.get(def, version, ns, r.name), q, res);
    }
    if (r.subresource !== undefined) {
      const known = r.subresource === 'status' && def.versions.find((v) => v.name === version)?.status;
      // The real server answers an unknown subresource of an object as if the object were missing.
      if (!known) throw notFound({ group: def.group, resource: def.plural }, r.name ?? '');
    }
    const resource = r.subresource ? `${def.plural}/${r.subresource}` : def.plural;
    const warnings: string[] = [];
    const dryRun = q.getAll('dryRun').includes('All');
    const fv = q.get('fieldValidation');
    if (fv !== null && fv !== '' && !['Strict', 'Warn', 'Ignore'].includes(fv)) {
      const options =
        method === 'POST' ? 'CreateOptions' : method === 'PATCH' ? 'PatchOptions' : 'UpdateOptions';
      throw invalid('meta.k8s.io', options, '', [
        {
          type: 'FieldValueNotSupported',
          field: 'fieldValidation',
          value: fv,
          detail: 'supported values: "", "Ignore", "Strict", "Warn"',
        },
      ]);
    }
    const fieldValidation = (fv || undefined) as FieldValidation | undefined;
    const writeOpts = { dryRun, warnings, ...(fieldValidation ? { fieldValidation } : {}) };

    if (r.name === undefined) {
      if (method === 'GET') {
        if (isTrue(q.get('watch'))) {
          this.count('watch', resource);
          return this.watch(r, q, req, res);
        }
        this.count('list', resource);
        const limit = q.get('limit');
        return send(
          res,
          200,
          api.list(def, version, ns, {
            labelSelector: q.get('labelSelector'),
            fieldSelector: q.get('fieldSelector'),
            ...(limit ? { limit: Number(limit) } : {}),
            continue: q.get('continue'),
          }),
        );
      }
      if (method === 'POST') {
        this.count('create', resource);
        if (def.namespaced && ns === undefined) throw methodNotAllowed('GET');
        const { value, raw } = await this.readObject(req, def);
        const created = api.create(def, version, ns, value, { ...writeOpts, raw, owned: true });
        return send(res, 201, created, warnings);
      }
      if (method === 'DELETE') {
        this.count('deletecollection', resource);
        const del = await this.deleteOptions(req, q);
        return send(
          res,
          200,
          api.deleteCollection(
            def,
            version,
            ns,
            { labelSelector: q.get('labelSelector'), fieldSelector: q.get('fieldSelector') },
            del,
          ),
        );
      }
      throw methodNotAllowed('GET, POST, DELETE');
    }

    const name = r.name;
    switch (method) {
      case 'GET':
        this.count('get', resource);
        return send(res, 200, api.get(def, version, ns, name));
      case 'POST': {
        // The real server accepts a create on an item path and names the object from the body.
        this.count('create', resource);
        if (r.subresource) throw methodNotAllowed('GET, PUT, PATCH');
        const { value, raw } = await this.readObject(req, def);
        return send(res, 201, api.create(def, version, ns, value, { ...writeOpts, raw }), warnings);
      }
      case 'PUT': {
        this.count('update', resource);
        const { value, raw } = await this.readObject(req, def);
        const sub = r.subresource === 'status' ? 'status' : undefined;
        return send(
          res,
          200,
          api.update(def, version, ns, name, value, sub, { ...writeOpts, raw, owned: true }),
          warnings,
        );
      }
      case 'PATCH': {
        this.count('patch', resource);
        const ct = req.headers['content-type'] ?? '';
        const text = await readBody(req);
        let body: unknown;
        const type = ct.split(';')[0]!.trim().toLowerCase();
        if (type === 'application/apply-patch+yaml') {
          try {
            body = parseYaml(text);
          } catch (e) {
            throw badRequest(`error decoding YAML: ${e instanceof Error ? e.message : String(e)}`);
          }
        } else if (
          [
            'application/json-patch+json',
            'application/merge-patch+json',
            'application/strategic-merge-patch+json',
          ].includes(type)
        ) {
          try {
            body = JSON.parse(text);
          } catch {
            throw badRequest(`error decoding patch: ${goJsonError(text)}`);
          }
        }
        const sub = r.subresource === 'status' ? 'status' : undefined;
        const { obj, created } = api.patch(def, version, ns, name, ct, body, sub, {
          ...writeOpts,
          raw: text,
          fieldManager: q.get('fieldManager'),
        });
        return send(res, created ? 201 : 200, obj, warnings);
      }
      case 'DELETE': {
        this.count('delete', resource);
        if (r.subresource) throw methodNotAllowed('GET, PUT, PATCH');
        const del = await this.deleteOptions(req, q);
        const out = api.delete(def, version, ns, name, del);
        return send(res, out.code, out.body);
      }
      default:
        throw methodNotAllowed('GET, PUT, PATCH, DELETE');
    }
  }

  /**
   * `pods/log` as the apiserver and the kubelet answer it: the container checked (LogLocation), an
   * unscheduled pod's log empty, a container that has not started a 400 with the kubelet's words,
   * `tailLines` the last lines, as text.
   */
  private podLog(pod: Json, q: URLSearchParams, res: ServerResponse): void {
    const name = String((pod.metadata as Json | undefined)?.name ?? '');
    const tail = q.get('tailLines');
    let tailLines: number | undefined;
    if (tail !== null && tail !== '') {
      if (!/^-?[0-9]+$/.test(tail))
        throw badRequest(`strconv.ParseInt: parsing ${JSON.stringify(tail)}: invalid syntax`);
      tailLines = Number(tail);
      if (tailLines < 0) {
        throw invalid('', 'PodLogOptions', name, [
          {
            type: 'FieldValueInvalid',
            field: 'tailLines',
            value: tailLines,
            detail: 'must be greater than or equal to 0',
          },
        ]);
      }
    }
    const container = logContainer(pod, q.get('container'));
    if (!(pod.spec as Json | undefined)?.nodeName) {
      // LogLocation gives no location: the real server answers an empty body without a Content-Type.
      res.writeHead(200, { 'Content-Length': '0' });
      res.end();
      return;
    }
    const state = containerLogState(pod, container);
    if (typeof state === 'object') throw badRequest(state.waiting);
    const text = logBody(this.deps.podLog?.(pod, container, state === 'last') ?? [], tailLines);
    res.writeHead(200, {
      'Content-Type': 'text/plain',
      'Content-Length': String(Buffer.byteLength(text)),
    });
    res.end(text);
  }

  private async readObject(req: IncomingMessage, def: ResourceDef): Promise<{ value: unknown; raw: string }> {
    const ct = (req.headers['content-type'] ?? 'application/json').split(';')[0]!.trim().toLowerCase();
    const raw = await readBody(req);
    const malformed = (detail: string) =>
      badRequest(
        `the object provided is unrecognized (must be of type ${def.kind}): couldn't get version/kind; json parse error: ${detail} (${summarize(raw)})`,
      );
    if (ct === 'application/json' || ct === '') {
      try {
        return { value: JSON.parse(raw), raw };
      } catch {
        throw malformed(goJsonError(raw));
      }
    }
    if (ct === 'application/yaml' || ct === 'application/x-yaml' || ct === 'text/yaml') {
      try {
        return { value: parseYaml(raw), raw };
      } catch (e) {
        throw malformed(`error converting YAML to JSON: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    throw unsupportedMediaType([
      'application/json',
      'application/yaml',
      'application/vnd.kubernetes.protobuf',
    ]);
  }

  private async deleteOptions(req: IncomingMessage, q: URLSearchParams): Promise<DeleteOptions> {
    const raw = await readBody(req);
    const out: DeleteOptions = {};
    let body: Json = {};
    if (raw.trim()) {
      try {
        const v = JSON.parse(raw) as unknown;
        if (v && typeof v === 'object' && !Array.isArray(v)) body = v as Json;
      } catch {
        throw badRequest('the body of the request could not be decoded as DeleteOptions');
      }
    }
    const policy = (body.propagationPolicy as string | undefined) ?? q.get('propagationPolicy') ?? undefined;
    if (policy !== undefined) {
      if (!['Background', 'Foreground', 'Orphan'].includes(policy)) {
        throw invalid('meta.k8s.io', 'DeleteOptions', '', [
          {
            type: 'FieldValueNotSupported',
            field: 'propagationPolicy',
            value: policy,
            detail: 'supported values: "Foreground", "Background", "Orphan", "nil"',
          },
        ]);
      }
      out.propagationPolicy = policy as DeleteOptions['propagationPolicy'];
    } else if (body.orphanDependents === true || q.get('orphanDependents') === 'true') {
      out.propagationPolicy = 'Orphan';
    }
    const pre = body.preconditions as Json | undefined;
    if (pre && typeof pre === 'object') {
      out.preconditions = {};
      if (typeof pre.uid === 'string') out.preconditions.uid = pre.uid;
      if (typeof pre.resourceVersion === 'string') out.preconditions.resourceVersion = pre.resourceVersion;
    }
    const dry = Array.isArray(body.dryRun) ? (body.dryRun as string[]) : q.getAll('dryRun');
    if (dry.includes('All')) out.dryRun = true;
    return out;
  }

  // -------------------------------------------------------------------------------------------
  // watch

  private watch(r: Route, q: URLSearchParams, req: IncomingMessage, res: ServerResponse): void {
    const api = this.deps.api;
    const labels = parseLabelSelector(q.get('labelSelector') ?? '');
    const fieldSel = q.get('fieldSelector');
    const fields = fieldSel ? parseFieldSelector(fieldSel, ['metadata.name', 'metadata.namespace']) : [];
    const av = apiVersionOf(r.def.group, r.version);
    const match = (e: WatchEvent) =>
      e.def === r.def &&
      (r.namespace === undefined || (e.object.metadata as Json).namespace === r.namespace) &&
      matchesLabels(labels, (e.object.metadata as Json).labels as Record<string, string> | undefined) &&
      matchesFields(fields, e.object);
    const rvParam = q.get('resourceVersion');
    let backlog: WatchEvent[];
    if (!rvParam || rvParam === '0') {
      backlog = api
        .peekAll(r.def, r.namespace)
        .map((o) => ({
          type: 'ADDED' as const,
          def: r.def,
          object: o,
          rv: Number((o.metadata as Json).resourceVersion),
        }))
        .filter(match);
    } else {
      const since = api.eventsSince(Number(rvParam));
      if (!since) {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
        res.end(
          `${JSON.stringify({
            type: 'ERROR',
            object: {
              kind: 'Status',
              apiVersion: 'v1',
              metadata: {},
              status: 'Failure',
              message: `too old resource version: ${rvParam} (${api.currentRv()})`,
              reason: 'Expired',
              code: 410,
            },
          })}\n`,
        );
        return;
      }
      backlog = since.filter(match);
    }
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders(); // the client's request resolves on the headers, before any event
    const write = (e: WatchEvent) => {
      const object = e.object.apiVersion === av ? e.object : { ...e.object, apiVersion: av };
      res.write(`${JSON.stringify({ type: e.type, object })}\n`);
    };
    for (const e of backlog) write(e);
    const off = api.onEvent((e) => {
      if (match(e)) write(e);
    });
    const timeout = Number(q.get('timeoutSeconds') ?? 0);
    let timer: NodeJS.Timeout | undefined;
    const end = () => {
      off();
      if (timer) clearTimeout(timer);
      this.watches.delete(end);
      if (!res.writableEnded) res.end();
    };
    this.watches.add(end);
    if (timeout > 0) timer = setTimeout(end, timeout * 1000);
    req.on('close', end);
  }
}

/** `summarizeData`: the first 30 bytes, ` ...` when longer. */
function summarize(raw: string): string {
  return raw.length > 30 ? `${raw.slice(0, 30)} ...` : raw;
}

/** Go's encoding/json wording for the common malformed bodies (the real server quotes it). */
function goJsonError(raw: string): string {
  const t = raw.trim();
  if (t === '') return 'unexpected end of JSON input';
  try {
    JSON.parse(t);
    return 'invalid JSON';
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    if (/Unexpected end of JSON input|Unterminated string/i.test(msg)) return 'unexpected end of JSON input';
    const tok = /Unexpected token '(.)'/.exec(msg);
    if (tok) return `invalid character '${tok[1]}' looking for beginning of value`;
    const pos = /at position (\d+)/.exec(msg);
    const ch = pos ? t[Number(pos[1])] : undefined;
    if (ch === undefined) return 'unexpected end of JSON input';
    if (/Expected property name/i.test(msg))
      return `invalid character '${ch}' looking for beginning of object key string`;
    if (/after JSON/i.test(msg)) return `invalid character '${ch}' after top-level value`;
    if (/after property value|after array element/i.test(msg))
      return `invalid character '${ch}' after object key:value pair`;
    return `invalid character '${ch}' looking for beginning of value`;
  }
}

function groupDoc(name: string, versions: string[], withKind: boolean): Json {
  const sorted = [...versions].sort(compareVersions);
  const doc: Json = {
    name,
    versions: sorted.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
    preferredVersion: { groupVersion: `${name}/${sorted[0]}`, version: sorted[0] },
  };
  return withKind ? { kind: 'APIGroup', apiVersion: 'v1', ...doc } : doc;
}

const isTrue = (v: string | null): boolean => v === 'true' || v === '1';

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(
          new ApiError(413, {
            kind: 'Status',
            apiVersion: 'v1',
            metadata: {},
            status: 'Failure',
            message: `Request entity too large: limit is ${MAX_BODY}`,
            reason: 'RequestEntityTooLarge',
            code: 413,
          }),
        );
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
  const text = JSON.stringify(body);
  const headers: Record<string, string | string[]> = {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(text)),
  };
  if (warnings.length > 0) headers.Warning = warnings.map((w) => `299 - ${JSON.stringify(w)}`);
  res.writeHead(code, headers);
  res.end(text);
}

function sendError(res: ServerResponse, e: ApiError): void {
  if (typeof e.body === 'string') {
    res.writeHead(e.code, {
      'Content-Type': 'text/plain; charset=utf-8',
      'X-Content-Type-Options': 'nosniff',
      ...e.headers,
    });
    res.end(e.body);
    return;
  }
  const text = JSON.stringify(e.body);
  res.writeHead(e.code, {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(text)),
    ...e.headers,
  });
  res.end(text);
}
