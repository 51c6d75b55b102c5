import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

/**
 * moto's server (an AWS emulator) on 127.0.0.1, from the venv `scripts/ci-install.sh quick`
 * installs: `${GANTRY_CACHE:-~/.cache/gantry}/venv-moto-<version>`. Each call starts its own
 * server; `stop()` ends it.
 */

export const MOTO_VERSION = process.env.MOTO_VERSION ?? '5.2.6';

export function motoVenv(): string {
  const cache = process.env.GANTRY_CACHE || join(process.env.HOME ?? '', '.cache', 'gantry');
  return join(cache, `venv-moto-${MOTO_VERSION}`);
}

/** What is missing to run moto's server, for `tierAvailable` (empty when it is installed). */
export function motoMissing(): string[] {
  return existsSync(join(motoVenv(), 'bin', 'moto_server'))
    ? []
    : [`moto ${MOTO_VERSION} server in ${motoVenv()} (bash scripts/ci-install.sh quick)`];
}

export interface Moto {
  /** `http://127.0.0.1:<port>`: the endpoint of every service (AWS_ENDPOINT_URL). */
  endpoint: string;
  port: number;
  /** The server's output so far (for failure messages). */
  output(): string;
  stop(): Promise<void>;
}

export interface MotoOptions {
  /** Default: a free port. */
  port?: number;
  /**
   * A Python script run with the venv's interpreter instead of `moto_server`, given the same
   * arguments (`-H 127.0.0.1 -p <port>`): a server with patches applied first.
   */
  script?: string;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export async function startMoto(options: MotoOptions = {}): Promise<Moto> {
  const venv = motoVenv();
  const missing = motoMissing();
  if (missing.length > 0) {
    throw new Error(`moto's server is not installed: ${missing.join(', ')}`);
  }
  const port = options.port ?? (await freePort());
  const args = ['-H', '127.0.0.1', '-p', String(port)];
  const child: ChildProcess = options.script
    ? spawn(join(venv, 'bin', 'python'), [options.script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(join(venv, 'bin', 'moto_server'), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (chunk: Buffer) => {
    // The last 64 KiB is enough to explain a failure.
    out = (out + chunk.toString('utf8')).slice(-65_536);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gone = false;
  void exited.then(() => {
    gone = true;
  });

  const endpoint = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (gone) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(killer);
  };

  const deadline = Date.now() + 60_000;
  for (;;) {
    if (gone) throw new Error(`moto's server exited before it answered:\n${out}`);
    try {
      const r = await fetch(`${endpoint}/moto-api/data.json`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`moto's server did not answer on ${endpoint} within 60 s:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { endpoint, port, output: () => out, stop };
}
