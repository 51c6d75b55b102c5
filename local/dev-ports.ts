import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { basename, extname, join, resolve } from 'node:path';
import { ValidationError } from '../lib/errors.ts';

/**
 * Stable local addresses for `npm run dev`: the ports of the local S3, SQS, Step Functions and the
 * cluster simulator are chosen at the first start on a state folder and kept in
 * `<state dir>/ports.json`, so the commands the how-to printed stay valid after a restart. A port
 * named in the environment wins; a kept port another program holds now is replaced by a free one,
 * and the how-to says so. The state folder itself defaults to one per configuration file.
 */

export const LOCAL_PORTS = ['s3', 'sqs', 'sfn', 'simulator'] as const;
export type LocalPort = (typeof LOCAL_PORTS)[number];
export type LocalPorts = Record<LocalPort, number>;

/** The environment variable that fixes each port. */
export const PORT_ENV: Record<LocalPort, string> = {
  s3: 'GANTRY_S3_PORT',
  sqs: 'GANTRY_SQS_PORT',
  sfn: 'GANTRY_SFN_PORT',
  simulator: 'GANTRY_SIM_PORT',
};

const LABEL: Record<LocalPort, string> = {
  s3: 'S3',
  sqs: 'SQS',
  sfn: 'Step Functions',
  simulator: 'the cluster simulator',
};

export const PORTS_FILE = 'ports.json';

export interface PortPlan {
  /** What to listen on (0: a free port). */
  ports: LocalPorts;
  /** Kept ports found taken at this start (their new ports are known once the stack listens). */
  moved: Array<{ name: LocalPort; was: number }>;
}

/**
 * The ports of this start: the environment's, else the ones kept in the state folder (unless now
 * taken), else 0. A port given in the environment that is taken, or not a port, is an error
 * naming the variable (the caller asked for exactly that port).
 */
export async function planPorts(
  stateDir: string | undefined,
  env: Record<string, string | undefined> = process.env,
): Promise<PortPlan> {
  const kept = stateDir ? readKept(stateDir) : {};
  const ports = { s3: 0, sqs: 0, sfn: 0, simulator: 0 } as LocalPorts;
  const moved: PortPlan['moved'] = [];
  const issues: Array<{ field: string; rule: string }> = [];
  for (const name of LOCAL_PORTS) {
    const raw = env[PORT_ENV[name]];
    if (raw !== undefined && raw !== '') {
      const port = Number(raw);
      if (!Number.isInteger(port) || port < 0 || port > 65_535) {
        issues.push({ field: PORT_ENV[name], rule: `must be a port number from 0 to 65535, not ${raw}` });
      } else if (port > 0 && !(await isFree(port))) {
        issues.push({
          field: PORT_ENV[name],
          rule: `port ${port} on 127.0.0.1 is in use by another program`,
        });
      } else {
        ports[name] = port;
      }
      continue;
    }
    const was = kept[name];
    if (was === undefined) continue;
    if (await isFree(was)) ports[name] = was;
    else moved.push({ name, was });
  }
  if (issues.length > 0) throw new ValidationError(issues);
  return { ports, moved };
}

/** Keep the ports this start listens on for the next one. */
export function keepPorts(stateDir: string, ports: LocalPorts): void {
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(join(stateDir, PORTS_FILE), `${JSON.stringify(ports, null, 2)}\n`);
}

/** The how-to's lines about kept ports another program held at this start. */
export function movedLines(plan: PortPlan, now: LocalPorts, stateDir: string): string[] {
  return plan.moved.map(
    ({ name, was }) =>
      `${LABEL[name]}'s port ${was} (kept in ${join(stateDir, PORTS_FILE)}) is in use by another program: ` +
      `${LABEL[name]} listens on ${now[name]} from now on, and commands printed by an earlier start that name ` +
      `port ${was} no longer reach it (${PORT_ENV[name]} fixes the port).`,
  );
}

/** Whether nothing listens on 127.0.0.1:port. */
export function isFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const probe = createServer();
    probe.once('error', () => done(false));
    probe.listen(port, '127.0.0.1', () => probe.close(() => done(true)));
  });
}

function readKept(stateDir: string): Partial<LocalPorts> {
  let text: string;
  try {
    text = readFileSync(join(stateDir, PORTS_FILE), 'utf8');
  } catch {
    return {};
  }
  try {
    const doc = JSON.parse(text) as Record<string, unknown>;
    const kept: Partial<LocalPorts> = {};
    for (const name of LOCAL_PORTS) {
      const p = doc[name];
      if (typeof p === 'number' && Number.isInteger(p) && p > 0 && p <= 65_535) kept[name] = p;
    }
    return kept;
  } catch {
    // A damaged file only costs the kept ports: this start picks new ones and writes it again.
    return {};
  }
}

/**
 * The default state folder: `.gantry/state` for `npm run dev` without `--config` (the demo team), and
 * `.gantry/state-<file name>-<hash>` for each configuration file (the hash of its absolute path, and
 * of `--kubeconfig`'s when given), so runs and models of one configuration's teams never meet
 * another's (a model name belongs to the team that first published it).
 */
export function defaultStateDir(config?: string, kubeconfig?: string, cwd = process.cwd()): string {
  if (!config && !kubeconfig) return resolve(cwd, '.gantry/state');
  const key = [config ? resolve(cwd, config) : '', kubeconfig ? resolve(cwd, kubeconfig) : ''].join('\0');
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 8);
  const stem = config ? basename(config, extname(config)) : 'kubeconfig';
  return resolve(cwd, '.gantry', `state-${stem.replace(/[^A-Za-z0-9._-]/g, '_')}-${hash}`);
}
