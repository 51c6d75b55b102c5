import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { makeRunRecords } from '../../lib/run/records.ts';
import { embeddedOptions, loadDevConfig, planDev } from '../../local/dev-config.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import { type ClusterSimulator, startClusterSimulator } from '../../local/simulator/index.ts';
import { apiClient, type Body } from '../helpers/api-client.ts';
import { type RealControlPlane, realcpBinDir, startRealControlPlane } from '../helpers/realcp.ts';
import { tableOf } from '../helpers/state.ts';
import { CRD_ROOT, crdDir, ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * `npm run dev -- --config examples/dev-config.yaml`: the example's two teams each run a job on
 * their own queue within their own limits, its data rule turns a partition that lands in the
 * local bucket into a run, and every finished run's hand-off reaches the serving queue. Then the
 * `npm run dev` process itself: its how-to, its hand-off lines and file, a bad file's errors, and
 * `--kubeconfig` driving a cluster it did not start.
 */

const EXAMPLE = resolve(ROOT, 'examples/dev-config.yaml');
const VISION = 'arn:aws:iam::000000000000:user/vision';
const NLP = 'arn:aws:iam::000000000000:user/nlp';

const request = (team: 'vision' | 'nlp', over: Record<string, unknown> = {}) => ({
  modelName: `${team}-model`,
  team,
  runtime: { name: 'torch-distributed' },
  image: `registry.local/${team}/train:1.0`,
  numNodes: 1,
  resourcesPerNode: { gpu: 2 },
  queue: `${team}-queue`,
  ...over,
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A PUT with exactly these headers and no body (fetch would add a Content-Type). */
function rawPut(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const r = httpRequest(url, { method: 'PUT', headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    r.on('error', reject);
    r.end();
  });
}

describe('the example dev configuration on the embedded default', () => {
  let env: Embedded;
  const vision = apiClient(() => env.api.url, VISION);
  const nlp = apiClient(() => env.api.url, NLP);

  beforeAll(async () => {
    const plan = planDev(loadDevConfig(EXAMPLE));
    // 1200×: the example's hour of training takes 3 s.
    env = await startEmbedded(
      embeddedOptions(plan, { simSpeed: 1200, sfnSpeed: 60, stack: { orphanGraceSeconds: 1 } }),
    );
  }, 60_000);

  afterAll(async () => {
    await env?.close();
  });

  const ended = (call: typeof vision, runId: string) =>
    until(`run ${runId} to end`, async () => {
      const r = await call('GET', `/v1/runs/${runId}`);
      return ['Succeeded', 'Failed', 'Cancelled'].includes(r.body.phase) ? r.body : undefined;
    });

  it('runs a job for each team on its own queue, and keeps each team to its own runs and limits', async () => {
    const v = await vision('POST', '/v1/runs', request('vision'));
    const n = await nlp('POST', '/v1/runs', request('nlp'));
    expect([v.status, n.status]).toEqual([202, 202]);
    const [vr, nr] = await Promise.all([ended(vision, v.body.runId), ended(nlp, n.body.runId)]);
    expect(vr).toMatchObject({ phase: 'Succeeded', namespace: 'vision', team: 'vision' });
    expect(nr).toMatchObject({ phase: 'Succeeded', namespace: 'nlp', team: 'nlp' });
    expect(vr.job).toMatchObject({ cluster: 'local', kind: 'TrainJob', namespace: 'vision' });
    // Tenancy from the file: another team's run is unknown, another team's name is refused.
    expect((await vision('GET', `/v1/runs/${n.body.runId}`)).status).toBe(404);
    expect((await vision('POST', '/v1/runs', request('nlp'))).status).toBe(403);
    // nlp's limits from the file: at most 4 GPUs a run, 2 nodes.
    const big = await nlp('POST', '/v1/runs', request('nlp', { numNodes: 2, resourcesPerNode: { gpu: 4 } }));
    expect(big.status).toBe(403);
    expect(big.body.rule).toMatch(/GPU/i);
    const listed = await nlp('GET', '/v1/runs');
    expect(listed.body.runs.map((r: Body) => r.runId)).toEqual([n.body.runId]);
  });

  it("starts the data rule's run when a partition's marker lands, and it succeeds", async () => {
    const dir = 'data/vision/daily/dt=2026-01-02/';
    for (const [key, body] of [
      [`${dir}part-0.parquet`, 'rows'],
      [`${dir}_SUCCESS`, ''],
    ] as const) {
      await env.stack.s3.send(
        new PutObjectCommand({ Bucket: env.stack.bucket, Key: key, Body: body, ContentLength: body.length }),
      );
    }
    const triggered = await until('the triggered run', async () => {
      const runs = (await vision('GET', '/v1/runs')).body.runs as Body[];
      return runs.find((r) => r.modelName === 'resnet50-daily');
    });
    const run = await ended(vision, triggered.runId);
    expect(run).toMatchObject({ phase: 'Succeeded', team: 'vision', namespace: 'vision' });
    // The record says which data it trained on: the rule, the partition, its URI as the dataset.
    const records = makeRunRecords({ table: tableOf(env.stack), clock: { now: () => new Date() } });
    const spec = (await records.get(triggered.runId))?.spec;
    expect(spec?.trigger).toMatchObject({
      rule: 'vision-daily',
      partition: 'dt=2026-01-02',
      dataUri: `s3://gantry-local/${dir}`,
    });
    expect(spec?.request.datasetUri).toBe(`s3://gantry-local/${dir}`);
  });

  it('hands every finished run to the serving queue', async () => {
    const events: Body[] = [];
    await until(
      'three hand-off events',
      async () => {
        const out = await env.stack.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: env.stack.servingQueueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
          }),
        );
        for (const m of out.Messages ?? []) {
          events.push(JSON.parse(m.Body as string));
          await env.stack.sqs.send(
            new DeleteMessageCommand({ QueueUrl: env.stack.servingQueueUrl, ReceiptHandle: m.ReceiptHandle }),
          );
        }
        return events.length >= 3 ? true : undefined;
      },
      30_000,
    );
    expect(events.map((e) => [e.type, e.model, e.team]).sort()).toEqual([
      ['gantry.model.published', 'nlp-model', 'nlp'],
      ['gantry.model.published', 'resnet50-daily', 'vision'],
      ['gantry.model.published', 'vision-model', 'vision'],
    ]);
    expect(env.stack.env.GANTRY_SERVING_QUEUE_URL).toBe(env.stack.servingQueueUrl);
  });

  it('takes an empty _SUCCESS as Spark and `aws s3api put-object` write it, and retrains on that day', async () => {
    const dir = 'data/vision/daily/dt=2026-01-03/';
    await env.stack.s3.send(
      new PutObjectCommand({ Bucket: env.stack.bucket, Key: `${dir}part-0.parquet`, Body: 'rows' }),
    );
    // The AWS CLI's request for `aws s3api put-object --bucket B --key K` (no --body): Content-Length 0,
    // no Content-Type. The local S3 (fauxqs 2.4.1) answered it with 500 before local/s3/fauxqs-shims.ts.
    const put = await rawPut(`${env.stack.endpoints.s3}/${env.stack.bucket}/${dir}_SUCCESS`, {
      'content-length': '0',
      'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'x-amz-checksum-crc32': 'AAAAAA==',
    });
    expect(put.status, put.body).toBe(200);
    const head = await env.stack.s3.send(
      new HeadObjectCommand({ Bucket: env.stack.bucket, Key: `${dir}_SUCCESS` }),
    );
    expect(head.ContentLength).toBe(0);
    expect(head.ContentType).toBe('binary/octet-stream');
    const triggered = await until('the run on the empty marker', async () => {
      const runs = (await vision('GET', '/v1/runs?model=resnet50-daily')).body.runs as Body[];
      const hit = [];
      for (const r of runs) {
        const records = makeRunRecords({ table: tableOf(env.stack), clock: { now: () => new Date() } });
        if ((await records.get(r.runId))?.spec.trigger?.partition === 'dt=2026-01-03') hit.push(r);
      }
      return hit[0];
    });
    expect(await ended(vision, triggered.runId)).toMatchObject({ phase: 'Succeeded', team: 'vision' });
  });
});

