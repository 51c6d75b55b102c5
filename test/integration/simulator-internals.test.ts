import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detectTrainerShape } from '../../lib/trainjob/capabilities.ts';
import { CelUnsupported, evalRule } from '../../local/simulator/cel.ts';
import { parseYamlStream } from '../../local/simulator/crds.ts';
import { startClusterSimulator } from '../../local/simulator/index.ts';
import {
  assignFlavor,
  kueueReplicatedJobPatches,
  requeueBackoffSeconds,
  workloadName,
} from '../../local/simulator/kueue.ts';
import {
  DEFAULT_HYPERPARAMETERS,
  finalAccuracy,
  metricsAt,
  OPTIMUM,
  parseHyperparameters,
} from '../../local/simulator/objective.ts';
import { jsonPatch, mergePatch, PatchError } from '../../local/simulator/patch.ts';
import { validateSchema } from '../../local/simulator/schema.ts';
import { matchesLabels, parseLabelSelector } from '../../local/simulator/selectors.ts';
import { CRD_ROOT, crdDir } from '../helpers/tiers.ts';

/** The simulator's building blocks, table-tested. */

describe('label selectors', () => {
  const labels = { app: 'x', tier: 'gpu', 'kueue.x-k8s.io/queue-name': 'team-a' };

  it.each([
    ['app=x', true],
    ['app==x', true],
    ['app!=x', false],
    ['app!=y', true],
    ['missing!=y', true],
    ['tier in (gpu,cpu)', true],
    ['tier in (cpu)', false],
    ['tier notin (cpu)', true],
    ['tier notin (gpu)', false],
    ['missing notin (gpu)', true],
    ['app', true],
    ['missing', false],
    ['!missing', true],
    ['!app', false],
    ['app=x,tier=gpu', true],
    ['app=x, tier=cpu', false],
    ['kueue.x-k8s.io/queue-name=team-a', true],
    ['', true],
  ])('%s → %s', (selector, want) => {
    expect(matchesLabels(parseLabelSelector(selector), labels)).toBe(want);
  });

  it('rejects bad syntax with the real server’s BadRequest message', () => {
    expect(() => parseLabelSelector('x===y')).toThrow(
      /unable to parse requirement: found '=', expected: identifier/,
    );
    expect(() => parseLabelSelector('tier in gpu')).toThrow(/unable to parse requirement/);
  });
});

describe('Kueue flavor assignment and its messages', () => {
  const gpu = (n: number, count = 1, name = 'node') => ({
    name,
    count,
    per: { 'nvidia.com/gpu': n, cpu: 4 },
  });
  const quota = { 'nvidia.com/gpu': 8, cpu: 64 };

  it.each([
    ['fits', [gpu(4)], { 'nvidia.com/gpu': 4 }, { ok: true }],
    [
      'waits for quota in use',
      [gpu(4)],
      { 'nvidia.com/gpu': 8 },
      {
        ok: false,
        neverFits: false,
        reason: 'Pending',
        message:
          "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 4 more needed",
      },
    ],
    [
      'never fits a larger request than the queue',
      [gpu(4, 4)],
      {},
      {
        ok: false,
        neverFits: true,
        reason: 'Pending',
        message:
          "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor default-flavor, previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)",
      },
    ],
    [
      'counts earlier pod sets against later ones',
      [gpu(4, 1, 'launcher'), gpu(4, 2, 'node')],
      {},
      {
        ok: false,
        neverFits: true,
        reason: 'Pending',
        message:
          "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor default-flavor, previously considered podsets requests (4) + current podset request (8) > maximum capacity (8)",
      },
    ],
    [
      'names a resource the queue does not cover',
      [{ name: 'node', count: 1, per: { 'example.com/fpga': 1 } }],
      {},
      {
        ok: false,
        neverFits: true,
        reason: 'Pending',
        message:
          "couldn't assign flavors to pod set node: resource example.com/fpga unavailable in ClusterQueue",
      },
    ],
  ])('%s', (_name, podSets, used, want) => {
    expect(assignFlavor(podSets, quota, used, { flavor: 'default-flavor' })).toEqual(want);
  });

  it('uses the granular reasons when UnadmittedWorkloadsObservability is on', () => {
    expect(
      assignFlavor([gpu(4)], quota, { 'nvidia.com/gpu': 8 }, { flavor: 'f', granular: true }),
    ).toMatchObject({
      reason: 'WaitingForQuota',
    });
    expect(assignFlavor([gpu(16)], quota, {}, { flavor: 'f', granular: true })).toMatchObject({
      reason: 'ExceedsMaxQuota',
    });
  });

  it('names Workloads as Kueue does: <kind>-<name>-<5 hex>', () => {
    expect(
      workloadName('TrainJob', 'trainer.kubeflow.org', 'my-job', '1b4e28ba-2fa1-11d2-883f-0016d3cca427'),
    ).toMatch(/^trainjob-my-job-[0-9a-f]{5}$/);
  });
});

