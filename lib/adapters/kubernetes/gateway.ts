import type { Agent } from 'node:http';
import type { RequestOptions } from 'node:https';
import { ClusterUnavailableError, JobNameConflictError, NotFoundError } from '../../errors.ts';
import type { CallOptions, ClusterCapabilities, ClusterGateway, JobApi } from '../../ports.ts';
import {
  type DiscoveredGroupVersion,
  detectFromDiscovery,
  detectTrainerShape,
} from '../../trainjob/capabilities.ts';
import { jobKindInfo } from '../../trainjob/kinds.ts';
import { LABEL, MANAGED_SELECTOR } from '../../trainjob/labels.ts';
import {
  type K8sObject,
  LEGACY_GROUP,
  LEGACY_VERSION,
  TRAINER_GROUP,
  TRAINER_VERSION,
} from '../../trainjob/types.ts';
import {
  type CustomObjectsApi,
  type KubeCallOptions,
  type KubeHttp,
  type KubeHttpRequest,
  type KubeHttpResponse,
  makeCustomObjectsApi,
} from './custom-objects.ts';
import { httpStatusOf, kubeCall, toGantryError } from './errors.ts';

/**
 * ClusterGateway on the Kubernetes custom-objects REST API (custom-objects.ts: the calls of
 * @kubernetes/client-node 2.x's CustomObjectsApi, without its model classes) over a small node:https
 * transport. Why not client-node's own transport: it imports undici (≈0.7 MB minified, most of the
 * cold start of a bundle) and builds a new undici Agent — a new TCP + TLS connection — for every
 * request. This transport keeps one keep-alive agent per gateway, built from the TLS material of the
 * first call (see bench/results/gateway-coldstart.md and function-bundles.md).
 *
 * Cancellation: every call takes the caller's signal; the transport aborts the request with it, or
 * after `fetchTimeoutMs`, whichever comes first.
 */

/**
 * What the gateway needs from a KubeConfig. A @kubernetes/client-node `KubeConfig` satisfies it (its
 * `applyToHTTPSOptions` adds TLS material, the bearer token / exec / client-cert credentials and
 * `Impersonate-User`); so does the EKS connection from eks-connection.ts, without loading client-node's
 * config module.
 */
export interface KubeConnection {
  getCurrentCluster(): { server: string; proxyUrl?: string } | null;
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
}