/** `node local/dev.ts …` as `npm run dev -- …` runs it; its output, collected. */
function startDev(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [resolve(ROOT, 'local/dev.ts'), ...args], {
    cwd: ROOT,
    env: { ...process.env, GANTRY_PORT: '0', GANTRY_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout?.on('data', (d: Buffer) => {
    out.stdout += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out.stderr += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, out, exited };
}

async function stopDev(dev: { child: ChildProcess; exited: Promise<number | null> }) {
  if (dev.child.exitCode === null) dev.child.kill('SIGINT');
  return dev.exited;
}

function urlOf(stdout: string): string {
  return (/HTTP API\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(stdout) as RegExpExecArray)[1] as string;
}

describe('the npm run dev process with --config', () => {
  it('prints the teams, rules, serving queue and speed settings, then prints and keeps each hand-off', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'gantry-dev-state-'));
    onTestFinished(() => rmSync(stateDir, { recursive: true, force: true }));
    const dev = startDev(['--config', EXAMPLE, '--state-dir', stateDir], { GANTRY_SIM_SPEED: '1200' });
    try {
      await until(
        'the how-to',
        async () => (dev.out.stdout.includes('Submit a run:') ? true : undefined),
        60_000,
      );
      const how = dev.out.stdout;
      expect(how).toMatch(/Teams\s+vision\s+namespaces vision/);
      expect(how).toMatch(/\n\s+nlp\s+namespaces nlp\s+queues nlp-queue/);
      expect(how).toMatch(
        /Act as a team\s+vision\s+gantry --principal local:vision …\s+curl -H 'x-gantry-principal: local:vision'/,
      );
      expect(how).toMatch(/\n\s+nlp\s+gantry --principal local:nlp …/);
      expect(how).toMatch(
        /without one the CLI calls as\s+arn:aws:iam::000000000000:user\/demo, which is in no team here: 403/,
      );
      expect(how).toMatch(/Data triggers\s+vision-daily: s3:\/\/gantry-local\/data\/vision\/daily\//);
      expect(how).toMatch(/Serving hand-off\s+http:\/\/\S+\/gantry-serving/);
      expect(how).toContain(`appended to ${join(stateDir, 'serving-events.jsonl')}`);
      expect(how).toContain('GANTRY_SIM_SPEED=1200');
      expect(how).toContain('GANTRY_SFN_SPEED=60');
      expect(how).toMatch(/a job trains 60 simulated minutes ≈ 3\.0 s/);
      // The sample request is one the first team may submit.
      const sample = JSON.parse((/-d '(\{.*\})'/.exec(how) as RegExpExecArray)[1] as string);
      expect(sample).toMatchObject({ team: 'vision', namespace: 'vision', queue: 'vision-queue' });

      const call = apiClient(() => urlOf(how), NLP);
      const submitted = await call('POST', '/v1/runs', request('nlp'));
      expect(submitted.status).toBe(202);
      const line = await until(
        'the hand-off line',
        async () =>
          /Serving hand-off: gantry\.model\.published nlp-model v1 {2}team nlp {2}run (run-\S+)/.exec(
            dev.out.stdout,
          ) ?? undefined,
      );
      expect(line[1]).toBe(submitted.body.runId);
      const kept = readFileSync(join(stateDir, 'serving-events.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(kept).toMatchObject([
        { type: 'gantry.model.published', model: 'nlp-model', runId: submitted.body.runId },
      ]);
    } finally {
      expect(await stopDev(dev)).toBe(130);
    }
  }, 120_000);

  it('refuses a bad file with every bad field named, before starting anything', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gantry-dev-bad-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'bad.yaml');
    writeFileSync(
      file,
      readFileSync(EXAMPLE, 'utf8')
        .replace('maxNodes: 2', 'maxNodes: 0')
        .replace('team: vision\n', 'team: ghost\n'),
    );
    const dev = startDev(['--config', file, '--ephemeral']);
    expect(await dev.exited).toBe(2);
    expect(dev.out.stderr).toContain(`Invalid configuration in ${file}:`);
    expect(dev.out.stderr).toMatch(/teams\.1\.maxNodes: .*1/);
    expect(dev.out.stderr).toContain('dataTriggers.0.team: no team named ghost');
    expect(dev.out.stdout).not.toContain('Gantry is running');
  }, 60_000);
});