describe("Kueue's requeuing backoff and runtime patch", () => {
  // Kueue v0.19.2 UpdateRequeueState: base·2^(n−1) (plus a tiny jitter), capped at backoffMaxSeconds.
  it.each([
    [1, 60, 3600, 60],
    [2, 60, 3600, 120],
    [3, 60, 3600, 240],
    [7, 60, 3600, 3600], // 3840 capped
    [3, 10, 25, 25],
  ])('requeue #%i, base %i s, max %i s → %i s', (count, base, max, expected) => {
    expect(requeueBackoffSeconds(count, base, max)).toBe(expected);
  });

  it.each([
    ["no flavor labels: only Kueue's labels and annotation", {}, {}],
    [
      'a flavor with node labels and tolerations',
      { nodeLabels: { pool: 'h100' }, tolerations: [{ key: 'gpu', operator: 'Exists' }] },
      { nodeSelector: { pool: 'h100' }, tolerations: [{ key: 'gpu', operator: 'Exists' }] },
    ],
  ])('replicated-job patches, %s', (_, flavor, podSpec) => {
    expect(
      kueueReplicatedJobPatches(['node'], { workload: 'wl-1', localQueue: 'lq', clusterQueue: 'cq', flavor }),
    ).toEqual([
      {
        name: 'node',
        template: {
          spec: {
            template: {
              metadata: {
                annotations: { 'kueue.x-k8s.io/workload': 'wl-1' },
                labels: {
                  'kueue.x-k8s.io/cluster-queue-name': 'cq',
                  'kueue.x-k8s.io/local-queue-name': 'lq',
                  'kueue.x-k8s.io/podset': 'node',
                },
              },
              spec: podSpec,
            },
          },
        },
      },
    ]);
  });
});

describe('patches', () => {
  it('merge patch (RFC 7386): objects merge, null deletes, lists replace', () => {
    expect(mergePatch({ a: { b: 1, c: 2 }, l: [1, 2] }, { a: { b: null, d: 3 }, l: [3] })).toEqual({
      a: { c: 2, d: 3 },
      l: [3],
    });
  });

  it('JSON patch (RFC 6902): add, remove, replace, move, copy, test', () => {
    const doc = { metadata: { annotations: { a: '1' } }, list: [1, 2] };
    expect(
      jsonPatch(doc, [
        { op: 'add', path: '/metadata/annotations/b~1c', value: '2' },
        { op: 'remove', path: '/metadata/annotations/a' },
        { op: 'replace', path: '/list/0', value: 9 },
        { op: 'add', path: '/list/-', value: 3 },
        { op: 'copy', from: '/list', path: '/copy' },
        { op: 'move', from: '/copy', path: '/moved' },
        { op: 'test', path: '/moved/2', value: 3 },
      ]),
    ).toEqual({ metadata: { annotations: { 'b/c': '2' } }, list: [9, 2, 3], moved: [9, 2, 3] });
    expect(doc.metadata.annotations).toEqual({ a: '1' }); // the input is left alone
    expect(() => jsonPatch(doc, [{ op: 'test', path: '/list/0', value: 5 }])).toThrow(PatchError);
    expect(() => jsonPatch(doc, [{ op: 'add', path: '/nope/x', value: 1 }])).toThrow(PatchError);
  });
});

