import type { GantryConfig } from './config.ts';

/**
 * Gantry's Kubernetes rights, namespaced (deploy/k8s/rbac.yaml has the cluster-wide part). Jobs
 * are created, annotated and deleted — and pods' logs read (`pods/log` get, for
 * `GET /v1/runs/{id}/logs`) and Events listed (a failed job's pods' evidence) — only in the
 * namespaces the configuration gives to teams: one
 * RoleBinding per namespace binds the ClusterRole `gantry-orchestrator-jobs` (which has no
 * ClusterRoleBinding) to the group `gantry:orchestrators`, so those verbs hold in that namespace
 * only. Reading (the reconciler's cluster-wide LIST, runtimes, Workloads, PodGroups) is the
 * ClusterRole `gantry-orchestrator-read`, bound cluster-wide.
 */

export const ORCHESTRATOR_GROUP = 'gantry:orchestrators';
export const JOBS_CLUSTER_ROLE = 'gantry-orchestrator-jobs';

export interface RoleBinding {
  apiVersion: 'rbac.authorization.k8s.io/v1';
  kind: 'RoleBinding';
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  roleRef: { apiGroup: 'rbac.authorization.k8s.io'; kind: 'ClusterRole'; name: string };
  subjects: Array<{ apiGroup: 'rbac.authorization.k8s.io'; kind: 'Group'; name: string }>;
}

/** The namespaces the configuration places runs in on `cluster` (sorted, each once). */
export function teamNamespaces(config: GantryConfig, cluster: string): string[] {
  const fallback = config.defaultCluster ?? config.clusters[0]?.name;
  const namespaces = config.teams
    .filter((t) => (t.cluster ?? fallback) === cluster)
    .flatMap((t) => t.namespaces);
  return [...new Set(namespaces)].sort();
}

/** One RoleBinding per team namespace of `cluster`: job rights there and nowhere else. */
export function namespaceRoleBindings(config: GantryConfig, cluster: string): RoleBinding[] {
  return teamNamespaces(config, cluster).map((namespace) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: {
      name: 'gantry-orchestrator-jobs',
      namespace,
      labels: { 'app.kubernetes.io/name': 'gantry', 'app.kubernetes.io/component': 'orchestrator' },
    },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: JOBS_CLUSTER_ROLE },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: ORCHESTRATOR_GROUP }],
  }));
}

/** The bindings as a YAML stream (one document per namespace), ready for `kubectl apply -f -`. */
export function renderRoleBindings(config: GantryConfig, cluster: string): string {
  const docs = namespaceRoleBindings(config, cluster).map((b) =>
    [
      '---',
      `apiVersion: ${b.apiVersion}`,
      `kind: ${b.kind}`,
      'metadata:',
      `  name: ${b.metadata.name}`,
      `  namespace: ${b.metadata.namespace}`,
      '  labels:',
      ...Object.entries(b.metadata.labels).map(([k, v]) => `    ${k}: ${v}`),
      'roleRef:',
      `  apiGroup: ${b.roleRef.apiGroup}`,
      `  kind: ${b.roleRef.kind}`,
      `  name: ${b.roleRef.name}`,
      'subjects:',
      ...b.subjects.flatMap((s) => [
        `  - apiGroup: ${s.apiGroup}`,
        `    kind: ${s.kind}`,
        `    name: ${s.name}`,
      ]),
      '',
    ].join('\n'),
  );
  return [
    `# Rendered from the Gantry configuration for cluster ${cluster} by \`npm run rbac\` (lib/rbac.ts):`,
    "# job rights in the teams' namespaces only. Re-render and apply when teams or namespaces change.",
    ...docs,
  ].join('\n');
}
