import { mapLimit } from '../../concurrency.ts';
import {
  ClusterAccessDeniedError,
  ClusterUnavailableError,
  JobNameConflictError,
  NotFoundError,
} from '../../errors.ts';
import type { CallOptions, ClusterGateway, JobApi } from '../../ports.ts';
import type { PendingWorkloadItem } from '../../queue/pending.ts';
import { jobKindInfo } from '../../trainjob/kinds.ts';
import { LABEL, MANAGED_SELECTOR } from '../../trainjob/labels.ts';
import { type K8sObject, LEGACY_GROUP, TRAINER_GROUP, TRAINER_VERSION } from '../../trainjob/types.ts';
import {
  at,
  callOptions,
  getOrUndefined,
  LIST_PAGE,
  listAll,
  resourceName as name,
  withTypeMeta,
} from './calls.ts';
import { type CustomObjectsApi, makeCustomObjectsApi } from './custom-objects.ts';
import { type Discovered, discover, KUEUE_JOB_UID } from './discovery.ts';
import { httpStatusOf, kubeCall, toGantryError } from './errors.ts';
import { type KubeConnection, makeTransport } from './transport.ts';
import { trimGate, trimJob, trimPod } from './trim.ts';

export type { KubeConnection } from './transport.ts';

/**
 * ClusterGateway on the Kubernetes custom-objects REST API (custom-objects.ts: the calls of
 * @kubernetes/client-node 2.x's CustomObjectsApi, without its model classes) over the transport of
 * transport.ts; discovery.ts finds what the cluster serves. This file is the CRUD: jobs, admission
 * gates (Kueue Workloads, PodGroups), pods and their logs, runtimes, events.
 */

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
  /** Items per LIST page (`limit`). Default 500 (LIST_PAGE); tests use a small one to read many pages. */
  listPageSize?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;

/** API groups of the jobs Gantry creates: an admission gate owned by one of these kinds may be Gantry's. */
const JOB_GROUPS = new Set([TRAINER_GROUP, LEGACY_GROUP]);

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

function ownedByJobKind(o: K8sObject): boolean {
  return (o.metadata.ownerReferences ?? []).some((r) => JOB_GROUPS.has(r.apiVersion.split('/')[0] ?? ''));
}

function ownedBy(o: K8sObject, uid: string): boolean {
  return (o.metadata.ownerReferences ?? []).some((r) => r.uid === uid);
}

