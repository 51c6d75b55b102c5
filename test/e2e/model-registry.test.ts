import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../cli/exit-codes.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { DEMO_TEAM } from '../../local/stack.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';

/**
 * The model registry on the embedded default: promotion policies applied when a version is
 * published (a data-triggered retraining worse than production is published but not promoted; a
 * better run is), aliases moved through the API (approve, roll back, two movers racing), every move
 * seen by the serving stage (the local serving queue), and no model of one team visible to another.
 * The simulator's final accuracy is a function of the run's hyperparameters
 * (local/simulator/objective.ts): defaults give 0.885, `--dropout=0.2 --batch-size=64` 0.90, the
 * optimum (`--lr=0.00316 --batch-size=64 --dropout=0.2`) 0.95.
 */

const PRINCIPAL = DEMO_TEAM.principals[0] as string;
const OTHER = 'arn:aws:iam::000000000000:user/other-team';
const OTHER_TEAM = { ...DEMO_TEAM, name: 'other', principals: [OTHER], namespaces: ['other'], queues: [] };
const TEAM = {
  ...DEMO_TEAM,
  promotion: [
    {
      model: 'churn',
      alias: 'production',
      policy: 'if-better' as const,
      metric: 'accuracy',
      direction: 'maximize' as const,
      minMargin: 0.001,
    },
    { model: 'churn', alias: 'staging', policy: 'auto' as const, minMargin: 0 },
    { model: '*', alias: 'canary', policy: 'manual' as const, minMargin: 0 },
  ],
};

const request = (args: string[]) => ({
  modelName: 'churn',
  team: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  args,
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
});

