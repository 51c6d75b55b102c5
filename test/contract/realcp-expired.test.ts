import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAll } from '../../lib/adapters/kubernetes/calls.ts';
import { makeCustomObjectsApi } from '../../lib/adapters/kubernetes/custom-objects.ts';
import { makeKubernetesGateway } from '../../lib/adapters/kubernetes/gateway.ts';
import { kubeConfigFromYaml } from '../../lib/adapters/kubernetes/kubeconfig.ts';
import { makeTransport } from '../../lib/adapters/kubernetes/transport.ts';
import type { ClusterGateway } from '../../lib/ports.ts';
import { newRunId } from '../../lib/run/ids.ts';
import { buildJob, jobApi } from '../../lib/trainjob/build.ts';
import { aRunSpec } from '../helpers/builders.ts';
import { type RealControlPlane, realcpBinDir, startRealControlPlane } from '../helpers/realcp.ts';
import { CRD_ROOT, crdDir, tierAvailable } from '../helpers/tiers.ts';

/**
 * Expired resourceVersions on a real kube-apiserver + etcd: a watch from a compacted version and a
 * LIST whose continue token expires between its pages. The apiserver runs without its watch cache
 * and compacts etcd every second (`--watch-cache=false --etcd-compaction-interval=1s`), so every read
 * goes to etcd and a version a second or two old is gone — what a busy cluster does to a reconciler
 * whose LIST is minutes old, or whose paged LIST outlives etcd's compaction (5 minutes by default).
 */
const TRAINER = 'trainer-v2.3.0';
const SHAPE = 'trainer-v2.3' as const;
const API = jobApi(SHAPE);

function missing(): string[] {
  const out: string[] = [];
  const bin = process.env.REALCP_BIN_DIR ?? realcpBinDir();
  for (const b of ['etcd', 'kube-apiserver'])
    if (!existsSync(join(bin, b))) out.push(`${join(bin, b)} (build it: npm run realcp:build)`);
  if (!crdDir(TRAINER)) out.push(join(CRD_ROOT, TRAINER));
  return out;
}
const available = tierAvailable('contract (real apiserver, expired versions)', missing());

describe.skipIf(!available)(
  'real apiserver: expired versions (watch cache off, etcd compacted every second)',
  () => {
    let cp: RealControlPlane;
    let gw: ClusterGateway;
    let ns: string;
    const trainJobs = () => `/apis/${API.group}/${API.version}/namespaces/${ns}/${API.plural}`;

    /** Until etcd has compacted past `rv`: a read at exactly that version answers 410. */
    async function compactedPast(rv: string): Promise<void> {
      for (let i = 0; i < 100; i++) {
        // A write moves etcd's revision on, so the next compaction reaches past `rv`.
        await cp.request('POST', `/api/v1/namespaces/${ns}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { generateName: 'tick-' },
        });
        const res = await cp.request(
          'GET',
          `${trainJobs()}?resourceVersion=${rv}&resourceVersionMatch=Exact`,
        );
        if (res.status === 410) return;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(`etcd did not compact past ${rv}`);
    }

    beforeAll(async () => {
      cp = await startRealControlPlane({
        crdDirs: [crdDir(TRAINER) ?? join(CRD_ROOT, TRAINER)],
        extraApiserverArgs: ['--watch-cache=false', '--etcd-compaction-interval=1s'],
      });
      gw = makeKubernetesGateway({ kubeConfig: await kubeConfigFromYaml(cp.kubeconfigYaml()) });
      ns = await cp.createNamespace('expired');
      for (let i = 0; i < 3; i++) {
        const runId = newRunId();
        await gw.createJob(buildJob(aRunSpec({ runId, jobName: runId, namespace: ns }), SHAPE));
      }
    }, 180_000);

    afterAll(async () => {
      await cp?.stop();
    });

    it('a watch from a compacted list answers expired (the reconciler lists again)', async () => {
      if (!gw.watchManagedJobs) throw new Error('the gateway cannot watch');
      await gw.listManagedJobs(API);
      const listed = (await cp.request<{ metadata: { resourceVersion: string } }>('GET', trainJobs())).body;
      await compactedPast(listed.metadata.resourceVersion);

      const how = await gw.watchManagedJobs(API, 5, () => undefined);

      expect(how).toBe('expired');
    }, 60_000);

    it('a LIST whose continue token expires after its first page starts again and returns every item', async () => {
      const conn = await kubeConfigFromYaml(cp.kubeconfigYaml());
      const server = conn.getCurrentCluster()?.server as string;
      const client = makeCustomObjectsApi(server, makeTransport(conn, 30_000));
      const statuses: string[] = [];
      let waited = false;

      const items = await listAll(
        `list ${API.plural} in ${ns}`,
        async (cont) => {
          if (cont !== undefined && !waited) {
            // Between the first and the second page, etcd compacts the list's snapshot away.
            waited = true;
            const rv = JSON.parse(Buffer.from(cont, 'base64').toString('utf8')).rv as number;
            await compactedPast(String(rv));
          }
          try {
            const page = await client.listNamespacedCustomObject({
              ...API,
              namespace: ns,
              limit: 1,
              ...(cont ? { _continue: cont } : {}),
            });
            statuses.push(cont === undefined ? 'first' : 'next');
            return page;
          } catch (err) {
            statuses.push(`error ${(err as { code?: number }).code}`);
            throw err;
          }
        },
        `${API.group}/${API.version}`,
        API.kind,
      );

      expect(statuses).toEqual(['first', 'error 410', 'first', 'next', 'next']);
      expect(items).toHaveLength(3);
    }, 60_000);
  },
);
