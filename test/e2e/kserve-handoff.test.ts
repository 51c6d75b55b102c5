import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelLifecycleEvent } from '../../lib/events/model-event.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';

/**
 * The KServe hand-off on the embedded default: a team's `production` alias of `iris` is followed by
 * an InferenceService in its namespace (teams[].serving.kserve). Two runs publish versions 1 and 2
 * (policy auto moves production each time), then a rollback through the API moves it back to 1.
 * The simulator's InferenceService (local/simulator/inference-services.ts) follows every move —
 * Ready=False while rolling out, Ready=True once it finds the version's files in S3 — the alias view
 * reports it, and each move is a `gantry.model.alias-moved` lifecycle event (the local sink).
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const ISVC = 'iris-prod';
const TEAM = {
  ...DEMO_TEAM,
  promotion: [{ model: 'iris', alias: 'production', policy: 'auto' as const, minMargin: 0 }],
  serving: {
    kserve: [{ model: 'iris', alias: 'production', inferenceService: ISVC, canaryTrafficPercent: 10 }],
  },
};
const request = {
  modelName: 'iris',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
};

describe('the KServe hand-off (embedded default)', { timeout: 180_000 }, () => {
  let env: Embedded;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gantry-kserve-e2e-'));
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 300 },
      stack: { orphanGraceSeconds: 1, teams: [TEAM], events: { sinkFile: join(dir, 'events.jsonl') } },
    });
    // The team's InferenceService, as the team deployed it.
    const res = await fetch(
      `${env.sim.url}/apis/serving.kserve.io/v1beta1/namespaces/demo/inferenceservices`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'serving.kserve.io/v1beta1',
          kind: 'InferenceService',
          metadata: { name: ISVC },
          spec: {
            predictor: { model: { modelFormat: { name: 'pytorch' }, storageUri: 's3://elsewhere/v0/' } },
          },
        }),
      },
    );
    expect(res.status).toBe(201);
  }, 60_000);

  afterAll(async () => {
    await env?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const v = await probe();
      if (v !== undefined) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async function publish(key: string): Promise<Body> {
    const r = await call('POST', '/v1/runs', request, { 'Idempotency-Key': key });
    expect(r.status).toBe(202);
    return until(`run ${r.body.runId}`, async () => {
      const run = (await call('GET', `/v1/runs/${r.body.runId}`)).body;
      return ['Succeeded', 'Failed', 'Cancelled'].includes(run.phase) ? run : undefined;
    });
  }

  const isvc = async () =>
    (await (
      await fetch(`${env.sim.url}/apis/serving.kserve.io/v1beta1/namespaces/demo/inferenceservices/${ISVC}`)
    ).json()) as Body;

  /** The alias's serving state once it is Ready for `version`. */
  const readyOn = (version: number) =>
    until(`the alias view Ready on v${version}`, async () => {
      const alias = (await call('GET', '/v1/models/iris')).body.aliases.find(
        (a: Body) => a.alias === 'production',
      );
      const s = alias?.serving?.[0];
      return alias?.version === version && s?.version === version && s.ready === 'True' ? s : undefined;
    });

  it('a rollback moves the alias back, the InferenceService follows each move, and each move is a lifecycle event', async () => {
    // Prepare: two published versions, each promoted by policy auto
    const first = await publish('kserve-1');
    expect(first.phase).toBe('Succeeded');
    const onV1 = await readyOn(1);
    const second = await publish('kserve-2');
    expect(second.phase).toBe('Succeeded');
    const onV2 = await readyOn(2);

    // Act: roll back through the API
    const back = await call('POST', '/v1/models/iris/aliases/production', {
      version: 1,
      expectedVersion: 2,
      reason: 'v2 answers slower',
    });

    // Assess
    expect(back.status).toBe(200);
    const rolledBack = await readyOn(1);
    const o = await isvc();
    expect(o.spec.predictor).toEqual({
      model: { modelFormat: { name: 'pytorch' }, storageUri: onV1.storageUri },
      canaryTrafficPercent: 10,
    });
    expect(onV2.storageUri).not.toBe(onV1.storageUri);
    expect(rolledBack).toMatchObject({
      seq: 3,
      patchedGeneration: o.metadata.generation,
      inferenceService: ISVC,
    });
    expect(rolledBack.patchedGeneration).toBeGreaterThan(onV2.patchedGeneration);
    const events = await until('three alias-moved events', async () => {
      const text = await readFile(join(dir, 'events.jsonl'), 'utf8').catch(() => '');
      const moved = text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as ModelLifecycleEvent)
        .filter((e) => e.type === 'gantry.model.alias-moved');
      return moved.length >= 3 ? moved : undefined;
    });
    expect(events.map((e) => [e.id, e.data.version, e.data.direction, e.data.team])).toEqual([
      ['iris:alias:production:1', 1, 'first', 'demo'],
      ['iris:alias:production:2', 2, 'forward', 'demo'],
      ['iris:alias:production:3', 1, 'rollback', 'demo'],
    ]);
    expect(events[2]?.data).toMatchObject({
      movedBy: PRINCIPAL,
      reason: 'v2 answers slower',
      previousVersion: 2,
    });

    // The CLI shows the alias's serving state.
    const cli = join(import.meta.dirname, '..', '..', 'cli', 'gantry.ts');
    const shown = await promisify(execFile)(process.execPath, [cli, 'model', 'iris'], {
      env: { PATH: process.env.PATH, HOME: dir, GANTRY_ENDPOINT: env.api.url },
    });
    expect(shown.stdout, shown.stderr).toMatch(
      new RegExp(
        `^  serving: KServe demo/${ISVC} version 1 generation ${o.metadata.generation} Ready=True$`,
        'm',
      ),
    );
  });
});