describe('npm run dev --kubeconfig: a cluster it did not start', () => {
  // A cluster simulator started here plays the real cluster: dev only gets its kubeconfig.
  let sim: ClusterSimulator;
  let kubeconfig: string;

  beforeAll(async () => {
    sim = await startClusterSimulator({
      trainerVersion: '2.2',
      speed: 1200,
      namespaces: ['vision', 'nlp'],
      queues: [{ name: 'vision-queue', clusterQueue: 'vision-cq', quota: { 'nvidia.com/gpu': 8 } }],
      defaultDurationSeconds: 600,
    });
    kubeconfig = join(mkdtempSync(join(tmpdir(), 'gantry-kube-')), 'config');
    writeFileSync(kubeconfig, sim.kubeconfigYaml());
  }, 60_000);

  afterAll(async () => {
    await sim?.close();
    if (kubeconfig) rmSync(dirname(kubeconfig), { recursive: true, force: true });
  });

  it("creates the run's job on that cluster, says so in the how-to, and follows it to the end", async () => {
    const dev = startDev(['--config', EXAMPLE, '--kubeconfig', kubeconfig, '--ephemeral']);
    try {
      await until(
        'the how-to',
        async () => (dev.out.stdout.includes('Submit a run:') ? true : undefined),
        60_000,
      );
      expect(dev.out.stdout).toContain(
        `Cluster             local: the cluster of ${kubeconfig} (a real cluster; no simulator)`,
      );
      const call = apiClient(() => urlOf(dev.out.stdout), VISION);
      // That cluster's jobs cannot write to dev's local bucket: a run without artifacts.
      const submitted = await call('POST', '/v1/runs', request('vision', { producesArtifacts: false }));
      expect(submitted.status).toBe(202);
      const run = await until('the run to end', async () => {
        const r = (await call('GET', `/v1/runs/${submitted.body.runId}`)).body;
        return ['Succeeded', 'Failed', 'Cancelled'].includes(r.phase) ? r : undefined;
      });
      expect(run).toMatchObject({
        phase: 'Succeeded',
        job: { cluster: 'local', kind: 'TrainJob', namespace: 'vision' },
      });
      expect(sim.stats().jobs.completed).toBe(1);
    } finally {
      expect(await stopDev(dev)).toBe(130);
    }
  }, 120_000);
});