describe('CEL subset of CRD validation rules', () => {
  it.each([
    ["self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')", { metadata: { name: 'ok-1' } }, true],
    ["self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')", { metadata: { name: '9x' } }, false],
    ['size(self.metadata.name) <= 63', { metadata: { name: 'a'.repeat(64) } }, false],
    [
      "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
      'kueue.x-k8s.io/multikueue',
      true,
    ],
    ["self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')", 's3://bucket/x', true],
    ["self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')", 'not a uri', false],
    ['has(self.lastUpdatedTime)', { progressPercentage: 1 }, false],
    ['[has(self.torch), has(self.mpi)].filter(x, x).size() <= 1', { torch: {}, mpi: {} }, false],
    ["self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])", [{ operator: 'Equal' }, {}], true],
    ["!self.exists(c, c == 'node')", ['a', 'node'], false],
    ['has(self.minCount) ? self.minCount <= self.count : true', { count: 2, minCount: 3 }, false],
    ["self > 0 || self in ['auto', 'cpu', 'gpu']", 'auto', true],
  ])('%s', (rule, self, want) => {
    expect(evalRule(rule, self)).toBe(want);
  });

  it('evaluates transition rules against the old value', () => {
    expect(evalRule('self == oldSelf', { numNodes: 2 }, { value: { numNodes: 2 } })).toBe(true);
    expect(evalRule('self == oldSelf', { numNodes: 3 }, { value: { numNodes: 2 } })).toBe(false);
  });

  it('declines what it cannot evaluate (the rule is then skipped, never guessed)', () => {
    expect(() => evalRule('self.foo.bar', {})).toThrow(CelUnsupported);
    expect(() => evalRule('quantity(self).isGreaterThan(quantity("1"))', '2')).toThrow(CelUnsupported);
  });
});

describe('objective: accuracy as a smooth function of hyperparameters', () => {
  it.each([
    [['--lr=0.01', '--batch-size', '128'], {}, { lr: 0.01, batchSize: 128, dropout: 0.1 }],
    [
      ['--learning_rate', '3e-4'],
      { BATCH_SIZE: '64', DROPOUT: '0.3' },
      { lr: 3e-4, batchSize: 64, dropout: 0.3 },
    ],
    [
      [],
      { LR: '0.002', WEIGHT_DECAY: '1e-5', EPOCHS: '5' },
      { lr: 0.002, batchSize: 32, dropout: 0.1, weightDecay: 1e-5, epochs: 5 },
    ],
    [['--lr', '0.05'], { LR: '0.9' }, { lr: 0.05, batchSize: 32, dropout: 0.1 }], // args win over env
    [['python', 'train.py'], {}, DEFAULT_HYPERPARAMETERS],
  ])('parses %j with env %j', (args, env, want) => {
    expect(parseHyperparameters(args, env)).toEqual(want);
  });

  it('peaks at the documented optimum and falls off smoothly around it', () => {
    const best = finalAccuracy(OPTIMUM);
    expect(best).toBeCloseTo(0.95, 10);
    for (const lr of [1e-4, 1e-3, 1e-2, 1e-1]) expect(finalAccuracy({ ...OPTIMUM, lr })).toBeLessThan(best);
    for (const batchSize of [16, 32, 128])
      expect(finalAccuracy({ ...OPTIMUM, batchSize })).toBeLessThan(best);
    expect(finalAccuracy({ ...OPTIMUM, dropout: 0.25 })).toBeGreaterThan(
      finalAccuracy({ ...OPTIMUM, dropout: 0.5 }),
    );
    expect(finalAccuracy({ lr: 100, batchSize: 1, dropout: 0.9 })).toBe(0.05); // clipped
    expect(finalAccuracy(DEFAULT_HYPERPARAMETERS)).toBeCloseTo(0.885, 10);
  });

  it('reports falling loss and rising accuracy during a run', () => {
    const points = [0, 0.25, 0.5, 1].map((p) => metricsAt(p, 0.9));
    for (let i = 1; i < points.length; i++) {
      expect(points[i]!.loss).toBeLessThan(points[i - 1]!.loss);
      expect(points[i]!.accuracy).toBeGreaterThan(points[i - 1]!.accuracy);
    }
  });
});

