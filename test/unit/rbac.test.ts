import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../lib/config.ts';
import {
  JOBS_CLUSTER_ROLE,
  namespaceRoleBindings,
  renderRoleBindings,
  teamNamespaces,
} from '../../lib/rbac.ts';
import { parseYamlAll } from '../../lib/yaml.ts';
import { intakeConfig } from '../helpers/intake-fakes.ts';
import { ROOT } from '../helpers/tiers.ts';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}
interface Doc {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: Rule[];
  roleRef?: { kind: string; name: string };
}

const docsOf = (file: string) => parseYamlAll(readFileSync(join(ROOT, file), 'utf8')) as Doc[];

describe('Kubernetes RBAC (deploy/k8s/rbac.yaml and lib/rbac.ts)', () => {
  const docs = docsOf('deploy/k8s/rbac.yaml');
  const role = (name: string) => docs.find((d) => d.kind === 'ClusterRole' && d.metadata.name === name);

  it('binds cluster-wide only roles that read (get, list, watch)', () => {
    const bound = docs.filter((d) => d.kind === 'ClusterRoleBinding').map((b) => b.roleRef?.name);
    expect(bound).toEqual(['gantry-orchestrator-read']);
    for (const name of bound) {
      const verbs = new Set(role(name as string)?.rules?.flatMap((r) => r.verbs));
      expect([...verbs].sort()).toEqual(['get', 'list', 'watch']);
    }
  });

  it('keeps the job verbs in a ClusterRole that only RoleBindings grant', () => {
    const jobs = role(JOBS_CLUSTER_ROLE);
    expect(jobs?.rules?.find((r) => r.resources.includes('trainjobs'))?.verbs).toEqual([
      'create',
      'patch',
      'delete',
    ]);
    expect(docs.some((d) => d.kind === 'ClusterRoleBinding' && d.roleRef?.name === JOBS_CLUSTER_ROLE)).toBe(
      false,
    );
  });

  it('grants KServe InferenceServices get and patch only, and only through the per-namespace RoleBindings', () => {
    const rules = docs
      .filter((d) => d.kind === 'ClusterRole')
      .flatMap((d) =>
        (d.rules ?? [])
          .filter((r) => r.resources.includes('inferenceservices'))
          .map((r) => [d.metadata.name, r.verbs]),
      );
    expect(rules).toEqual([[JOBS_CLUSTER_ROLE, ['get', 'patch']]]);
  });

  it("grants pods' logs read-only, and only through the per-namespace RoleBindings", () => {
    const logRules = docs
      .filter((d) => d.kind === 'ClusterRole')
      .flatMap((d) =>
        (d.rules ?? []).filter((r) => r.resources.includes('pods/log')).map((r) => [d.metadata.name, r]),
      );
    expect(logRules).toEqual([
      [JOBS_CLUSTER_ROLE, { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] }],
    ]);
  });

  it("lists Events (a failed job's pods' evidence) only through the per-namespace RoleBindings", () => {
    const eventRules = docs
      .filter((d) => d.kind === 'ClusterRole')
      .flatMap((d) =>
        (d.rules ?? [])
          .filter((r) => r.resources.includes('events') && r.verbs.includes('list'))
          .map((r) => [d.metadata.name, r]),
      );
    expect(eventRules).toEqual([
      [JOBS_CLUSTER_ROLE, { apiGroups: [''], resources: ['events'], verbs: ['list'] }],
    ]);
  });

  it('renders one RoleBinding per team namespace of the cluster', () => {
    const config = intakeConfig();
    expect(teamNamespaces(config, 'local')).toEqual(['team-vision', 'vision-research']);
    expect(teamNamespaces(config, 'gpu')).toEqual(['team-nlp']);
    const bindings = namespaceRoleBindings(config, 'gpu');
    expect(bindings).toEqual([
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: {
          name: 'gantry-orchestrator-jobs',
          namespace: 'team-nlp',
          labels: { 'app.kubernetes.io/name': 'gantry', 'app.kubernetes.io/component': 'orchestrator' },
        },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: JOBS_CLUSTER_ROLE },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'gantry:orchestrators' }],
      },
    ]);
    // The YAML says the same.
    const rendered = parseYamlAll(renderRoleBindings(config, 'local'));
    expect(rendered).toEqual(namespaceRoleBindings(config, 'local'));
  });

  it('ships the rendering of config/dev.json as deploy/k8s/examples/rbac-vision.yaml', () => {
    const dev = parseConfig(
      JSON.parse(readFileSync(join(ROOT, 'deploy/serverless/config/dev.json'), 'utf8')),
    );
    expect(readFileSync(join(ROOT, 'deploy/k8s/examples/rbac-vision.yaml'), 'utf8')).toBe(
      renderRoleBindings(dev, 'training'),
    );
  });
});
