import type { CallOptions } from '../../ports.ts';
import type { InferenceServices, IsvcObject } from '../../serving/handoff.ts';
import { KSERVE } from '../../serving/kserve.ts';
import { at, callOptions, getOrUndefined } from './calls.ts';
import { type CustomObjectsApi, makeCustomObjectsApi } from './custom-objects.ts';
import { kubeCall } from './errors.ts';
import { type KubeConnection, makeTransport } from './transport.ts';

/**
 * KServe InferenceServices (serving.kserve.io/v1beta1) on the custom-objects REST API: a merge patch
 * and a GET, nothing else (deploy/k8s/rbac.yaml grants exactly `get` and `patch`). Errors are
 * translated at this edge (404 NotFoundError, 401/403 ClusterAccessDeniedError, 5xx/network
 * ClusterUnavailableError).
 */
export function makeInferenceServices(deps: {
  kubeConfig: () => KubeConnection | Promise<KubeConnection>;
  fetchTimeoutMs?: number;
  fieldManager?: string;
}): InferenceServices {
  let client: Promise<CustomObjectsApi> | undefined;
  const what = (verb: string, ns: string, name: string) =>
    `${verb} inferenceservices.${KSERVE.group} ${at(ns, name)}`;
  function api(): Promise<CustomObjectsApi> {
    client ??= (async () => {
      const conn = await deps.kubeConfig();
      const cluster = conn.getCurrentCluster();
      if (!cluster) throw new Error('kubeconfig has no current cluster');
      return makeCustomObjectsApi(cluster.server, makeTransport(conn, deps.fetchTimeoutMs ?? 30_000));
    })().catch((err: unknown) => {
      client = undefined;
      throw err;
    });
    return client;
  }
  return {
    async patch(namespace: string, name: string, body: unknown, opts?: CallOptions) {
      const c = await api();
      return (await kubeCall(what('patch', namespace, name), () =>
        c.patchNamespacedCustomObject(
          { ...KSERVE, namespace, name, body, fieldManager: deps.fieldManager ?? 'gantry' },
          callOptions(opts, 'application/merge-patch+json'),
        ),
      )) as IsvcObject;
    },
    async get(namespace: string, name: string, opts?: CallOptions) {
      const c = await api();
      return (await getOrUndefined(what('get', namespace, name), () =>
        c.getNamespacedCustomObject({ ...KSERVE, namespace, name }, callOptions(opts)),
      )) as IsvcObject | undefined;
    },
  };
}
