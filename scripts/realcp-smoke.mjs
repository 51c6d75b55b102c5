#!/usr/bin/env node
// Manual check of the light-tier real control plane (needs Node >= 24 for .ts imports, and the
// binaries from scripts/realcp-build.sh):
//   node_modules/.bin/node scripts/realcp-smoke.mjs [crdsRoot]
// crdsRoot defaults to ../shared/k8s/crds (the folder that holds trainer-v2.2.1/, kueue-v0.19.2/, ...).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRealControlPlane } from '../test/helpers/realcp.ts';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const crdsRoot = resolve(process.argv[2] ?? join(root, '..', 'shared', 'k8s', 'crds'));
const trainer = join(crdsRoot, 'trainer-v2.2.1');
if (!existsSync(trainer)) {
  console.error(`realcp-smoke: ${trainer} not found; pass the CRD root as the first argument`);
  process.exit(2);
}
const log = (...a) => console.log('realcp-smoke:', ...a);

async function trainerChecks() {
  const cp = await startRealControlPlane({
    crdDirs: [trainer],
    users: [{ name: 'alice', groups: ['devs'] }],
  });
  try {
    log(`started in ${cp.startupMs} ms; server ${cp.server}; run dir ${cp.runDir}`);
    const version = await cp.request('GET', '/version');
    log('/version:', JSON.stringify(version.body));
    assert.match(version.body.gitVersion, /^v1\.\d+\.\d+$/);
    log(`etcd ${cp.versions.etcd}; CRDs established: ${cp.crds.length} (${cp.crds.join(', ')})`);

    const applied = await cp.applyManifests([join(trainer, 'runtimes', 'torch_distributed.yaml')]);
    log('applied:', applied.map((a) => `${a.kind}/${a.name}`).join(', '));
    // Applying twice is an update, not an error.
    await cp.applyManifests([join(trainer, 'runtimes', 'torch_distributed.yaml')]);

    const ns = await cp.createNamespace('smoke');
    const tjPath = `/apis/trainer.kubeflow.org/v1alpha1/namespaces/${ns}/trainjobs`;
    const ok = await cp.request('POST', tjPath, {
      apiVersion: 'trainer.kubeflow.org/v1alpha1',
      kind: 'TrainJob',
      metadata: { name: 'good' },
      spec: { runtimeRef: { name: 'torch-distributed' } },
    });
    log(
      `valid TrainJob -> HTTP ${ok.status}; defaulted runtimeRef ${JSON.stringify(ok.body.spec?.runtimeRef)}`,
    );
    assert.equal(ok.status, 201);

    const noRef = await cp.request('POST', tjPath, {
      apiVersion: 'trainer.kubeflow.org/v1alpha1',
      kind: 'TrainJob',
      metadata: { name: 'bad' },
      spec: {},
    });
    log(`TrainJob without runtimeRef -> HTTP ${noRef.status}: ${noRef.body.message}`);
    assert.equal(noRef.status, 422);

    const badName = await cp.request('POST', tjPath, {
      apiVersion: 'trainer.kubeflow.org/v1alpha1',
      kind: 'TrainJob',
      metadata: { name: '1-starts-with-digit' },
      spec: { runtimeRef: { name: 'torch-distributed' } },
    });
    log(`TrainJob with a non-RFC1035 name (CEL rule) -> HTTP ${badName.status}: ${badName.body.message}`);
    assert.equal(badName.status, 422);

    const immut = await cp.request(
      'PATCH',
      `${tjPath}/good`,
      { spec: { runtimeRef: { name: 'other' } } },
      { contentType: 'application/merge-patch+json' },
    );
    log(`changing immutable runtimeRef -> HTTP ${immut.status}`);
    assert.equal(immut.status, 422);

    // RBAC + impersonation: alice has no RBAC grants; the admin may impersonate her.
    const asAlice = await cp.request('GET', tjPath, undefined, { token: cp.userTokens.alice });
    const impersonated = await cp.request('GET', tjPath, undefined, {
      headers: { 'Impersonate-User': 'alice', 'Impersonate-Group': 'devs' },
    });
    log(`alice token -> HTTP ${asAlice.status}; admin impersonating alice -> HTTP ${impersonated.status}`);
    assert.equal(asAlice.status, 403);
    assert.equal(impersonated.status, 403);
    assert.match(cp.kubeconfigYaml({ impersonateUser: 'alice', impersonateGroups: ['devs'] }), /as: alice/);

    // Failures are never silent: a kind whose CRD is not installed, and an object the server rejects.
    const tmp = mkdtempSync(join(tmpdir(), 'realcp-smoke-'));
    try {
      const flavor = join(tmp, 'flavor.yaml');
      writeFileSync(
        flavor,
        'apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: gpu\n',
      );
      await assert.rejects(cp.applyManifests([flavor]), (err) => {
        log('applying a kind without CRD fails:', err.message);
        return /does not serve kind ResourceFlavor/.test(err.message);
      });
      const badRole = join(tmp, 'role.yaml');
      writeFileSync(
        badRole,
        `apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\n  namespace: ${ns}\nrules:\n- verbs: [get]\n`,
      );
      await assert.rejects(cp.applyManifests([badRole]), (err) => {
        log('applying an invalid Role fails:', err.message);
        return /HTTP 422/.test(err.message);
      });
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  } finally {
    const t = Date.now();
    await cp.stop();
    log(`stopped in ${Date.now() - t} ms; run dir removed: ${!existsSync(cp.runDir)}`);
  }
}

async function allSetsCheck() {
  const dirs = [
    'trainer-v2.2.1',
    'training-operator-v1.9.4',
    'kueue-v0.19.2',
    'jobset-v0.11.1',
    'scheduler-plugins-v0.35.4-devel',
    'volcano-v1.15.1',
  ].map((d) => join(crdsRoot, d));
  const cp = await startRealControlPlane({ crdDirs: dirs });
  try {
    log(`all six CRD sets: ${cp.crds.length} CRDs established, start-up ${cp.startupMs} ms`);
  } finally {
    await cp.stop();
  }
}

async function warmStarts(n) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const cp = await startRealControlPlane({ crdDirs: [trainer] });
    times.push(cp.startupMs);
    await cp.stop();
  }
  log(`warm start-up with trainer-v2.2.1 CRDs (ms): ${times.join(', ')}`);
}

await trainerChecks();
await warmStarts(3);
await allSetsCheck();
log('OK');
