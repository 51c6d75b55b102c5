import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { SimulatorStats } from '../local/simulator/index.ts';

/**
 * The cluster simulator (local/simulator/main.ts) as a process of its own, for the benchmarks that
 * measure Gantry's side apart from the simulator's (a thousand jobs and their handlers in one
 * process starve each other's sockets on 2 cores). Resolves once the simulator printed its address.
 */

export interface SimProcess {
  child: ChildProcessByStdio<null, Readable, null>;
  url: string;
  /** The kubeconfig file the simulator wrote (when asked for with `kubeconfig`). */
  kubeconfig: string;
  /** `GET /_sim/stats` (admin calls are not counted among the requests). */
  stats(): Promise<SimulatorStats>;
  stop(): void;
}

/**
 * `args` go to main.ts after `--port=0`; `kubeconfig` names a temporary file for `--kubeconfig`;
 * `nodeArgs` go to node (e.g. `--cpu-prof`).
 */
export async function spawnSimulator(
  args: string[],
  opts: { kubeconfig?: boolean; nodeArgs?: string[] } = {},
): Promise<SimProcess> {
  const kubeconfig = opts.kubeconfig
    ? join(mkdtempSync(join(tmpdir(), 'gantry-bench-')), 'sim.kubeconfig')
    : '';
  const child = spawn(
    process.execPath,
    [
      ...(opts.nodeArgs ?? []),
      new URL('../local/simulator/main.ts', import.meta.url).pathname,
      '--port=0',
      ...args,
      ...(kubeconfig ? [`--kubeconfig=${kubeconfig}`] : []),
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8');
    let buf = '';
    child.stdout.on('data', (d: string) => {
      buf += d;
      const line = buf.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.once('exit', (code) => reject(new Error(`simulator exited with ${code}`)));
  });
  return {
    child,
    url,
    kubeconfig,
    stats: async () => (await (await fetch(`${url}/_sim/stats`)).json()) as SimulatorStats,
    stop: () => child.kill('SIGTERM'),
  };
}
