import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { printedApiUrl, until } from '../helpers/dev-process.ts';
import { ROOT } from '../helpers/tiers.ts';

/**
 * Stable local addresses of `npm run dev` (local/dev-ports.ts, docs/local-dev.md): the S3, SQS, Step
 * Functions and simulator ports of the first start on a state folder are kept there, so the
 * commands the how-to printed still reach the same services after a restart; a kept port another
 * program holds is replaced and the how-to says so; a port fixed in the environment that is taken
 * stops the start with the variable named. Each configuration file gets its own state folder, so
 * the `--config` how-to's own example is not refused for a model plain `npm run dev` published.
 */

const started: ChildProcess[] = [];
const dirs: string[] = [];
const held: Server[] = [];

afterAll(async () => {
  for (const p of started) if (p.exitCode === null) p.kill('SIGKILL');
  for (const s of held) await new Promise((r) => s.close(r));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

interface Dev {
  proc: ChildProcess;
  url: string;
  output: () => string;
}

/** `node local/dev.ts …` from `cwd`, as `npm run dev -- …` runs it; resolves once it printed its how-to. */
async function startDev(args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}) {
  const proc = spawn(process.execPath, [resolve(ROOT, 'local/dev.ts'), ...args], {
    cwd: opts.cwd ?? ROOT,
    env: {
      ...process.env,
      GANTRY_PORT: '0',
      GANTRY_SIM_SPEED: '1200',
      GANTRY_LOG_LEVEL: 'warn',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(proc);
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const url = await printedApiUrl(proc, () => out);
  await until('the how-to', async () => (out.includes('Submit a run:') ? true : undefined));
  return { proc, url, output: () => out } satisfies Dev;
}

async function stop(dev: Dev): Promise<void> {
  const exited = new Promise<void>((r) => dev.proc.once('exit', () => r()));
  dev.proc.kill('SIGTERM');
  await exited;
}

/** The addresses the how-to printed. */
function addresses(out: string) {
  const m = (re: RegExp) => (re.exec(out) as RegExpExecArray)[1] as string;
  return {
    s3: m(/S3 \/ SQS \(fauxqs\)\s+(http:\/\/127\.0\.0\.1:\d+)/),
    sqs: m(/S3 \/ SQS \(fauxqs\)\s+\S+ \/ (http:\/\/127\.0\.0\.1:\d+)/),
    sfn: m(/Step Functions API\s+(http:\/\/127\.0\.0\.1:\d+)/),
    serving: m(/Serving hand-off\s+(http:\/\/\S+)/),
    simulator: m(/curl -s -X POST (http:\/\/127\.0\.0\.1:\d+)\/_sim\/disrupt/),
  };
}

const portOf = (url: string) => Number(new URL(url).port);

/** Hold a port on 127.0.0.1 as another program would. */
async function hold(port: number): Promise<void> {
  const s = createServer();
  await new Promise<void>((r, j) => {
    s.once('error', j);
    s.listen(port, '127.0.0.1', () => r());
  });
  held.push(s);
}

/** What a printed address answers: the bucket listing (S3), an SQS call on the printed queue URL, the Step Functions API. */
async function answers(a: ReturnType<typeof addresses>) {
  const s3 = await fetch(`${a.s3}/gantry-local?list-type=2`);
  const sqs = await fetch(a.sqs, {
    method: 'POST',
    headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'AmazonSQS.GetQueueAttributes' },
    body: JSON.stringify({ QueueUrl: a.serving, AttributeNames: ['QueueArn'] }),
  });
  const sfn = await fetch(a.sfn, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-amz-json-1.0',
      'x-amz-target': 'AWSStepFunctions.ListStateMachines',
    },
    body: '{}',
  });
  return [s3.status, sqs.status, sfn.status];
}

describe('npm run dev keeps its local addresses across restarts', () => {
  it('prints the same S3, SQS, Step Functions, simulator and hand-off addresses after a restart; a kept port taken meanwhile moves, and the how-to says so', async () => {
    const stateDir = tempDir('gantry-dev-ports-');
    let dev = await startDev(['--state-dir', stateDir]);
    const first = addresses(dev.output());
    expect(new URL(first.serving).origin).toBe(first.sqs);
    expect(await answers(first)).toEqual([200, 200, 200]);
    const kept = JSON.parse(readFileSync(join(stateDir, 'ports.json'), 'utf8'));
    expect(kept).toEqual({
      s3: portOf(first.s3),
      sqs: portOf(first.sqs),
      sfn: portOf(first.sfn),
      simulator: portOf(first.simulator),
    });
    await stop(dev);

    dev = await startDev(['--state-dir', stateDir]);
    expect(addresses(dev.output())).toEqual(first);
    expect(dev.output()).not.toContain('Note:');
    expect(await answers(first)).toEqual([200, 200, 200]);
    await stop(dev);

    // Another program takes the kept S3 and SQS ports while Gantry is stopped.
    await hold(portOf(first.s3));
    await hold(portOf(first.sqs));
    dev = await startDev(['--state-dir', stateDir]);
    const moved = addresses(dev.output());
    expect(portOf(moved.s3)).not.toBe(portOf(first.s3));
    expect(portOf(moved.sqs)).not.toBe(portOf(first.sqs));
    expect([moved.sfn, moved.simulator]).toEqual([first.sfn, first.simulator]);
    // The hand-off queue's URL follows the SQS endpoint (fauxqs keeps the URL of the queue's first start).
    expect(new URL(moved.serving).origin).toBe(moved.sqs);
    expect(await answers(moved)).toEqual([200, 200, 200]);
    const out = dev.output().replace(/\s+/g, ' ');
    expect(out).toContain(
      `Note: S3's port ${portOf(first.s3)} (kept in ${join(stateDir, 'ports.json')}) is in use by another program: S3 listens on ${portOf(moved.s3)} from now on`,
    );
    expect(out).toContain(`Note: SQS's port ${portOf(first.sqs)}`);
    expect(JSON.parse(readFileSync(join(stateDir, 'ports.json'), 'utf8'))).toMatchObject({
      s3: portOf(moved.s3),
      sqs: portOf(moved.sqs),
    });
    await stop(dev);
  }, 180_000);

  it('listens where GANTRY_S3_PORT says, and stops with the variable named when that port is taken or not a port', async () => {
    const stateDir = tempDir('gantry-dev-ports-env-');
    const probe = createServer();
    const free = await new Promise<number>((r) =>
      probe.listen(0, '127.0.0.1', () => {
        const p = (probe.address() as { port: number }).port;
        probe.close(() => r(p));
      }),
    );
    const dev = await startDev(['--state-dir', stateDir], { env: { GANTRY_S3_PORT: String(free) } });
    expect(portOf(addresses(dev.output()).s3)).toBe(free);
    // Taken (by the running one): exit 2 before anything starts.
    const second = spawn(process.execPath, [resolve(ROOT, 'local/dev.ts'), '--ephemeral'], {
      cwd: ROOT,
      env: { ...process.env, GANTRY_PORT: '0', GANTRY_S3_PORT: String(free), GANTRY_SFN_PORT: 'abc' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(second);
    let err = '';
    second.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
    });
    const code = await new Promise<number | null>((r) => second.on('exit', (c) => r(c)));
    expect(code).toBe(2);
    expect(err).toContain(`GANTRY_S3_PORT: port ${free} on 127.0.0.1 is in use by another program`);
    expect(err).toContain('GANTRY_SFN_PORT: must be a port number from 0 to 65535, not abc');
    await stop(dev);
  }, 120_000);
});

describe('npm run dev keeps one state folder per configuration file', () => {
  it("the --config how-to's own example succeeds after plain npm run dev published the same model name", async () => {
    const cwd = tempDir('gantry-dev-cwd-');
    // Plain npm run dev: the demo team publishes resnet50 (the how-to's sample model).
    let dev = await startDev([], { cwd });
    expect(dev.output()).toMatch(new RegExp(`State\\s+${join(cwd, '.gantry/state')} \\(`));
    expect(await sampleRun(dev)).toBe('Succeeded');
    await stop(dev);

    dev = await startDev(['--config', resolve(ROOT, 'examples/dev-config.yaml')], { cwd });
    expect(await sampleRun(dev)).toBe('Succeeded');
    const state = (/State\s+(\S+) \(/.exec(dev.output()) as RegExpExecArray)[1] as string;
    expect(state).toMatch(new RegExp(`^${join(cwd, '.gantry')}/state-dev-config-[0-9a-f]{8}$`));
    await stop(dev);
  }, 180_000);
});

/** Submit the how-to's sample request with its header, as printed; the phase it ends in. */
async function sampleRun(dev: Dev): Promise<string> {
  const out = dev.output();
  const header = (
    /-H '([^']+)' -H 'Idempotency-Key: my-first-run'/.exec(out) as RegExpExecArray
  )[1] as string;
  const body = (/-d '(\{.*\})'/.exec(out) as RegExpExecArray)[1] as string;
  const [name, ...value] = header.split(': ');
  const headers = { [name as string]: value.join(': '), 'content-type': 'application/json' };
  const res = await fetch(`${dev.url}/v1/runs`, {
    method: 'POST',
    headers: { ...headers, 'idempotency-key': 'my-first-run' },
    body,
  });
  const submitted = (await res.json()) as { runId?: string };
  expect(res.status, JSON.stringify(submitted)).toBe(202);
  return until('the sample run to end', async () => {
    const r = (await (await fetch(`${dev.url}/v1/runs/${submitted.runId}`, { headers })).json()) as {
      phase: string;
    };
    return ['Succeeded', 'Failed', 'Cancelled'].includes(r.phase) ? r.phase : undefined;
  });
}