export interface KubernetesGatewayDeps {
  /**
   * The connection, or a factory called on first use with that call's options, e.g.
   * `(opts) => eksKubeConfig({ clusterName, region, eks }, opts)` (a failed factory is retried next call).
   */
  kubeConfig: KubeConnection | ((opts?: CallOptions) => KubeConnection | Promise<KubeConnection>);
  /** Upper bound of one HTTP call, on top of the caller's signal. Default 30 000 ms. */
  fetchTimeoutMs?: number;
  /** `fieldManager` of Gantry's writes. Default `gantry`. */
  fieldManager?: string;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const LIST_PAGE = 500;

const CRD_API = { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions' };
const TRAINJOB_CRD = `trainjobs.${TRAINER_GROUP}`;
const KUEUE_GROUP = 'kueue.x-k8s.io';
/** Newest first: v1beta2 is Kueue's storage version from v0.16; v1beta1 is still served, deprecated. */
const KUEUE_VERSIONS = ['v1beta2', 'v1beta1'] as const;
const KUEUE_JOB_UID = 'kueue.x-k8s.io/job-uid';
const COSCHEDULING = {
  group: 'scheduling.x-k8s.io',
  version: 'v1alpha1',
  plural: 'podgroups',
  kind: 'PodGroup',
};
const VOLCANO = { group: 'scheduling.volcano.sh', version: 'v1beta1', plural: 'podgroups', kind: 'PodGroup' };
/** API groups of the jobs Gantry creates: an admission gate owned by one of these kinds may be Gantry's. */
const JOB_GROUPS = new Set([TRAINER_GROUP, LEGACY_GROUP]);

interface ResourceApi {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

/** What discovery found, beyond the public capabilities: which versions to call. */
interface Discovered {
  caps: ClusterCapabilities;
  workloads?: ResourceApi;
  podGroups: ResourceApi[];
}

/** The REST resource of a job object (all Trainer / Training Operator kinds pluralise as `<kind>s`). */
export function jobApiOf(job: Pick<K8sObject, 'apiVersion' | 'kind'>): JobApi {
  const slash = job.apiVersion.indexOf('/');
  if (slash < 0) throw new Error(`job apiVersion ${job.apiVersion} has no group`);
  return {
    group: job.apiVersion.slice(0, slash),
    version: job.apiVersion.slice(slash + 1),
    plural: jobKindInfo(job.kind)?.plural ?? `${job.kind.toLowerCase()}s`,
    kind: job.kind,
  };
}

/** node:https / node:http transport with TLS and credentials from the KubeConnection, one keep-alive agent. */
function makeTransport(conn: KubeConnection, timeoutMs: number): KubeHttp {
  let agent: Agent | undefined;

  async function agentFor(url: URL, tls: RequestOptions): Promise<Agent | undefined> {
    if (tls.agent && conn.getCurrentCluster()?.proxyUrl) return tls.agent as Agent; // KubeConfig's proxy agent
    if (agent) return agent;
    if (url.protocol === 'http:') {
      const http = await import('node:http');
      agent = new http.Agent({ keepAlive: true });
    } else {
      const https = await import('node:https');
      agent = new https.Agent({
        keepAlive: true,
        ca: tls.ca,
        cert: tls.cert,
        key: tls.key,
        pfx: tls.pfx,
        passphrase: tls.passphrase,
        servername: tls.servername,
        ...(tls.rejectUnauthorized === undefined ? {} : { rejectUnauthorized: tls.rejectUnauthorized }),
      });
    }
    return agent;
  }

  return async function send(request: KubeHttpRequest): Promise<KubeHttpResponse> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const caller = request.signal;
    const signal = caller ? AbortSignal.any([caller, timeout]) : timeout;
    signal.throwIfAborted();
    const { url, body } = request;
    const tls: RequestOptions = {};
    await conn.applyToHTTPSOptions(tls); // credentials per call: tokens expire and are refreshed
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(tls.headers ?? {})) if (v !== undefined) headers[k] = String(v);
    Object.assign(headers, request.headers);
    if (body !== undefined) headers['Content-Length'] = String(Buffer.byteLength(body));
    const mod = url.protocol === 'http:' ? await import('node:http') : await import('node:https');
    const useAgent = await agentFor(url, tls);
    return new Promise<KubeHttpResponse>((resolve, reject) => {
      const req = mod.request(
        url,
        { method: request.method, headers, agent: useAgent, signal, auth: tls.auth ?? undefined },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('close', () => {
            if (!res.complete)
              reject(signal.reason ?? new Error('connection closed before the response ended'));
          });
          res.on('end', () => {
            const out: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers)) {
              if (v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
            }
            resolve({ status: res.statusCode ?? 0, headers: out, body: Buffer.concat(chunks) });
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  };
}

/** Per-call client options: the caller's signal, and optionally a Content-Type (merge patch). */
function callOptions(opts: CallOptions | undefined, contentType?: string): KubeCallOptions {
  return { ...(opts?.signal ? { signal: opts.signal } : {}), ...(contentType ? { contentType } : {}) };
}

function withTypeMeta(items: unknown, apiVersion: string, kind: string): K8sObject[] {
  return ((items as K8sObject[] | undefined) ?? []).map((o) => ({
    ...o,
    apiVersion: o.apiVersion ?? apiVersion,
    kind: o.kind ?? kind,
  }));
}

function ownedByJobKind(o: K8sObject): boolean {
  return (o.metadata.ownerReferences ?? []).some((r) => JOB_GROUPS.has(r.apiVersion.split('/')[0] ?? ''));
}

function ownedBy(o: K8sObject, uid: string): boolean {
  return (o.metadata.ownerReferences ?? []).some((r) => r.uid === uid);
}

const name = (api: { group: string; plural: string }) => `${api.plural}.${api.group}`;
const at = (ns: string, n: string) => `${ns}/${n}`;

export function makeKubernetesGateway(deps: KubernetesGatewayDeps): ClusterGateway {
  const timeoutMs = deps.fetchTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  const fieldManager = deps.fieldManager ?? 'gantry';
  let client: Promise<CustomObjectsApi> | undefined;
  let discovered: Promise<Discovered> | undefined;

  function api(opts?: CallOptions): Promise<CustomObjectsApi> {
    client ??= (async () => {
      const conn = typeof deps.kubeConfig === 'function' ? await deps.kubeConfig(opts) : deps.kubeConfig;
      const cluster = conn.getCurrentCluster();
      if (!cluster) throw new Error('kubeconfig has no current cluster');
      return makeCustomObjectsApi(cluster.server, makeTransport(conn, timeoutMs));
    })().catch((err: unknown) => {
      client = undefined;
      throw err;
    });
    return client;
  }

  /** GET that answers undefined on 404. */
  async function getOrUndefined<T>(what: string, call: () => Promise<T>): Promise<T | undefined> {
    try {
      return await kubeCall(what, call);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  async function listAll(
    what: string,
    page: (cont: string | undefined) => Promise<{ items?: unknown; metadata?: { continue?: string } }>,
    apiVersion: string,
    kind: string,
  ): Promise<K8sObject[]> {
    const out: K8sObject[] = [];
    let cont: string | undefined;
    do {
      const res = await kubeCall(what, () => page(cont));
      out.push(...withTypeMeta(res.items, apiVersion, kind));
      cont = res.metadata?.continue || undefined;
    } while (cont);
    return out;
  }

  /** The resources one group/version serves (undefined when the cluster does not serve it). */
  async function served(group: string, version: string, opts?: CallOptions) {
    const c = await api(opts);
    const list = await getOrUndefined(`discover ${group}/${version}`, () =>
      c.getAPIResources({ group, version }, callOptions(opts)),
    );
    return list?.resources?.filter((r) => !r.name.includes('/'));
  }

  async function discover(opts?: CallOptions): Promise<Discovered> {
    const c = await api(opts);
    const probe = async (group: string, version: string): Promise<DiscoveredGroupVersion | undefined> => {
      const resources = await served(group, version, opts);
      return resources && { groupVersion: `${group}/${version}`, resources };
    };
    const found = await Promise.all([
      probe(TRAINER_GROUP, TRAINER_VERSION),
      probe(LEGACY_GROUP, LEGACY_VERSION),
      probe(KUEUE_GROUP, KUEUE_VERSIONS[0]),
      probe(COSCHEDULING.group, COSCHEDULING.version),
      probe(VOLCANO.group, VOLCANO.version),
    ]);
    const servesWorkloads = (gv: DiscoveredGroupVersion | undefined) =>
      gv?.resources.some((r) => r.name === 'workloads');
    let workloadVersion: string | undefined = servesWorkloads(found[2]) ? KUEUE_VERSIONS[0] : undefined;
    if (!workloadVersion) {
      const older = await probe(KUEUE_GROUP, KUEUE_VERSIONS[1]);
      if (servesWorkloads(older)) {
        workloadVersion = KUEUE_VERSIONS[1];
        found.push(older);
      }
    }
    const served_ = detectFromDiscovery(found.filter((gv) => gv !== undefined));
    const trainerShape = served_.trainJob
      ? detectTrainerShape(
          await kubeCall(`get ${name(CRD_API)} ${TRAINJOB_CRD}`, () =>
            c.getClusterCustomObject({ ...CRD_API, name: TRAINJOB_CRD }, callOptions(opts)),
          ),
        )
      : undefined;
    const caps: ClusterCapabilities = {
      ...(trainerShape ? { trainer: trainerShape } : {}),
      legacyKinds: [...served_.legacy],
      kueue: served_.kueue,
      coscheduling: served_.coscheduling,
      volcano: served_.volcano,
    };
    return {
      caps,
      ...(workloadVersion
        ? {
            workloads: {
              group: KUEUE_GROUP,
              version: workloadVersion,
              plural: 'workloads',
              kind: 'Workload',
            },
          }
        : {}),
      podGroups: [...(caps.coscheduling ? [COSCHEDULING] : []), ...(caps.volcano ? [VOLCANO] : [])],
    };
  }

  function discovery(opts?: CallOptions): Promise<Discovered> {
    discovered ??= discover(opts).catch((err: unknown) => {
      discovered = undefined; // a failed discovery is not cached
      throw err;
    });
    return discovered;
  }

  async function getJob(jobApi: JobApi, namespace: string, jobName: string, opts?: CallOptions) {
    const c = await api(opts);
    const obj = await getOrUndefined(`get ${name(jobApi)} ${at(namespace, jobName)}`, () =>
      c.getNamespacedCustomObject({ ...jobApi, namespace, name: jobName }, callOptions(opts)),
    );
    return obj as K8sObject | undefined;
  }

  return {
    async createJob(job, opts) {
      const jobApi = jobApiOf(job);
      const namespace = job.metadata.namespace;
      if (!namespace) throw new Error(`job ${job.metadata.name} has no namespace`);
      const what = `create ${name(jobApi)} ${at(namespace, job.metadata.name)}`;
      const c = await api(opts);
      for (let attempt = 0; attempt < 2; attempt++) {
        try {
          const created = (await c.createNamespacedCustomObject(
            { ...jobApi, namespace, body: job, fieldManager, fieldValidation: 'Strict' },
            callOptions(opts),
          )) as K8sObject;
          return { job: created, created: true };
        } catch (err) {
          if (httpStatusOf(err) !== 409) throw toGantryError(err, what);
        }
        // 409 AlreadyExists: ours (same run id) is an idempotent success, anything else a conflict.
        const existing = await getJob(jobApi, namespace, job.metadata.name, opts);
        if (!existing) continue; // deleted in between: create again, once
        const ours = job.metadata.labels?.[LABEL.runId];
        if (ours !== undefined && existing.metadata.labels?.[LABEL.runId] === ours) {
          return { job: existing, created: false };
        }
        throw new JobNameConflictError(
          `${what}: a ${jobApi.kind} with this name exists and belongs to ${
            existing.metadata.labels?.[LABEL.runId]
              ? `run ${existing.metadata.labels[LABEL.runId]}`
              : 'no Gantry run'
          }`,
        );
      }
      throw new ClusterUnavailableError(`${what}: the name is taken and freed repeatedly; retry later`);
    },

    getJob,

    async listManagedJobs(jobApi, opts) {
      const c = await api(opts);
      return listAll(
        `list ${name(jobApi)} ${MANAGED_SELECTOR}`,
        (cont) =>
          c.listCustomObjectForAllNamespaces(
            {
              group: jobApi.group,
              version: jobApi.version,
              resourcePlural: jobApi.plural,
              labelSelector: MANAGED_SELECTOR,
              limit: LIST_PAGE,
              ...(cont ? { _continue: cont } : {}),
            },
            callOptions(opts),
          ),
        `${jobApi.group}/${jobApi.version}`,
        jobApi.kind,
      );
    },

    async annotateJob(jobApi, namespace, jobName, annotations, opts) {
      const c = await api(opts);
      return (await kubeCall(`annotate ${name(jobApi)} ${at(namespace, jobName)}`, () =>
        c.patchNamespacedCustomObject(
          { ...jobApi, namespace, name: jobName, body: { metadata: { annotations } }, fieldManager },
          callOptions(opts, 'application/merge-patch+json'),
        ),
      )) as K8sObject;
    },

    async deleteJob(jobApi, namespace, jobName, opts) {
      const c = await api(opts);
      await getOrUndefined(`delete ${name(jobApi)} ${at(namespace, jobName)}`, () =>
        c.deleteNamespacedCustomObject(
          { ...jobApi, namespace, name: jobName, propagationPolicy: 'Background' },
          callOptions(opts),
        ),
      );
    },

    async findAdmissionGate(job, opts) {
      const namespace = job.metadata.namespace;
      if (!namespace) return undefined;
      const uid =
        job.metadata.uid ?? (await getJob(jobApiOf(job), namespace, job.metadata.name, opts))?.metadata.uid;
      if (!uid) return undefined;
      const d = await discovery(opts);
      const c = await api(opts);
      if (d.workloads) {
        const wl = d.workloads;
        const items = await listAll(
          `list ${name(wl)} in ${namespace} for ${job.metadata.name}`,
          (cont) =>
            c.listNamespacedCustomObject(
              {
                ...wl,
                namespace,
                labelSelector: `${KUEUE_JOB_UID}=${uid}`,
                limit: LIST_PAGE,
                ...(cont ? { _continue: cont } : {}),
              },
              callOptions(opts),
            ),
          `${wl.group}/${wl.version}`,
          wl.kind,
        );
        const found = items.find((w) => ownedBy(w, uid)) ?? items[0];
        if (found) return found;
      }
      for (const pg of d.podGroups) {
        const obj = (await getOrUndefined(`get ${name(pg)} ${at(namespace, job.metadata.name)}`, () =>
          c.getNamespacedCustomObject({ ...pg, namespace, name: job.metadata.name }, callOptions(opts)),
        )) as K8sObject | undefined;
        // A PodGroup of the job's name that another owner holds is not this job's gate.
        if (obj && (!obj.metadata.ownerReferences?.length || ownedBy(obj, uid))) {
          return withTypeMeta([obj], `${pg.group}/${pg.version}`, pg.kind)[0];
        }
      }
      return undefined;
    },

    async listAdmissionGates(opts) {
      const d = await discovery(opts);
      const c = await api(opts);
      const apis = [...(d.workloads ? [d.workloads] : []), ...d.podGroups];
      const lists = await Promise.all(
        apis.map((r) =>
          listAll(
            `list ${name(r)}`,
            (cont) =>
              c.listCustomObjectForAllNamespaces(
                {
                  group: r.group,
                  version: r.version,
                  resourcePlural: r.plural,
                  limit: LIST_PAGE,
                  ...(cont ? { _continue: cont } : {}),
                },
                callOptions(opts),
              ),
            `${r.group}/${r.version}`,
            r.kind,
          ),
        ),
      );
      return lists.flat().filter(ownedByJobKind);
    },

    async listPods(labelSelector, opts) {
      const c = await api(opts);
      const pods = await listAll(
        `list pods ${labelSelector}`,
        (cont) =>
          c.listPodForAllNamespaces(
            { labelSelector, limit: LIST_PAGE, ...(cont ? { _continue: cont } : {}) },
            callOptions(opts),
          ),
        'v1',
        'Pod',
      );
      // Only what health and the logs route need: a pod's whole spec (and managed fields) would
      // weigh on a 1,000-run tick; its containers' names are enough to pick the trainer's.
      return pods.map((p) => {
        const m = p.metadata as K8sObject['metadata'] & { deletionTimestamp?: string };
        const containers = (p as { spec?: { containers?: Array<{ name?: string }> } }).spec?.containers;
        return {
          apiVersion: p.apiVersion,
          kind: p.kind,
          metadata: {
            name: m.name,
            namespace: m.namespace,
            labels: m.labels,
            creationTimestamp: m.creationTimestamp,
            ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
          },
          spec: { containers: (containers ?? []).map((c) => ({ name: c.name })) },
          status: (p as { status?: unknown }).status,
        };
      }) as K8sObject[];
    },

    async readPodLog(namespace, pod, options, opts) {
      const c = await api(opts);
      return kubeCall(`log of pod ${at(namespace, pod)} container ${options.container}`, () =>
        c.readNamespacedPodLog(
          { namespace, name: pod, container: options.container, tailLines: options.tailLines },
          callOptions(opts),
        ),
      );
    },

    async listClusterTrainingRuntimes(opts) {
      const c = await api(opts);
      const r = { group: TRAINER_GROUP, version: TRAINER_VERSION, plural: 'clustertrainingruntimes' };
      try {
        return await listAll(
          `list ${name(r)}`,
          (cont) =>
            c.listClusterCustomObject(
              { ...r, limit: LIST_PAGE, ...(cont ? { _continue: cont } : {}) },
              callOptions(opts),
            ),
          `${r.group}/${r.version}`,
          'ClusterTrainingRuntime',
        );
      } catch (err) {
        if (err instanceof NotFoundError) return []; // Trainer v2 not installed
        throw err;
      }
    },

    async capabilities(opts) {
      return (await discovery(opts)).caps;
    },

    async createEvent(event, opts) {
      const c = await api(opts);
      const namespace = event.metadata.namespace ?? 'default';
      await kubeCall(`create event ${at(namespace, event.metadata.name)}`, () =>
        c.createNamespacedEvent({ namespace, body: event }, callOptions(opts)),
      );
    },
  };
}