export function makeKubernetesGateway(deps: KubernetesGatewayDeps): ClusterGateway {
  const timeoutMs = deps.fetchTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  const fieldManager = deps.fieldManager ?? 'gantry';
  const pageSize = deps.listPageSize ?? LIST_PAGE;
  let client: Promise<CustomObjectsApi> | undefined;
  let discovered: Promise<Discovered> | undefined;
  /** The resourceVersion of the last LIST of each job kind's managed jobs (`watchManagedJobs` starts there). */
  const listedAt = new Map<string, string>();
  const kindKey = (a: JobApi) => `${a.group}/${a.version}/${a.plural}`;

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

  function discovery(opts?: CallOptions): Promise<Discovered> {
    discovered ??= api(opts)
      .then((c) => discover(c, opts))
      .catch((err: unknown) => {
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
              limit: pageSize,
              ...(cont ? { _continue: cont } : {}),
            },
            callOptions(opts),
          ),
        `${jobApi.group}/${jobApi.version}`,
        jobApi.kind,
        (rv) => listedAt.set(kindKey(jobApi), rv),
        trimJob,
      );
    },

    async watchManagedJobs(jobApi, timeoutSeconds, onJob, opts) {
      const c = await api(opts);
      const resourceVersion = listedAt.get(kindKey(jobApi));
      // Never listed: a watch without a version would replay every job as ADDED; list first.
      if (resourceVersion === undefined) return 'expired';
      let expired = false;
      const what = `watch ${name(jobApi)} ${MANAGED_SELECTOR}`;
      const ended = await kubeCall(what, () =>
        c
          .watchCustomObjectForAllNamespaces(
            {
              group: jobApi.group,
              version: jobApi.version,
              resourcePlural: jobApi.plural,
              labelSelector: MANAGED_SELECTOR,
              resourceVersion,
              timeoutSeconds,
            },
            (event) => {
              if (event.type === 'ERROR') {
                expired = true; // 410 Expired (or any error event): the stream ends here
                return 'stop';
              }
              const deleted = event.type === 'DELETED';
              if (event.type !== 'ADDED' && event.type !== 'MODIFIED' && !deleted) return undefined;
              const [job] = withTypeMeta([event.object], `${jobApi.group}/${jobApi.version}`, jobApi.kind);
              return job ? onJob(job, deleted) : undefined;
            },
            callOptions(opts),
          )
          .catch((err: unknown) => {
            // 410 Gone as the response itself (not as an ERROR event): the version is compacted too.
            if (httpStatusOf(err) === 410) {
              expired = true;
              return 'ended' as const;
            }
            throw err;
          }),
      );
      return expired ? 'expired' : ended;
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

    async findAdmissionGates(job, opts) {
      const namespace = job.metadata.namespace;
      if (!namespace) return [];
      const uid =
        job.metadata.uid ?? (await getJob(jobApiOf(job), namespace, job.metadata.name, opts))?.metadata.uid;
      if (!uid) return [];
      const d = await discovery(opts);
      const c = await api(opts);
      // Both kinds, as the reconciler's LIST sees them: admissionOfGates applies the one rule.
      const found: K8sObject[] = [];
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
                limit: pageSize,
                ...(cont ? { _continue: cont } : {}),
              },
              callOptions(opts),
            ),
          `${wl.group}/${wl.version}`,
          wl.kind,
        );
        const workload = items.find((w) => ownedBy(w, uid)) ?? items[0];
        if (workload) found.push(workload);
      }
      for (const pg of d.podGroups) {
        const obj = (await getOrUndefined(`get ${name(pg)} ${at(namespace, job.metadata.name)}`, () =>
          c.getNamespacedCustomObject({ ...pg, namespace, name: job.metadata.name }, callOptions(opts)),
        )) as K8sObject | undefined;
        // A PodGroup of the job's name that another owner holds is not this job's gate.
        if (obj && (!obj.metadata.ownerReferences?.length || ownedBy(obj, uid))) {
          found.push(...withTypeMeta([obj], `${pg.group}/${pg.version}`, pg.kind));
          break;
        }
      }
      return found;
    },

    async listAdmissionGates(opts, scope) {
      const d = await discovery(opts);
      const c = await api(opts);
      const apis = [...(d.workloads ? [d.workloads] : []), ...d.podGroups];
      // Each page trimmed as it arrives; other tenants' gates (not owned by a job kind) dropped.
      const keep = (o: K8sObject) => (ownedByJobKind(o) ? trimGate(o) : undefined);
      const listIn = (r: (typeof apis)[number], namespace: string | undefined) =>
        listAll(
          `list ${name(r)}${namespace === undefined ? '' : ` in ${namespace}`}`,
          (cont) => {
            const page = { limit: pageSize, ...(cont ? { _continue: cont } : {}) };
            return namespace === undefined
              ? c.listCustomObjectForAllNamespaces(
                  { group: r.group, version: r.version, resourcePlural: r.plural, ...page },
                  callOptions(opts),
                )
              : c.listNamespacedCustomObject({ ...r, namespace, ...page }, callOptions(opts));
          },
          `${r.group}/${r.version}`,
          r.kind,
          undefined,
          keep,
        );
      // Scoped: one LIST per namespace that holds Gantry's jobs (Kueue copies no label of Gantry's
      // onto its Workloads unless its install sets labelKeysToCopy), never other tenants' namespaces.
      const lists = scope
        ? await mapLimit(
            [...new Set(scope.namespaces)].flatMap((ns) => apis.map((r) => [r, ns] as const)),
            // Two at a time: a page of 500 Workloads parses to ~20 MB before it is trimmed.
            2,
            ([r, ns]) => listIn(r, ns),
          )
        : await Promise.all(apis.map((r) => listIn(r, undefined)));
      return lists.flat();
    },

    async pendingWorkloads(namespace, localQueue, opts) {
      const c = await api(opts);
      const why: string[] = [];
      // The newest version first: Kueue serves v1beta2 from 0.15, v1beta1 since 0.9 (both while supported).
      for (const version of VISIBILITY_VERSIONS) {
        try {
          const summary = (await kubeCall(`pending workloads of ${at(namespace, localQueue)}`, () =>
            c.getNamespacedSubresource(
              {
                group: VISIBILITY_GROUP,
                version,
                namespace,
                plural: 'localqueues',
                name: localQueue,
                subresource: 'pendingworkloads',
                query: { limit: PENDING_LIMIT },
              },
              callOptions(opts),
            ),
          )) as { items?: unknown[] } | undefined;
          return {
            served: true as const,
            apiVersion: `${VISIBILITY_GROUP}/${version}`,
            items: (summary?.items ?? []).map(pendingItem),
          };
        } catch (err) {
          // Not served (no APIService: 404; its server down: 503) or not allowed: Gantry's own view answers.
          if (err instanceof NotFoundError) why.push(`${version}: not served`);
          else if (err instanceof ClusterAccessDeniedError)
            return {
              served: false as const,
              reason: `not allowed to read ${VISIBILITY_GROUP}/${version} localqueues/pendingworkloads in ${namespace}`,
            };
          else if (err instanceof ClusterUnavailableError)
            why.push(`${version}: unavailable (${err.message})`);
          else throw err;
        }
      }
      return {
        served: false as const,
        reason: `the cluster does not serve Kueue's visibility API (${why.join('; ')})`,
      };
    },

    async queueGpuQuota(namespace, localQueue, opts) {
      // Kueue's version as discovery found it (the Workloads' one): LocalQueue and ClusterQueue share it.
      const version = (await discovery(opts)).workloads?.version;
      if (!version) return undefined;
      const c = await api(opts);
      const lq = (await getOrUndefined(`get localqueue ${at(namespace, localQueue)}`, () =>
        c.getNamespacedCustomObject(
          { group: KUEUE_GROUP, version, plural: 'localqueues', namespace, name: localQueue },
          callOptions(opts),
        ),
      )) as { spec?: { clusterQueue?: string } } | undefined;
      const cqName = lq?.spec?.clusterQueue;
      if (!cqName) return undefined;
      const cq = await getOrUndefined(`get clusterqueue ${cqName}`, () =>
        c.getClusterCustomObject(
          { group: KUEUE_GROUP, version, plural: 'clusterqueues', name: cqName },
          callOptions(opts),
        ),
      );
      return gpuNominalQuota(cq);
    },

    async listPods(labelSelector, opts) {
      const c = await api(opts);
      // Each page trimmed as it arrives (trim.ts): a pod's whole spec and managed fields would
      // weigh ~14–25 KB each, 40,000 pods at 10,000 runs.
      return listAll(
        `list pods ${labelSelector}`,
        (cont) =>
          c.listPodForAllNamespaces(
            { labelSelector, limit: pageSize, ...(cont ? { _continue: cont } : {}) },
            callOptions(opts),
          ),
        'v1',
        'Pod',
        undefined,
        trimPod,
      );
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
              { ...r, limit: pageSize, ...(cont ? { _continue: cont } : {}) },
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

    async listPodEvents(namespace, opts) {
      const c = await api(opts);
      return listAll(
        `list pod events in ${namespace}`,
        (cont) =>
          c.listNamespacedEvent(
            {
              namespace,
              fieldSelector: 'involvedObject.kind=Pod',
              limit: pageSize,
              ...(cont ? { _continue: cont } : {}),
            },
            callOptions(opts),
          ),
        'v1',
        'Event',
      );
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

const KUEUE_GROUP = 'kueue.x-k8s.io';

/**
 * The `nvidia.com/gpu` nominal quota of a ClusterQueue (`spec.resourceGroups[].flavors[].resources[]`,
 * the same in v1beta1 and v1beta2), summed over its flavors; undefined when it names none.
 */
export function gpuNominalQuota(cq: unknown): number | undefined {
  const groups = (cq as { spec?: { resourceGroups?: unknown } } | undefined)?.spec?.resourceGroups;
  let total: number | undefined;
  for (const g of Array.isArray(groups) ? groups : []) {
    for (const f of (g as { flavors?: Array<{ resources?: unknown }> }).flavors ?? []) {
      for (const r of Array.isArray(f.resources) ? f.resources : []) {
        const { name, nominalQuota } = r as { name?: string; nominalQuota?: number | string };
        // GPUs are whole: a quantity string of GPUs is a plain integer ("8").
        const n = Number(nominalQuota);
        if (name === 'nvidia.com/gpu' && Number.isFinite(n)) total = (total ?? 0) + n;
      }
    }
  }
  return total;
}

/** Kueue's visibility API (VisibilityOnDemand): the versions Gantry reads, newest first. */
const VISIBILITY_GROUP = 'visibility.kueue.x-k8s.io';
const VISIBILITY_VERSIONS = ['v1beta2', 'v1beta1'] as const;
/** Pending workloads read from one LocalQueue (Kueue's default page is 1,000). */
const PENDING_LIMIT = 1000;

function pendingItem(raw: unknown): PendingWorkloadItem {
  const o = (raw ?? {}) as {
    metadata?: { name?: string; namespace?: string; ownerReferences?: Array<{ name?: string }> };
    priority?: number;
    localQueueName?: string;
    positionInClusterQueue?: number;
    positionInLocalQueue?: number;
  };
  const owner = o.metadata?.ownerReferences?.[0]?.name;
  return {
    name: o.metadata?.name ?? '',
    namespace: o.metadata?.namespace ?? '',
    ...(owner ? { ownerName: owner } : {}),
    priority: o.priority ?? 0,
    localQueueName: o.localQueueName ?? '',
    positionInClusterQueue: o.positionInClusterQueue ?? 0,
    positionInLocalQueue: o.positionInLocalQueue ?? 0,
  };
}
