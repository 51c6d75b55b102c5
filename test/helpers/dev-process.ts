import { type ChildProcess, spawn } from 'node:child_process';
import { PRINCIPAL_HEADER } from '../../local/http-api.ts';
import { DEMO_TEAM } from '../../local/stack.ts';

/** `npm run dev`'s entry point (local/dev.ts) as a child process, for the restart and crash tests. */
export interface Dev {
  proc: ChildProcess;
  url: string;
  output: () => string;
}

const PRINCIPAL = DEMO_TEAM.principals[0] as string;

/**
 * Start `local/dev.ts` on a state directory; resolves once it prints its API address (after it
 * restored the runs of the previous start). `started` collects the processes for the file's
 * afterAll. 60 simulated seconds per real second: a 1800 s run takes 30 s.
 */
export async function startDev(stateDir: string, started: ChildProcess[], simSpeed = 60): Promise<Dev> {
  const proc = spawn(process.execPath, ['local/dev.ts', '--state-dir', stateDir], {
    env: { ...process.env, GANTRY_PORT: '0', GANTRY_SIM_SPEED: String(simSpeed), GANTRY_LOG_LEVEL: 'warn' },
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
  return { proc, url, output: () => out };
}

/** The API address `npm run dev` prints in its banner (after it restored its runs), from its output so far. */
export function printedApiUrl(proc: ChildProcess, output: () => string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /HTTP API\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(output());
      if (m?.[1]) {
        clearInterval(timer);
        resolve(m[1]);
      } else if (proc.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`dev exited ${proc.exitCode}: ${output()}`));
      }
    }, 100);
  });
}

export async function stopDev(dev: Dev, signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
  const exited = new Promise<void>((r) => dev.proc.once('exit', () => r()));
  dev.proc.kill(signal);
  await exited;
}

/** One call of the API as the demo team. */
export async function call(dev: Dev, method: string, path: string, body?: unknown, key?: string) {
  const res = await fetch(`${dev.url}${path}`, {
    method,
    headers: {
      [PRINCIPAL_HEADER]: PRINCIPAL,
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...(key ? { 'idempotency-key': key } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 90_000,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A one-GPU run request of the demo team. */
export const devRequest = (modelName: string) => ({
  modelName,
  team: 'demo',
  namespace: 'demo',
  runtime: { name: 'torch-distributed' },
  image: 'registry.local/vision/train:1.0',
  numNodes: 1,
  resourcesPerNode: { gpu: 1 },
  queue: 'demo-queue',
});

/** The run's view once its phase is one of `phases`. */
export const phaseIs = (dev: Dev, runId: string, phases: string[], timeoutMs?: number) =>
  until(
    `${runId} in ${phases.join('/')}`,
    async () => {
      const r = (await call(dev, 'GET', `/v1/runs/${runId}`)).body;
      return phases.includes(String(r.phase)) ? r : undefined;
    },
    timeoutMs,
  );