describe('the simulator reads the shared CRD folder (lib/yaml.ts, js-yaml)', () => {
  const files: string[] = [];
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.ya?ml$/.test(n)) files.push(p);
    }
  };
  if (crdDir('trainer-v2.2.1')) walk(CRD_ROOT);

  it.skipIf(files.length === 0)('every file is a stream of Kubernetes objects (or a kustomization)', () => {
    for (const f of files) {
      const docs = parseYamlStream(readFileSync(f, 'utf8')).filter((v) => v !== null);
      expect(docs.length, f).toBeGreaterThan(0);
      for (const d of docs as Array<{ kind?: unknown }>) expect(typeof d.kind, f).toBe('string');
    }
  });

  it('reads the constructs Kubernetes manifests use', () => {
    const src = [
      '# comment',
      'apiVersion: v1',
      'kind: ConfigMap',
      'metadata:',
      '  name: "quoted"',
      '  labels: {}',
      'data:',
      '  plain: a long',
      '    folded line',
      "  single: 'it''s'",
      '  literal: |-',
      '    line 1',
      '',
      '    line 3',
      '  folded: >',
      '    a',
      '    b',
      'list:',
      '- one',
      '- name: two',
      '  value: 2',
      '- [a, "b"]',
      'numbers: [1, 2.5, true, null]',
      '---',
      'second: doc',
    ].join('\n');
    expect(parseYamlStream(src)).toEqual([
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'quoted', labels: {} },
        data: { plain: 'a long folded line', single: "it's", literal: 'line 1\n\nline 3', folded: 'a b\n' },
        list: ['one', { name: 'two', value: 2 }, ['a', 'b']],
        numbers: [1, 2.5, true, null],
      },
      { second: 'doc' },
    ]);
  });
});

describe('built-in CRD stubs (no shared CRD folder)', () => {
  it.each(['2.1', '2.2', '2.3'] as const)(
    'serve a TrainJob CRD that capability detection reads as Trainer v%s, and the API works',
    async (version) => {
      const sim = await startClusterSimulator({
        trainerVersion: version,
        crdRoot: null,
        speed: 0,
        log: () => {},
      });
      try {
        const crd = await (
          await fetch(
            `${sim.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trainjobs.trainer.kubeflow.org`,
          )
        ).json();
        const groups = (await (await fetch(`${sim.url}/apis`)).json()) as { groups: Array<{ name: string }> };
        const res = await fetch(
          `${sim.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs?fieldValidation=Strict`,
          {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({
              apiVersion: 'trainer.kubeflow.org/v1alpha1',
              kind: 'TrainJob',
              metadata: { name: 'stubbed' },
              spec: { runtimeRef: { name: 'torch-distributed' }, trainer: { numNodes: 1 } },
            }),
          },
        );

        expect(sim.crdSources).toMatchObject({ trainer: 'stub', kueue: 'stub', legacy: 'stub' });
        expect(detectTrainerShape(crd)).toBe(`trainer-v${version}`);
        expect(groups.groups.map((g) => g.name)).toEqual(
          expect.arrayContaining([
            'trainer.kubeflow.org',
            'kueue.x-k8s.io',
            'kubeflow.org',
            'apiextensions.k8s.io',
          ]),
        );
        expect(res.status).toBe(201);
        expect(((await res.json()) as { spec: Record<string, unknown> }).spec).toMatchObject({
          suspend: false,
          managedBy: 'trainer.kubeflow.org/trainjob-controller',
          runtimeRef: {
            apiGroup: 'trainer.kubeflow.org',
            kind: 'ClusterTrainingRuntime',
            name: 'torch-distributed',
          },
        });
      } finally {
        await sim.close();
      }
    },
  );
});