describe('the model registry (embedded default)', { timeout: 180_000 }, () => {
  let env: Embedded;
  const seen: Body[] = [];

  beforeAll(async () => {
    env = await startEmbedded({
      simSpeed: 600,
      sfnSpeed: 60,
      simulator: { defaultDurationSeconds: 300 },
      stack: {
        orphanGraceSeconds: 1,
        teams: [TEAM, OTHER_TEAM],
        dataTriggers: [
          {
            name: 'churn-daily',
            team: 'demo',
            bucket: 'gantry-local',
            prefix: 'data/churn/',
            marker: '_SUCCESS',
            run: (({ team: _team, ...rest }) => rest)(request([])),
            concurrency: 'queue',
          },
        ],
      },
    });
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const call = apiClient(() => env.api.url, PRINCIPAL);
  const stranger = apiClient(() => env.api.url, OTHER);

  async function ended(runId: string, timeoutMs = 90_000): Promise<Body> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await call('GET', `/v1/runs/${runId}`);
      if (['Succeeded', 'Failed', 'Cancelled'].includes(r.body.phase)) return r.body;
      if (Date.now() > end) throw new Error(`run ${runId} is still ${r.body.phase}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }

  /** The serving stage: every message on the local serving queue so far (kept in `seen`). */
  async function drainServing(): Promise<Body[]> {
    const url = env.stack.servingQueueUrl as string;
    for (;;) {
      const got = await env.stack.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
      );
      if (!got.Messages?.length) return seen;
      for (const m of got.Messages) {
        seen.push(JSON.parse(m.Body as string) as Body);
        await env.stack.sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }));
      }
    }
  }
  const aliasEvents = (alias: string) =>
    seen.filter((e) => e.type === 'gantry.model.alias-moved' && e.alias === alias).map((e) => e.version);

  async function submit(args: string[], key: string): Promise<Body> {
    const r = await call('POST', '/v1/runs', request(args), { 'Idempotency-Key': key });
    expect(r.status).toBe(202);
    return ended(r.body.runId);
  }

  it('the first version becomes production (no champion) and staging; canary waits for approval', async () => {
    const run = await submit(['--dropout=0.2', '--batch-size=64'], 'reg-1');
    expect(run.phase).toBe('Succeeded');
    expect(run.artifacts.version).toBe('1');
    const outcomes = Object.fromEntries(run.artifacts.promotions.map((p: Body) => [p.alias, p.outcome]));
    expect(outcomes).toEqual({ production: 'promoted', staging: 'promoted', canary: 'pending' });
    const model = await call('GET', '/v1/models/churn');
    expect(model.status).toBe(200);
    const aliases = Object.fromEntries(model.body.aliases.map((a: Body) => [a.alias, a]));
    expect(aliases.production.version).toBe(1);
    expect(aliases.production.movedBy).toBe('policy:if-better');
    expect(aliases.canary.pending.version).toBe(1);
    expect(model.body.versions[0]).toMatchObject({ version: 1, aliases: ['production', 'staging'] });
    expect(model.body.versions[0].metrics.accuracy).toBeCloseTo(0.9, 3);
    await drainServing();
    expect(aliasEvents('production')).toEqual([1]);
  });

  it('a data-triggered retraining worse than production is published, moves staging, and is not promoted (reason shown)', async () => {
    await env.stack.s3.send(
      new PutObjectCommand({ Bucket: env.stack.bucket, Key: 'data/churn/2026-12-05/_SUCCESS', Body: 'ok' }),
    );
    let triggered: Body | undefined;
    const end = Date.now() + 60_000;
    while (!triggered && Date.now() < end) {
      const list = await call('GET', '/v1/runs?model=churn');
      const views = await Promise.all(list.body.runs.map((r: Body) => call('GET', `/v1/runs/${r.runId}`)));
      triggered = views.map((v) => v.body).find((v) => v.trigger?.rule === 'churn-daily');
      if (!triggered) await new Promise((r) => setTimeout(r, 300));
    }
    expect(triggered, 'the marker started a retraining').toBeDefined();
    const run = await ended(triggered?.runId);
    expect(run.phase).toBe('Succeeded');
    expect(run.artifacts.version).toBe('2');
    const production = run.artifacts.promotions.find((p: Body) => p.alias === 'production');
    expect(production.outcome).toBe('refused');
    expect(production.reason).toMatch(
      /not better: accuracy 0\.88\d* vs 0\.9\d* \(version 1, maximize, margin ≥ 0\.001\)/,
    );
    const model = await call('GET', '/v1/models/churn');
    const at = Object.fromEntries(model.body.aliases.map((a: Body) => [a.alias, a.version]));
    expect(at.production).toBe(1);
    expect(at.staging).toBe(2);
    await drainServing();
    expect(aliasEvents('production')).toEqual([1]);
    expect(aliasEvents('staging')).toEqual([1, 2]);
  });

  it('a better run is promoted; a rollback moves production back; the serving stage sees each move', async () => {
    const run = await submit(['--lr=0.00316', '--batch-size=64', '--dropout=0.2'], 'reg-3');
    expect(run.artifacts.version).toBe('3');
    expect(run.artifacts.promotions.find((p: Body) => p.alias === 'production').outcome).toBe('promoted');
    const back = await call('POST', '/v1/models/churn/aliases/production', {
      version: 1,
      expectedVersion: 3,
      reason: 'v3 regressed on the holdout',
    });
    expect(back.status).toBe(200);
    expect(back.body.alias).toMatchObject({ version: 1, previousVersion: 3, movedBy: PRINCIPAL });
    const model = await call('GET', '/v1/models/churn');
    const production = model.body.aliases.find((a: Body) => a.alias === 'production');
    expect(production.history.map((h: Body) => [h.version, h.movedBy])).toEqual([
      [1, PRINCIPAL],
      [3, 'policy:if-better'],
      [1, 'policy:if-better'],
    ]);
    expect(production.history[0].reason).toBe('v3 regressed on the holdout');
    await drainServing();
    expect(aliasEvents('production')).toEqual([1, 3, 1]);
  });

  it('two movers racing from the same version: exactly one wins, the other gets 409 with where it points', async () => {
    const [a, b] = await Promise.all([
      call('POST', '/v1/models/churn/aliases/production', { version: 2, expectedVersion: 1 }),
      call('POST', '/v1/models/churn/aliases/production', { version: 3, expectedVersion: 1 }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    const loser = a.status === 409 ? a : b;
    const winner = a.status === 200 ? a : b;
    expect(loser.body).toMatchObject({
      error: 'AliasConflictError',
      currentVersion: winner.body.alias.version,
    });
  });

  it('approves a pending candidate (manual policy) by moving the alias; bad input is a 400 naming the field', async () => {
    const ok = await call('POST', '/v1/models/churn/aliases/canary', { version: 1, expectedVersion: null });
    expect(ok.status).toBe(200);
    const model = await call('GET', '/v1/models/churn');
    const canary = model.body.aliases.find((a: Body) => a.alias === 'canary');
    expect(canary.version).toBe(1);
    const bad = await call('POST', '/v1/models/churn/aliases/canary', { version: 0 });
    expect(bad.status).toBe(400);
    expect(bad.body.issues[0].field).toBe('version');
    const badAlias = await call('POST', '/v1/models/churn/aliases/Prod_1', { version: 1 });
    expect(badAlias.status).toBe(400);
    expect(badAlias.body.issues[0].field).toBe('alias');
    const missing = await call('POST', '/v1/models/churn/aliases/canary', { version: 99 });
    expect(missing.status).toBe(404);
  });

  it('another team sees no model, no version and cannot move an alias (404, as an unknown name)', async () => {
    expect((await stranger('GET', '/v1/models')).body.models).toEqual([]);
    expect((await stranger('GET', '/v1/models/churn')).status).toBe(404);
    expect((await stranger('GET', '/v1/models/churn/versions/1')).status).toBe(404);
    const move = await stranger('POST', '/v1/models/churn/aliases/production', { version: 2 });
    expect(move.status).toBe(404);
    const mine = await call('GET', '/v1/models');
    expect(mine.body.models).toEqual([
      expect.objectContaining({ name: 'churn', team: 'demo', latestVersion: 3 }),
    ]);
    const version = await call('GET', '/v1/models/churn/versions/3');
    expect(version.status).toBe(200);
    expect(version.body.lineage.hyperparameters).toBeDefined();
  });

  it('the CLI: models, model NAME, promote, rollback (a user at a terminal)', async () => {
    const home = await mkdtemp(join(tmpdir(), 'gantry-registry-cli-'));
    const cli = join(import.meta.dirname, '..', '..', 'cli', 'gantry.ts');
    const gantry = async (...args: string[]) => {
      try {
        const { stdout, stderr } = await promisify(execFile)(process.execPath, [cli, ...args], {
          env: { PATH: process.env.PATH, HOME: home, GANTRY_ENDPOINT: env.api.url },
        });
        return { code: 0, stdout, stderr };
      } catch (err) {
        const e = err as { code: number; stdout: string; stderr: string };
        return { code: e.code, stdout: e.stdout, stderr: e.stderr };
      }
    };
    try {
      const listed = await gantry('models');
      expect(listed.code, listed.stderr).toBe(EXIT.ok);
      expect(listed.stdout).toMatch(/^MODEL\s+TEAM\s+LATEST\s+ALIASES$/m);
      expect(listed.stdout).toMatch(/^churn\s+demo\s+3\s+canary=1 production=\d staging=3$/m);
      const shown = await gantry('model', 'churn');
      expect(shown.code, shown.stderr).toBe(EXIT.ok);
      expect(shown.stdout).toMatch(/^3\s+\S+\s+staging\S*\s+run-\S+\s+.*accuracy=0\.95/m);
      expect(shown.stdout).toContain('production: version');
      const promoted = await gantry(
        'promote',
        'churn',
        '3',
        '--alias',
        'production',
        '--reason',
        'holdout ok',
      );
      expect(promoted.code, promoted.stderr).toBe(EXIT.ok);
      expect(promoted.stdout).toMatch(/^churn production: version \d → version 3$/m);
      const back = await gantry('rollback', 'churn');
      expect(back.code, back.stderr).toBe(EXIT.ok);
      const after = (await call('GET', '/v1/models/churn')).body.aliases.find(
        (a: Body) => a.alias === 'production',
      );
      expect(back.stdout).toBe(`churn production: version 3 → version ${after.version}\n`);
      expect(after.reason).toBe('rollback from version 3');
      const bad = await gantry('promote', 'churn', 'latest');
      expect(bad.code).toBe(EXIT.usage);
      expect(bad.stderr).toMatch(/VERSION must be a version number/);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
