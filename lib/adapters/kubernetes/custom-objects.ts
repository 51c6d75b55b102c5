import { ApiException } from '@kubernetes/client-node/dist/gen/apis/exception.js';

/**
 * The part of the Kubernetes custom-objects REST API the gateway calls, written out: the same paths,
 * query parameters, headers and outcomes as @kubernetes/client-node 2.x's generated
 * `CustomObjectsApi` (object-parameter style), without its `ObjectSerializer`, which imports every
 * model class of the Kubernetes API (≈ 440 KB minified, parsed at every cold start) to deserialize
 * bodies that are `any` here. Failures are client-node's `ApiException` (`code`, `body`, `headers`:
 * 401 without a body, other non-2xx statuses with the raw response text), so errors.ts translates
 * them as before.
 */

/** One HTTP exchange with the API server; the transport adds TLS material and credentials. */
export interface KubeHttpRequest {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  url: URL;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
}

export interface KubeHttpResponse {
  status: number;
  /** Lower-case header names. */
  headers: Record<string, string>;
  body: Buffer;
}

export type KubeHttp = (request: KubeHttpRequest) => Promise<KubeHttpResponse>;

/**
 * A streamed exchange (a watch): each line of a 2xx body goes to `onLine` until it answers 'stop'
 * or the response ends; `maxMs` bounds the stream. `stopped` says which.
 */
export type KubeLines = (
  request: KubeHttpRequest,
  onLine: (line: string) => 'stop' | undefined,
  maxMs: number,
) => Promise<KubeHttpResponse & { stopped: boolean }>;

/** Per-call options: the caller's signal, and the Content-Type of a body when not the default. */
export interface KubeCallOptions {
  signal?: AbortSignal;
  contentType?: string;
}

interface GroupVersion {
  group: string;
  version: string;
}
interface Resource extends GroupVersion {
  plural: string;
}
interface Named extends Resource {
  name: string;
}
interface Namespaced extends Resource {
  namespace: string;
}
interface ListParams {
  labelSelector?: string;
  limit?: number;
  _continue?: string;
}

/** A resource of an API group/version as discovery lists it. */
export interface ApiResource {
  name: string;
  kind: string;
  namespaced?: boolean;
  [key: string]: unknown;
}

const ACCEPT = 'application/json, */*;q=0.8';
const JSON_TYPE = 'application/json';
/** client-node's preferred patch type (a JSON patch); the gateway's merge patches override it. */
const PATCH_TYPE = 'application/json-patch+json';

type Query = Record<string, string | number | boolean | undefined>;

const seg = (v: string) => encodeURIComponent(v);
const gv = (p: GroupVersion) => `/apis/${seg(p.group)}/${seg(p.version)}`;

function listQuery(p: ListParams): Query {
  return { continue: p._continue, labelSelector: p.labelSelector, limit: p.limit };
}

/** `type/subtype` in lower case without parameters, as client-node normalises it. */
function mediaType(contentType: string | undefined): string | undefined {
  return contentType === undefined ? undefined : (contentType.split(';')[0] ?? '').trim().toLowerCase();
}

/** A 2xx body: JSON for `application/…json…`, text for `text/…`, as client-node's ObjectSerializer.parse. */
function parseBody(text: string, contentType: string | undefined): unknown {
  const type = mediaType(contentType);
  if (type === undefined) throw new Error('Cannot parse content. No Content-Type defined.');
  const [major = '', subtype = ''] = type.split('/');
  if (major === 'text') return text;
  if (major === 'application' && subtype.split('+').includes('json')) return JSON.parse(text);
  throw new Error(`The mediaType ${type} is not supported by ObjectSerializer.parse.`);
}