describe.skipIf(!crdDir('trainer-v2.3.0'))('CRDs served from the shared folder', () => {
  it('returns the real CRD objects (spec as in the file, status as the apiserver writes it)', async () => {
    const sim = await startClusterSimulator({
      trainerVersion: '2.3',
      crdRoot: CRD_ROOT,
      speed: 0,
      log: () => {},
    });
    try {
      const file = (
        parseYamlStream(
          readFileSync(join(CRD_ROOT, 'trainer-v2.3.0', 'trainer.kubeflow.org_trainjobs.yaml'), 'utf8'),
        ) as Array<{ kind?: string; spec?: unknown }>
      ).find((d) => d?.kind === 'CustomResourceDefinition')!;
      const served = (await (
        await fetch(
          `${sim.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trainjobs.trainer.kubeflow.org`,
        )
      ).json()) as {
        spec: unknown;
        status: { conditions: Array<{ type: string; status: string }>; storedVersions: string[] };
      };
      const discovery = (await (await fetch(`${sim.url}/apis/trainer.kubeflow.org/v1alpha1`)).json()) as {
        resources: Array<{ name: string; namespaced: boolean; kind: string }>;
      };

      expect(served.spec).toEqual(file.spec);
      expect(served.status.storedVersions).toEqual(['v1alpha1']);
      expect(served.status.conditions).toContainEqual(
        expect.objectContaining({ type: 'Established', status: 'True' }),
      );
      expect(discovery.resources.map((r) => r.name).sort()).toEqual([
        'clustertrainingruntimes',
        'trainingruntimes',
        'trainjobs',
        'trainjobs/status',
      ]);
      expect(sim.crdSources.trainer).toMatch(/trainer-v2\.3\.0$/);
    } finally {
      await sim.close();
    }
  });
});

describe('CustomResourceDefinitions created through the API', () => {
  it('serve their resource at once, with the schema’s defaults and validation, until deleted', async () => {
    const sim = await startClusterSimulator({
      trainerVersion: 'none',
      crdRoot: null,
      speed: 0,
      log: () => {},
    });
    const post = (path: string, body: unknown) =>
      fetch(`${sim.url}${path}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
    try {
      const crd = await post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        metadata: { name: 'widgets.example.com' },
        spec: {
          group: 'example.com',
          names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
          scope: 'Namespaced',
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: {
                      type: 'object',
                      properties: { size: { type: 'integer', minimum: 1, default: 3 } },
                    },
                  },
                },
              },
            },
          ],
        },
      });
      const ok = await post('/apis/example.com/v1/namespaces/default/widgets', {
        apiVersion: 'example.com/v1',
        kind: 'Widget',
        metadata: { name: 'w' },
        spec: {},
      });
      const bad = await post('/apis/example.com/v1/namespaces/default/widgets', {
        apiVersion: 'example.com/v1',
        kind: 'Widget',
        metadata: { name: 'w2' },
        spec: { size: 0 },
      });
      await fetch(`${sim.url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com`, {
        method: 'DELETE',
      });
      const gone = await fetch(`${sim.url}/apis/example.com/v1/namespaces/default/widgets`);

      expect(crd.status).toBe(201);
      expect(ok.status).toBe(201);
      expect(((await ok.json()) as { spec: unknown }).spec).toEqual({ size: 3 });
      expect(bad.status).toBe(422);
      expect(((await bad.json()) as { message: string }).message).toBe(
        'Widget.example.com "w2" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1',
      );
      expect(gone.status).toBe(404);
    } finally {
      await sim.close();
    }
  });
});

describe('CRD patterns are Go RE2', () => {
  // Kueue's AdmissionCheck `spec.parameters.kind`: `^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$`.
  const schema = {
    type: 'object',
    properties: {
      spec: {
        type: 'object',
        properties: {
          parameters: {
            type: 'object',
            properties: { kind: { type: 'string', pattern: '^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$' } },
          },
        },
      },
    },
  };
  it.each([
    ['ProvisioningRequestConfig', true],
    ['config-v2', true],
    ['1config', false],
    ['bad_kind', false],
  ])('a leading (?i) matches case-insensitively: %s → %s', (kind, ok) => {
    expect(validateSchema({ spec: { parameters: { kind } } }, schema).length === 0).toBe(ok);
  });
});
