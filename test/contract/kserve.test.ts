import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestKey } from '../../lib/artifacts/layout.ts';
import { buildManifest, type ModelManifest } from '../../lib/artifacts/manifest.ts';
import type { ModelLifecycleEvent } from '../../lib/events/model-event.ts';
import { namespaceRoleBindings } from '../../lib/rbac.ts';
import type { ServingState } from '../../lib/serving/kserve.ts';
import { DEMO_TEAM, type Stack, startStack } from '../../local/stack.ts';
import { aRunSpec } from '../helpers/builders.ts';
import { iam } from '../helpers/intake-fakes.ts';
import { KSERVE_CRD_FILE, kserveCrdDir } from '../helpers/kserve.ts';
import { type RealControlPlane, realcpBinDir, startRealControlPlane } from '../helpers/realcp.ts';
import { ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * The KServe hand-off against a real kube-apiserver with KServe's own InferenceService CRD
 * (serving.kserve.io/v1beta1 from KServe's Go module, scripts/kserve-crds.sh) and deploy/k8s/rbac.yaml
 * applied: Gantry runs as a member of gantry:orchestrators with the RoleBinding of its team's
 * namespace. There is NO KServe controller: the test plays it, writing the InferenceService's
 * `status` (observedGeneration, the Ready condition) itself, as KServe's controller would. The rest is
 * the embedded default (local/stack.ts: fauxqs S3 and SQS, the alias-moves queue's consumer).
 */

const crds = kserveCrdDir();
const binsPresent =
  existsSync(join(realcpBinDir(), 'kube-apiserver')) && existsSync(join(realcpBinDir(), 'etcd'));
const available = tierAvailable('contract (KServe hand-off on a real apiserver)', [
  ...(binsPresent ? [] : ['kube-apiserver/etcd binaries (npm run realcp:build)']),
  ...(crds ? [] : [`KServe's CRD (bash scripts/kserve-crds.sh → ${KSERVE_CRD_FILE})`]),
]);

const USER = 'gantry-lambda';
const GROUP = 'gantry:orchestrators';
const ISVC = 'resnet-prod';
const CALLER = iam('arn:aws:iam::000000000000:user/demo');

describe.runIf(available)(
  'KServe hand-off on a real apiserver (the test plays the KServe controller)',
  () => {
    let cp: RealControlPlane;
    let stack: Stack;
    let ns: string;
    let sink: string;
    let deps: typeof import('../../functions/_deps.ts');
    let registry: typeof import('../../functions/api/_registry.ts').registry;

    beforeAll(async () => {
      cp = await startRealControlPlane({
        crdDirs: [crds as string],
        users: [{ name: USER, groups: [GROUP] }],
      });
      await cp.applyManifests([join(ROOT, 'deploy/k8s/rbac.yaml')]);
      ns = await cp.createNamespace('vision');
      const teams = [
        {
          ...DEMO_TEAM,
          namespaces: [ns],
          promotion: [{ model: 'resnet', alias: 'production', policy: 'auto' as const, minMargin: 0 }],
          serving: {
            kserve: [
              { model: 'resnet', alias: 'production', inferenceService: ISVC, canaryTrafficPercent: 25 },
            ],
          },
        },
      ];
      for (const b of namespaceRoleBindings({ clusters: [{ name: 'local' }], teams } as never, 'local')) {
        const res = await cp.request(
          'POST',
          `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`,
          b,
        );
        expect(res.status, res.text).toBe(201);
      }
      // The team's InferenceService, as the team created it (valid against KServe's full CRD).
      const created = await cp.request(
        'POST',
        `/apis/serving.kserve.io/v1beta1/namespaces/${ns}/inferenceservices`,
        {
          apiVersion: 'serving.kserve.io/v1beta1',
          kind: 'InferenceService',
          metadata: { name: ISVC, namespace: ns },
          spec: {
            predictor: { model: { modelFormat: { name: 'pytorch' }, storageUri: 's3://elsewhere/initial/' } },
          },
        },
      );
      expect(created.status, created.text).toBe(201);
      sink = join(mkdtempSync(join(tmpdir(), 'gantry-kserve-')), 'events.jsonl');
      stack = await startStack({
        // Gantry's functions reach the cluster as the group member, never as admin.
        cluster: { kubeconfigYaml: cp.kubeconfigYaml({ token: cp.userTokens[USER] as string }) },
        reconcileEveryMs: 0,
        teams,
        events: { sinkFile: sink },
      });
      deps = await import('../../functions/_deps.ts');
      registry = (await import('../../functions/api/_registry.ts')).registry;
    }, 180_000);

    afterAll(async () => {
      await stack?.close();
      await cp?.stop();
      if (sink) rmSync(dirname(sink), { recursive: true, force: true });
    });

    const isvc = async () =>
      (
        await cp.request<{ metadata: { generation: number }; spec: { predictor: Record<string, unknown> } }>(
          'GET',
          `/apis/serving.kserve.io/v1beta1/namespaces/${ns}/inferenceservices/${ISVC}`,
        )
      ).body;

    async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
      const end = Date.now() + ms;
      for (;;) {
        const v = await probe();
        if (v !== undefined) return v;
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }

    /** A published version's manifest in the stack's bucket (what PublishArtifacts writes last). */
    async function publish(version: number, accuracy: number): Promise<ModelManifest> {
      const run = aRunSpec({
        runId: `run-${version}`,
        request: { team: 'demo', modelName: 'resnet' } as never,
      });
      await deps.modelOwners().claim('resnet', 'demo', run.runId);
      const m = buildManifest({
        run,
        version,
        bucket: stack.bucket,
        files: [],
        metrics: { accuracy },
        publishStartedAt: new Date(),
        publishedAt: new Date(),
      });
      await deps.store().putJson(manifestKey('resnet', version), m);
      return m;
    }

    const servingView = async () => {
      const view = await registry().getModel({ caller: CALLER, name: 'resnet' });
      return view.aliases.find((a) => a.alias === 'production') as {
        version?: number;
        serving?: ServingState[];
      };
    };

    /** Play KServe's controller: it observed the generation and says Ready (or not). */
    async function playController(generation: number, ready: 'True' | 'False', reason?: string) {
      const res = await cp.request(
        'PATCH',
        `/apis/serving.kserve.io/v1beta1/namespaces/${ns}/inferenceservices/${ISVC}/status`,
        {
          status: {
            observedGeneration: generation,
            conditions: [
              {
                type: 'Ready',
                status: ready,
                ...(reason ? { reason, message: `${reason} (written by the test)` } : {}),
                lastTransitionTime: new Date().toISOString(),
              },
            ],
          },
        },
        { contentType: 'application/merge-patch+json' },
      );
      expect(res.status, res.text).toBe(200);
    }

    it('a promotion patches storageUri and the canary percent; a rollback patches back; the alias view reports the Ready the test wrote', async () => {
      // Prepare
      const v1 = await publish(1, 0.8);
      const v2 = await publish(2, 0.9);

      // Act: the publish-time promotion policy (auto) moves production to 1, then to 2
      await deps.promoter().promote(v1, undefined);
      await until('the InferenceService on v1', async () => {
        const o = await isvc();
        return (o.spec.predictor.model as { storageUri?: string }).storageUri === v1.storageUri
          ? o
          : undefined;
      });
      await deps.promoter().promote(v2, undefined);
      const onV2 = await until('the InferenceService on v2', async () => {
        const o = await isvc();
        return (o.spec.predictor.model as { storageUri?: string }).storageUri === v2.storageUri
          ? o
          : undefined;
      });

      // Assess: the real object was patched (its modelFormat kept), not yet observed by any controller
      expect(onV2.spec.predictor).toEqual({
        model: { modelFormat: { name: 'pytorch' }, storageUri: v2.storageUri },
        canaryTrafficPercent: 25,
      });
      const before = await until('the serving state of v2', async () => {
        const s = (await servingView()).serving?.[0];
        return s?.version === 2 ? s : undefined;
      });
      expect(before).toMatchObject({
        namespace: ns,
        inferenceService: ISVC,
        patchedGeneration: onV2.metadata.generation,
        ready: 'Unknown',
        reason: 'NotObservedYet',
      });

      // Act: the test, as KServe's controller, reports the new revision failing, then Ready
      await playController(onV2.metadata.generation, 'False', 'ModelLoadFailed');
      await until('Ready=False in the alias view', async () =>
        (await servingView()).serving?.[0]?.reason === 'ModelLoadFailed' ? true : undefined,
      );
      await playController(onV2.metadata.generation, 'True');
      const ready = await until('Ready=True in the alias view', async () => {
        const s = (await servingView()).serving?.[0];
        return s?.ready === 'True' ? s : undefined;
      });
      expect(ready).toMatchObject({ version: 2, observedGeneration: onV2.metadata.generation });
      expect(ready.reason).toBeUndefined();

      // Act: roll back through the API's use case
      await registry().moveAlias({
        caller: CALLER,
        name: 'resnet',
        alias: 'production',
        body: { version: 1, expectedVersion: 2, reason: 'v2 misbehaves' },
      });
      const back = await until('the InferenceService back on v1', async () => {
        const o = await isvc();
        return (o.spec.predictor.model as { storageUri?: string }).storageUri === v1.storageUri
          ? o
          : undefined;
      });

      // Assess: a new generation, not Ready until observed; one lifecycle event per move
      expect(back.metadata.generation).toBeGreaterThan(onV2.metadata.generation);
      const after = await until('the serving state of the rollback', async () => {
        const s = (await servingView()).serving?.[0];
        return s?.version === 1 ? s : undefined;
      });
      expect(after).toMatchObject({ seq: 3, patchedGeneration: back.metadata.generation, ready: 'Unknown' });
      const moves = await until('three alias-moved events', async () => {
        const lines = existsSync(sink) ? readFileSync(sink, 'utf8').trim().split('\n') : [];
        const events = lines
          .filter(Boolean)
          .map((l) => JSON.parse(l) as ModelLifecycleEvent)
          .filter((e) => e.type === 'gantry.model.alias-moved');
        return events.length >= 3 ? events : undefined;
      });
      expect(moves.map((e) => [e.data.version, e.data.movedBy, e.data.direction])).toEqual([
        [1, 'policy:auto', 'first'],
        [2, 'policy:auto', 'forward'],
        [1, 'arn:aws:iam::000000000000:user/demo', 'rollback'],
      ]);
    });
  },
);