export function makeCustomObjectsApi(server: string, http: KubeHttp & { lines?: KubeLines }) {
  const base = server.replace(/\/+$/, '');

  async function call(
    method: KubeHttpRequest['method'],
    path: string,
    query: Query,
    opts: KubeCallOptions | undefined,
    body?: { value: unknown; contentType: string },
    asText = false,
  ): Promise<unknown> {
    const url = new URL(base + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { Accept: ACCEPT };
    let text: string | undefined;
    if (body) {
      headers['Content-Type'] = opts?.contentType ?? body.contentType;
      text = body.value === undefined ? undefined : JSON.stringify(body.value);
    }
    const res = await http({
      method,
      url,
      headers,
      ...(text === undefined ? {} : { body: text }),
      ...(opts?.signal ? { signal: opts.signal } : {}),
    });
    if (res.status >= 200 && res.status <= 299) {
      // A log is text whatever the header says: an unscheduled pod's empty log comes with none.
      if (asText) return res.body.toString('utf8');
      return parseBody(res.body.toString('utf8'), res.headers['content-type']);
    }
    if (res.status === 401) throw new ApiException(res.status, 'Unauthorized', undefined, res.headers);
    throw new ApiException(res.status, 'Unknown API Status Code!', res.body.toString('utf8'), res.headers);
  }

  const objectPath = (p: Named & { namespace?: string }) =>
    `${gv(p)}${p.namespace === undefined ? '' : `/namespaces/${seg(p.namespace)}`}/${seg(p.plural)}/${seg(p.name)}`;

  return {
    /** GET /apis/{group}/{version}: the resources the group/version serves. */
    getAPIResources: async (p: GroupVersion, opts?: KubeCallOptions) =>
      (await call('GET', gv(p), {}, opts)) as { resources?: ApiResource[] } | undefined,

    getClusterCustomObject: (p: Named, opts?: KubeCallOptions) => call('GET', objectPath(p), {}, opts),

    /** GET a namespaced object's subresource, e.g. a LocalQueue's `pendingworkloads` (visibility API). */
    getNamespacedSubresource: (
      p: Named & { namespace: string; subresource: string; query?: Query },
      opts?: KubeCallOptions,
    ) => call('GET', `${objectPath(p)}/${seg(p.subresource)}`, p.query ?? {}, opts),

    getNamespacedCustomObject: (p: Named & { namespace: string }, opts?: KubeCallOptions) =>
      call('GET', objectPath(p), {}, opts),

    createNamespacedCustomObject: (
      p: Namespaced & { body: unknown; fieldManager?: string; fieldValidation?: string },
      opts?: KubeCallOptions,
    ) =>
      call(
        'POST',
        `${gv(p)}/namespaces/${seg(p.namespace)}/${seg(p.plural)}`,
        { fieldManager: p.fieldManager, fieldValidation: p.fieldValidation },
        opts,
        { value: p.body, contentType: JSON_TYPE },
      ),

    patchNamespacedCustomObject: (
      p: Named & { namespace: string; body: unknown; fieldManager?: string },
      opts?: KubeCallOptions,
    ) =>
      call('PATCH', objectPath(p), { fieldManager: p.fieldManager }, opts, {
        value: p.body,
        contentType: PATCH_TYPE,
      }),

    /** DELETE with client-node's Content-Type and no body (no DeleteOptions object). */
    deleteNamespacedCustomObject: (
      p: Named & { namespace: string; propagationPolicy?: string },
      opts?: KubeCallOptions,
    ) =>
      call('DELETE', objectPath(p), { propagationPolicy: p.propagationPolicy }, opts, {
        value: undefined,
        contentType: JSON_TYPE,
      }),

    listClusterCustomObject: (p: Resource & ListParams, opts?: KubeCallOptions) =>
      call('GET', `${gv(p)}/${seg(p.plural)}`, listQuery(p), opts) as Promise<KubeList>,

    listNamespacedCustomObject: (p: Namespaced & ListParams, opts?: KubeCallOptions) =>
      call(
        'GET',
        `${gv(p)}/namespaces/${seg(p.namespace)}/${seg(p.plural)}`,
        listQuery(p),
        opts,
      ) as Promise<KubeList>,

    /** GET /api/v1/pods: the core API's pods across namespaces (CoreV1Api.listPodForAllNamespaces). */
    listPodForAllNamespaces: (p: ListParams, opts?: KubeCallOptions) =>
      call('GET', '/api/v1/pods', listQuery(p), opts) as Promise<KubeList>,

    /** GET /api/v1/namespaces/{ns}/events (CoreV1Api.listNamespacedEvent). */
    listNamespacedEvent: (
      p: ListParams & { namespace: string; fieldSelector?: string },
      opts?: KubeCallOptions,
    ) =>
      call(
        'GET',
        `/api/v1/namespaces/${seg(p.namespace)}/events`,
        { ...listQuery(p), fieldSelector: p.fieldSelector },
        opts,
      ) as Promise<KubeList>,

    /** POST /api/v1/namespaces/{ns}/events (CoreV1Api.createNamespacedEvent). */
    createNamespacedEvent: (p: { namespace: string; body: unknown }, opts?: KubeCallOptions) =>
      call('POST', `/api/v1/namespaces/${seg(p.namespace)}/events`, {}, opts, {
        value: p.body,
        contentType: JSON_TYPE,
      }),

    /** GET /api/v1/namespaces/{ns}/pods/{name}/log: text (CoreV1Api.readNamespacedPodLog). */
    readNamespacedPodLog: async (
      p: { name: string; namespace: string; container?: string; tailLines?: number },
      opts?: KubeCallOptions,
    ) => {
      const body = await call(
        'GET',
        `/api/v1/namespaces/${seg(p.namespace)}/pods/${seg(p.name)}/log`,
        { container: p.container, tailLines: p.tailLines },
        opts,
        undefined,
        true,
      );
      return body as string;
    },

    listCustomObjectForAllNamespaces: (
      p: GroupVersion & { resourcePlural: string } & ListParams,
      opts?: KubeCallOptions,
    ) => call('GET', `${gv(p)}/${seg(p.resourcePlural)}`, listQuery(p), opts) as Promise<KubeList>,

    /**
     * GET …?watch=1 across namespaces from `resourceVersion` (the list's), for at most
     * `timeoutSeconds`: each event goes to `onEvent` until it answers 'stop'. Resolves how the
     * stream ended; a non-2xx answer is an ApiException, as for the other calls.
     */
    watchCustomObjectForAllNamespaces: async (
      p: GroupVersion & {
        resourcePlural: string;
        labelSelector?: string;
        resourceVersion?: string;
        timeoutSeconds: number;
      },
      onEvent: (event: WatchEvent) => 'stop' | undefined,
      opts?: KubeCallOptions,
    ): Promise<'stopped' | 'ended'> => {
      if (!http.lines) throw new Error('this transport cannot stream a watch');
      const url = new URL(`${base}${gv(p)}/${seg(p.resourcePlural)}`);
      const query: Query = {
        watch: 1,
        allowWatchBookmarks: false,
        labelSelector: p.labelSelector,
        resourceVersion: p.resourceVersion,
        timeoutSeconds: p.timeoutSeconds,
      };
      for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
      const res = await http.lines(
        {
          method: 'GET',
          url,
          headers: { Accept: 'application/json' },
          ...(opts?.signal ? { signal: opts.signal } : {}),
        },
        (line) => onEvent(JSON.parse(line) as WatchEvent),
        // The server ends the stream at timeoutSeconds; a little more in case it does not.
        p.timeoutSeconds * 1000 + 5000,
      );
      if (res.status === 0 || (res.status >= 200 && res.status <= 299))
        return res.stopped ? 'stopped' : 'ended';
      if (res.status === 401) throw new ApiException(res.status, 'Unauthorized', undefined, res.headers);
      throw new ApiException(res.status, 'Unknown API Status Code!', res.body.toString('utf8'), res.headers);
    },
  };
}

/** A list response: items, the continue token of the next page and the list's resourceVersion. */
export interface KubeList {
  items?: unknown;
  metadata?: { continue?: string; resourceVersion?: string };
}

/** One event of a watch stream (ERROR carries a Status, e.g. 410 Expired). */
export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Record<string, unknown>;
}

export type CustomObjectsApi = ReturnType<typeof makeCustomObjectsApi>;