describe("README's npm run demo transcript", () => {
  it('is what npm run demo prints, line for line but for ids, numbers and progress lines', async () => {
    const readme = readFileSync(resolve(ROOT, 'README.md'), 'utf8');
    const block = (/What it prints[^\n]*\n\n```\n([\s\S]*?)```/.exec(readme) as RegExpExecArray)[1] as string;
    // Ids, numbers and spacing vary from run to run; which progress lines appear depends on timing.
    const normal = (text: string) =>
      text
        .split('\n')
        .filter((l) => l.trim() !== '' && !/^\s+(phase |…)/.test(l))
        .map((l) =>
          l
            .replace(/run-[a-z2-7]{20}/g, 'RUN')
            .replace(/\d+(\.\d+)?/g, 'N')
            .replace(/\s+/g, ' ')
            .trim(),
        );
    const demo = startDev(['--demo']);
    expect(await demo.exited).toBe(0);
    const printed = normal(demo.out.stdout);
    const documented = normal(block);
    expect(documented.length).toBeGreaterThan(8);
    expect(printed).toEqual(documented);
  }, 120_000);
});

const realcpDirs = ['trainer-v2.2.1', 'kueue-v0.19.2', 'jobset-v0.11.1'].map(crdDir);
const realcpMissing = [
  ...(existsSync(join(realcpBinDir(), 'kube-apiserver')) && existsSync(join(realcpBinDir(), 'etcd'))
    ? []
    : ['kube-apiserver/etcd binaries (npm run realcp:build)']),
  ...(realcpDirs.every(Boolean) ? [] : [`CRDs under ${CRD_ROOT}`]),
];

describe.runIf(tierAvailable('e2e (npm run dev --kubeconfig on a real apiserver)', realcpMissing))(
  'npm run dev --kubeconfig on a real kube-apiserver (light real control plane, no controllers)',
  () => {
    let cp: RealControlPlane;
    let dir: string;
    let ns: string;

    beforeAll(async () => {
      cp = await startRealControlPlane({ crdDirs: realcpDirs as string[] });
      await cp.applyManifests([resolve(CRD_ROOT, 'trainer-v2.2.1/runtimes/torch_distributed.yaml')]);
      ns = await cp.createNamespace('vision');
      dir = mkdtempSync(join(tmpdir(), 'gantry-dev-realcp-'));
      writeFileSync(join(dir, 'kubeconfig'), cp.kubeconfigYaml());
      writeFileSync(
        join(dir, 'dev.yaml'),
        `teams:\n  - { name: vision, principals: ["${VISION}"], namespaces: [${ns}], imagePrefixes: [registry.local/vision/] }\n`,
      );
    }, 180_000);

    afterAll(async () => {
      await cp?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('creates the TrainJob in that apiserver and deletes it there when the run is cancelled', async () => {
      const dev = startDev([
        '--config',
        join(dir, 'dev.yaml'),
        '--kubeconfig',
        join(dir, 'kubeconfig'),
        '--ephemeral',
      ]);
      try {
        await until(
          'the how-to',
          async () => (dev.out.stdout.includes('Submit a run:') ? true : undefined),
          60_000,
        );
        expect(dev.out.stdout).toContain('(a real cluster; no simulator)');
        const call = apiClient(() => urlOf(dev.out.stdout), VISION);
        // No queue: nothing here would admit it (no Kueue controller runs).
        const submitted = await call(
          'POST',
          '/v1/runs',
          request('vision', { namespace: ns, queue: undefined }),
        );
        expect(submitted.status).toBe(202);
        const path = `/apis/trainer.kubeflow.org/v1alpha1/namespaces/${ns}/trainjobs`;
        const job = await until('the TrainJob in the real apiserver', async () => {
          const r = await cp.request<{
            items: Array<{ metadata: { name: string; labels?: Record<string, string> } }>;
          }>('GET', path);
          return r.body.items?.[0];
        });
        expect(job.metadata.name).toBe(submitted.body.runId);
        expect((await call('POST', `/v1/runs/${submitted.body.runId}/cancel`)).status).toBe(202);
        await until('the TrainJob to be gone', async () => {
          const r = await cp.request('GET', `${path}/${job.metadata.name}`);
          return r.status === 404 ? true : undefined;
        });
      } finally {
        expect(await stopDev(dev)).toBe(130);
      }
    }, 180_000);
  },
);
