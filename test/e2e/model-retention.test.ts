import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';

/**
 * Retention on the embedded default (docs/model-registry.md#retention): a team keeping the last 2
 * versions of `churn` publishes five; after each publish NotifyServing retires the older versions no
 * alias points at — their files deleted from the local S3, their manifests kept (marked `retired`)
 * and readable through the API — while an old version `production` points at keeps its files until
 * the alias leaves it. An alias cannot be moved to a retired version.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const TEAM = { ...DEMO_TEAM, retention: { keepLastVersions: 2 } };

const request = {
  modelName: 'churn',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  args: [],
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
};

describe('retention of published versions (embedded default)', { timeout: 240_000 }, () => {
  let env: Embedded;

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 300 },
      stack: { orphanGraceSeconds: 1, teams: [TEAM] },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);

  async function publish(key: string): Promise<Body> {
    const r = await call('POST', '/v1/runs', request, { 'Idempotency-Key': key });
    expect(r.status).toBe(202);
    const end = Date.now() + 90_000;
    for (;;) {
      const got = await call('GET', `/v1/runs/${r.body.runId}`);
      if (['Succeeded', 'Failed', 'Cancelled'].includes(got.body.phase)) {
        expect(got.body.phase).toBe('Succeeded');
        return got.body;
      }
      if (Date.now() > end) throw new Error(`run ${r.body.runId} is still ${got.body.phase}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  /** The keys under a version's directory in the local S3, relative to it. */
  async function files(version: number): Promise<string[]> {
    const prefix = `models/churn/${version}/`;
    const listed = await env.stack.s3.send(
      new ListObjectsV2Command({ Bucket: env.stack.bucket, Prefix: prefix }),
    );
    return (listed.Contents ?? []).map((o) => (o.Key as string).slice(prefix.length)).sort();
  }

  it('keeps the last 2 and the aliased version 1; retires the others, keeping their manifests', async () => {
    expect((await publish('ret-1')).artifacts.version).toBe('1');
    const moved = await call('POST', '/v1/models/churn/aliases/production', {
      version: 1,
      expectedVersion: null,
    });
    expect(moved.status).toBe(200);
    for (const n of [2, 3, 4]) expect((await publish(`ret-${n}`)).artifacts.version).toBe(String(n));
    const v1Files = await files(1);
    expect(v1Files.length).toBeGreaterThan(1);

    // Version 2: neither among the last 2 (3, 4) nor aliased → only its manifest is left.
    expect(await files(2)).toEqual(['manifest.json']);
    for (const v of [1, 3, 4]) expect((await files(v)).length, `version ${v}`).toBeGreaterThan(1);

    const v2 = await call('GET', '/v1/models/churn/versions/2');
    expect(v2.status).toBe(200);
    expect(v2.body.retired.reason).toMatch(/older than the last 2 versions .* its files were deleted/);
    // The lineage and the file list stay readable.
    expect(v2.body.runId).toMatch(/^run-/);
    expect(v2.body.lineage.team).toBe('demo');
    expect(v2.body.files.length).toBe(v1Files.length - 1);
    const v1 = await call('GET', '/v1/models/churn/versions/1');
    expect(v1.body.retired).toBeUndefined();
    expect(v1.body.aliases).toEqual(['production']);

    const model = await call('GET', '/v1/models/churn');
    const retired = Object.fromEntries(model.body.versions.map((v: Body) => [v.version, Boolean(v.retired)]));
    expect(retired).toEqual({ 1: false, 2: true, 3: false, 4: false });
  });

  it('an alias cannot move to a retired version (400 naming version)', async () => {
    const refused = await call('POST', '/v1/models/churn/aliases/production', { version: 2 });
    expect(refused.status).toBe(400);
    expect(refused.body.issues[0].field).toBe('version');
    expect(refused.body.issues[0].rule).toMatch(/retired .* its files were deleted/);
  });

  it('once production leaves version 1, the next publish retires it (and version 3)', async () => {
    const moved = await call('POST', '/v1/models/churn/aliases/production', {
      version: 4,
      expectedVersion: 1,
    });
    expect(moved.status).toBe(200);
    // Moving the alias retires nothing by itself: version 1 keeps its files until the next sweep.
    expect((await files(1)).length).toBeGreaterThan(1);
    expect((await publish('ret-5')).artifacts.version).toBe('5');
    expect(await files(1)).toEqual(['manifest.json']);
    expect(await files(3)).toEqual(['manifest.json']);
    expect((await files(4)).length).toBeGreaterThan(1);
    expect((await files(5)).length).toBeGreaterThan(1);
    const model = await call('GET', '/v1/models/churn');
    const retired = model.body.versions.filter((v: Body) => v.retired).map((v: Body) => v.version);
    expect(retired.sort()).toEqual([1, 2, 3]);
  });
});
