import { existsSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKubernetesGateway } from '../../lib/adapters/kubernetes/gateway.ts';
import { kubeConfigFromYaml } from '../../lib/adapters/kubernetes/kubeconfig.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import { buildJob, jobApi, LEGACY_KINDS } from '../../lib/trainjob/build.ts';
import type { K8sObject, TrainerShape } from '../../lib/trainjob/types.ts';
import { requestArb, specArb } from '../helpers/arbitraries.ts';
import { type RealControlPlane, realcpBinDir, startRealControlPlane } from '../helpers/realcp.ts';
import { CRD_ROOT, crdDir, tierAvailable } from '../helpers/tiers.ts';
import { describeClusterGateway } from './cluster-gateway.suite.ts';

/**
 * The ClusterGateway contract against a real kube-apiserver + etcd with the real CRDs, one control
 * plane per Trainer release (several versions of one CRD cannot share an apiserver). No controllers
 * run: the suite plays Kueue and the scheduler plugins itself.
 */

interface CrdSet {
  trainer: string;
  shape: TrainerShape;
  kueue: string;
}

/** Kueue v0.15–v0.16 target Trainer v2.1; v0.17–v0.19 target v2.2 (trainer-api.md §7). */
const SETS: CrdSet[] = [
  { trainer: 'trainer-v2.1.0', shape: 'trainer-v2.1', kueue: 'kueue-v0.16.9' },
  { trainer: 'trainer-v2.2.1', shape: 'trainer-v2.2', kueue: 'kueue-v0.19.2' },
  { trainer: 'trainer-v2.3.0', shape: 'trainer-v2.3', kueue: 'kueue-v0.19.2' },
];
const COMMON = [
  'training-operator-v1.9.4',
  'jobset-v0.12.0',
  'scheduler-plugins-v0.35.4-devel',
  'volcano-v1.15.1',
];

function crdDirs(set: CrdSet): string[] {
  return [set.trainer, set.kueue, ...COMMON].map((name) => crdDir(name) ?? join(CRD_ROOT, name));
}

function missing(): string[] {
  const out: string[] = [];
  const bin = process.env.REALCP_BIN_DIR ?? realcpBinDir();
  for (const b of ['etcd', 'kube-apiserver']) {
    if (!existsSync(join(bin, b))) out.push(`${join(bin, b)} (build it: npm run realcp:build)`);
  }
  for (const set of SETS)
    for (const dir of crdDirs(set)) if (!existsSync(dir) && !out.includes(dir)) out.push(dir);
  return out;
}

const available = tierAvailable('contract (real apiserver)', missing());

/** `/apis/<group>/<version>[/namespaces/<ns>]/<plural>` of an object (all kinds used here pluralise as `<kind>s`). */
function collectionPath(obj: K8sObject): string {
  const plural = `${obj.kind.toLowerCase()}s`;
  const ns = obj.metadata.namespace;
  const root = obj.apiVersion.includes('/') ? `/apis/${obj.apiVersion}` : `/api/${obj.apiVersion}`;
  return `${root}${ns ? `/namespaces/${ns}` : ''}/${plural}`;
}

for (const set of SETS) {
  describe.skipIf(!available)(`real apiserver with ${set.trainer} + ${set.kueue}`, () => {
    let cp: RealControlPlane;

    beforeAll(async () => {
      cp = await startRealControlPlane({ crdDirs: crdDirs(set) });
    }, 180_000);

    afterAll(async () => {
      await cp?.stop();
    });

    describeClusterGateway(`real apiserver (${set.trainer})`, async () => ({
      gateway: makeKubernetesGateway({ kubeConfig: await kubeConfigFromYaml(cp.kubeconfigYaml()) }),
      gatewayWithPageSize: async (limit) =>
        makeKubernetesGateway({
          kubeConfig: await kubeConfigFromYaml(cp.kubeconfigYaml()),
          listPageSize: limit,
        }),
      namespace: () => cp.createNamespace('gw'),
      shape: set.shape,
      trainerRelease: set.trainer,
      async createObject(obj) {
        const res = await cp.request<K8sObject>('POST', collectionPath(obj), obj);
        if (res.status !== 201)
          throw new Error(`create ${obj.kind} ${obj.metadata.name}: HTTP ${res.status} ${res.text}`);
        return res.body;
      },
      async getJson(path) {
        const res = await cp.request<unknown>('GET', path);
        if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status} ${res.text}`);
        return res.body;
      },
      expectedCapabilities: {
        trainer: set.shape,
        legacyKinds: ['PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'JAXJob'],
        kueue: true,
        coscheduling: true,
        volcano: true,
      },
    }));

    // The builders against the real schema, CEL rules and strict field validation included:
    // generated requests, created with dryRun so nothing is stored.
    it('accepts every job the builders produce (TrainJob and every Training Operator v1 kind)', async () => {
      const ns = await cp.createNamespace('prop');
      const cases: Array<{
        arb: fc.Arbitrary<RunSpec>;
        kind?: (typeof LEGACY_KINDS)[number];
      }> = [
        { arb: specArb(requestArb({ targets: ['auto', 'TrainJob'], minNodes: 1, initializers: true })) },
        ...LEGACY_KINDS.map((kind) => ({
          kind,
          arb: specArb(
            requestArb({ targets: [kind], minNodes: kind === 'MPIJob' ? 2 : 1, initializers: false }),
          ),
        })),
      ];
      let created = 0;
      for (const c of cases) {
        await fc.assert(
          fc.asyncProperty(c.arb, async (spec) => {
            const job = c.kind
              ? buildJob({ ...spec, namespace: ns }, 'training-operator-v1', c.kind)
              : buildJob({ ...spec, namespace: ns }, set.shape);
            const api = c.kind ? jobApi('training-operator-v1', c.kind) : jobApi(set.shape);
            const res = await cp.request(
              'POST',
              `/apis/${api.group}/${api.version}/namespaces/${ns}/${api.plural}?dryRun=All&fieldValidation=Strict`,
              job,
            );
            expect(res.status, res.text).toBe(201);
            created++;
          }),
          { numRuns: 25 },
        );
      }
      expect(created).toBe(25 * cases.length);
    }, 120_000);
  });
}
