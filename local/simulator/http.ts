import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Json } from '../../lib/json.ts';
import type { ApiServer, FieldValidation } from './apiserver.ts';
import { discovery } from './discovery.ts';
import {
  ApiError,
  badRequest,
  injectedFault,
  invalid,
  methodNotAllowed,
  notFound,
  pageNotFound,
  type StatusBody,
} from './errors.ts';
import { containerLogState, logBody, logContainer } from './logs.ts';
import { type Route, watch } from './watch.ts';
import { isTrue, readBody, readDeleteOptions, readObject, readPatch, send, sendError } from './wire.ts';

/**
 * The HTTP face of the simulator: Kubernetes REST paths, discovery documents, request decoding
 * (JSON or YAML), `Warning` headers, watch streams, fault injection and request statistics.
 * Admin calls under `/_sim/` are delegated to the caller.
 */

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
      const doc = discovery(this.deps.api.registry, this.deps.address(), seg);
      if (doc !== undefined) {
        this.count('get', 'discovery');
        if (method !== 'GET') throw methodNotAllowed('GET');
        return send(res, 200, doc);
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
    const writeOpts = writeOptions(method, q, warnings);

    if (r.name === undefined) return this.collection(method, r, q, resource, writeOpts, req, res);

    const name = r.name;
    switch (method) {
      case 'GET':
        this.count('get', resource);
        return send(res, 200, api.get(def, version, ns, name));
      case 'POST': {
        // The real server accepts a create on an item path and names the object from the body.
        this.count('create', resource);
        if (r.subresource) throw methodNotAllowed('GET, PUT, PATCH');
        const { value, raw } = await readObject(req, def);
        return send(res, 201, api.create(def, version, ns, value, { ...writeOpts, raw }), warnings);
      }
      case 'PUT': {
        this.count('update', resource);
        const { value, raw } = await readObject(req, def);
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
        const { ct, text, body } = await readPatch(req);
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
        const del = await readDeleteOptions(req, q);
        const out = api.delete(def, version, ns, name, del);
        return send(res, out.code, out.body);
      }
      default:
        throw methodNotAllowed('GET, PUT, PATCH, DELETE');
    }
  }

  /** A request on a collection: list or watch, create, delete a collection. */
  private async collection(
    method: string,
    r: Route,
    q: URLSearchParams,
    resource: string,
    writeOpts: WriteOptions,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const api = this.deps.api;
    const { def, version, namespace: ns } = r;
    const warnings = writeOpts.warnings;
    if (method === 'GET') {
      if (isTrue(q.get('watch'))) {
        this.count('watch', resource);
        return watch(api, this.watches, r, q, req, res);
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
      const { value, raw } = await readObject(req, def);
      const created = api.create(def, version, ns, value, { ...writeOpts, raw, owned: true });
      return send(res, 201, created, warnings);
    }
    if (method === 'DELETE') {
      this.count('deletecollection', resource);
      const del = await readDeleteOptions(req, q);
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
}

type WriteOptions = ReturnType<typeof writeOptions>;

/** A write's options from the query: dryRun, and fieldValidation (checked: a bad value is a 422). */
function writeOptions(method: string, q: URLSearchParams, warnings: string[]) {
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
  return { dryRun, warnings, ...(fieldValidation ? { fieldValidation } : {}) };
}
