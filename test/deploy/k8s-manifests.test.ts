import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AppliedObject,
  type RealControlPlane,
  realcpBinDir,
  startRealControlPlane,
} from '../helpers/realcp.ts';
import { crdDir, ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * Everything under deploy/k8s/ (RBAC) and deploy/k8s/examples/ (a gang-scheduled
 * ClusterTrainingRuntime, Kueue queues) is accepted by a real kube-apiserver with the real CRDs:
 * server-side apply validates every field against the CRD schemas (unknown fields are errors) and
 * runs their CEL rules.
 */

const CRD_SETS = ['trainer-v2.2.1', 'kueue-v0.19.2', 'jobset-v0.11.1', 'scheduler-plugins-v0.35.4-devel'];
const yamlIn = (dir: string) =>
  existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => /\.ya?ml$/.test(f))
        .sort()
        .map((f) => join(dir, f))
    : [];
const MANIFESTS = [...yamlIn(join(ROOT, 'deploy/k8s')), ...yamlIn(join(ROOT, 'deploy/k8s/examples'))];

function missing(): string[] {
  const bin = process.env.REALCP_BIN_DIR ?? realcpBinDir();
  return [
    ...['etcd', 'kube-apiserver']
      .map((b) => join(bin, b))
      .filter((p) => !existsSync(p))
      .map((p) => `${p} (build it: npm run realcp:build)`),
    ...CRD_SETS.filter((s) => crdDir(s) === undefined).map((s) => `CRDs ${s}`),
  ];
}

const available = tierAvailable('deploy (deploy/k8s manifests on a real apiserver)', missing());

describe.runIf(available)('deploy/k8s manifests on a real apiserver', () => {
  let cp: RealControlPlane;
  let applied: AppliedObject[];

  beforeAll(async () => {
    cp = await startRealControlPlane({ crdDirs: CRD_SETS.map((s) => crdDir(s) as string) });
    applied = await cp.applyManifests(MANIFESTS);
  }, 180_000);

  afterAll(async () => {
    await cp?.stop();
  });

  it('applies every file (RBAC and the examples) without an error', () => {
    const files = new Set(applied.map((a) => a.file));
    expect([...files].sort()).toEqual([...MANIFESTS].sort());
    expect(MANIFESTS.some((f) => f.includes('/examples/'))).toBe(true);
  });

  it('stores the gang-scheduling runtime with its coscheduling podGroupPolicy as written', async () => {
    const runtimes = applied.filter((a) => a.kind === 'ClusterTrainingRuntime');
    expect(runtimes.length).toBeGreaterThan(0);
    for (const rt of runtimes) {
      const res = await cp.request<{
        spec: { podGroupPolicy?: { coscheduling?: { scheduleTimeoutSeconds?: number } } };
      }>('GET', rt.path);
      expect(res.status, rt.name).toBe(200);
      expect(res.body.spec.podGroupPolicy?.coscheduling?.scheduleTimeoutSeconds, rt.name).toBeGreaterThan(0);
    }
  });

  it('stores the Kueue flavor, a GPU quota and a LocalQueue that points at it', async () => {
    const kinds = (kind: string) => applied.filter((a) => a.kind === kind);
    expect(kinds('ResourceFlavor').length).toBeGreaterThan(0);
    const [cq] = kinds('ClusterQueue');
    expect(cq).toBeDefined();
    const queue = await cp.request<{
      spec: { resourceGroups: Array<{ coveredResources: string[]; flavors: Array<{ name: string }> }> };
    }>('GET', (cq as AppliedObject).path);
    expect(queue.status).toBe(200);
    expect(queue.body.spec.resourceGroups.flatMap((g) => g.coveredResources)).toContain('nvidia.com/gpu');
    const flavors = new Set(kinds('ResourceFlavor').map((f) => f.name));
    for (const f of queue.body.spec.resourceGroups.flatMap((g) => g.flavors))
      expect(flavors.has(f.name)).toBe(true);
    const lqs = kinds('LocalQueue');
    expect(lqs.length).toBeGreaterThan(0);
    for (const lq of lqs) {
      const res = await cp.request<{ spec: { clusterQueue: string } }>('GET', lq.path);
      expect(res.body.spec.clusterQueue, lq.name).toBe((cq as AppliedObject).name);
    }
  });

  it('binds read rights cluster-wide and job rights only per team namespace (no ClusterRoleBinding for them)', async () => {
    const bindings = applied.filter((a) => a.kind === 'ClusterRoleBinding');
    const stored = await Promise.all(
      bindings.map(
        async (b) =>
          (
            await cp.request<{ roleRef: { name: string }; subjects: Array<{ kind: string; name: string }> }>(
              'GET',
              b.path,
            )
          ).body,
      ),
    );
    expect(stored.flatMap((b) => b.subjects)).toContainEqual(
      expect.objectContaining({ kind: 'Group', name: 'gantry:orchestrators' }),
    );
    expect(stored.map((b) => b.roleRef.name)).not.toContain('gantry-orchestrator-jobs');
    const roleBindings = applied.filter((a) => a.kind === 'RoleBinding');
    expect(roleBindings.map((b) => b.namespace)).toEqual(['vision']);
  });
});
