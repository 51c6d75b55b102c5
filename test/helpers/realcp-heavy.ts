/**
 * Heavy-tier real control plane: a whole fake GPU cluster with the real controllers, every binary
 * built from the Go module proxy (scripts/realcp-heavy-build.sh, wrapper modules in
 * tools/realcp-heavy/*), everything bound to 127.0.0.1. Started in this order:
 *
 *   1. the light tier (etcd + kube-apiserver, test/helpers/realcp.ts) with the JobSet, Trainer and
 *      Kueue CRDs of the chosen version set, read from the Go module cache of the pinned modules
 *   2. kube-controller-manager (Job, GC, namespace, node-lifecycle … controllers; signs SA tokens
 *      with the apiserver's sa.key from the light tier's runDir)
 *   3. kube-scheduler
 *   4. kwok with fake nodes carrying `nvidia.com/gpu` capacity and pod stages (see KWOK_ENV)
 *   5. JobSet controller, 6. Kubeflow Trainer controller, 7. Kueue: each with webhooks served on
 *      127.0.0.1 from a cert signed by a CA made here; the webhook configurations point at
 *      `https://127.0.0.1:<port><path>` with that CA as caBundle (cert-manager / internal cert
 *      rotation off)
 *   7b. opt-in (`trainingOperator: true`): Kubeflow Training Operator v1 (PyTorchJob only) with its
 *      kubeflow.org CRDs and its own cert rotator kept happy by a pre-made Secret (see
 *      startTrainingOperator)
 *   8. fixtures: ResourceFlavor, ClusterQueue with a GPU quota, the Trainer runtimes
 *      (torch-distributed as upstream ships it, and torch-distributed-failfast: the same with the
 *      Job's backoffLimit 0 so one failed pod fails the job at once)
 *
 * kwok runs no code: pods (of a Job or a PyTorchJob) go Pending → Running/Ready → Succeeded after a
 * delay. The trainer container's env steers them (Gantry passes a run's `env` through to it):
 *   KWOK_RUN_DURATION=<go duration>   how long a pod "runs" (default 5s)
 *   KWOK_EXIT_CODE=<n>                the pod fails with that exit code instead of succeeding
 *   KWOK_IMAGE_PULL=<reason>          the pod never starts: Pending, its containers waiting with that
 *                                     reason (ImagePullBackOff or ErrImagePull) and the kubelet's message
 *
 * Environment: as the light tier, plus REALCP_HEAVY_BIN_DIR_<COMPONENT> (override one component's
 * bin dir, e.g. REALCP_HEAVY_BIN_DIR_KWOK), REALCP_DEBUG=1 (phases to stderr).
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseYamlAll, stringifyYaml } from '../../lib/yaml.ts';
import {
  freePorts,
  type KubeResponse,
  type RealControlPlane,
  startRealControlPlane,
  stopProc,
} from './realcp.ts';

// ----------------------------------------------------------------------------------------------------
// Version sets and binaries

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const TOOLS = join(REPO_ROOT, 'tools', 'realcp-heavy');
export const HEAVY_BUILD_SCRIPT = join(REPO_ROOT, 'scripts', 'realcp-heavy-build.sh');

export type VersionSetName = 'v2.1' | 'v2.2' | 'v2.3';

/**
 * Each controller of a set is built in a wrapper module whose module graph is the one of that
 * project's own go.mod (as its release image is built): no binary is compiled against a dependency
 * version its go.mod does not ask for. A shared graph would, by MVS, raise one project's
 * dependencies to another's (Kueue v0.19.2 compiled against Trainer v2.3.0 while its go.mod asks
 * for v2.2.1). `graphContradictions()` checks this; test/e2e-real/version-sets.test.ts asserts it.
 * The table is tools/realcp-heavy/version-sets.tsv (the build script reads it too).
 *
 *   v2.1  JobSet v0.10.1 (pinned by Trainer v2.1.0), Trainer v2.1.0, Kueue v0.16.6: the last Kueue
 *         minor built against Trainer v2.1 (Kueue ≥ 0.17 patches the TrainJob through
 *         `runtimePatches`, which Trainer 2.1 does not have: admitted, never unsuspended, kueue#11931);
 *         v0.16.6 is the newest v0.16 patch the Go module proxy serves.
 *   v2.2  JobSet v0.11.1, Trainer v2.2.0, Kueue v0.17.1 (its go.mod asks for exactly Trainer v2.2.0
 *         and JobSet v0.11.1), each from its own wrapper (`kueue-v0.17.1`'s graph is exactly Kueue's
 *         own go.mod, Trainer v2.2.0 in it only as a library).
 *   v2.3  JobSet v0.12.0 (pinned by Trainer v2.3.0), Trainer v2.3.0, Kueue v0.19.2 as released: built
 *         against Trainer v2.2.1's API (no Kueue release requires Trainer v2.3.0 yet), talking to
 *         Trainer v2.3.0's CRDs.
 */
const SETS_TSV = join(TOOLS, 'version-sets.tsv');

function readSets(): {
  sets: Record<string, { jobset: string; trainer: string; kueue: string }>;
  always: string[];
} {
  const sets: Record<string, { jobset: string; trainer: string; kueue: string }> = {};
  let always: string[] = [];
  for (const line of readFileSync(SETS_TSV, 'utf8').split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const [name, ...rest] = line.split('\t');
    if (name === 'always') always = (rest[0] ?? '').trim().split(/\s+/);
    else if (name && rest.length === 3) {
      const [jobset, trainer, kueue] = rest.map((f) => f.trim()) as [string, string, string];
      sets[name] = { jobset, trainer, kueue };
    }
  }
  return { sets, always };
}

const TABLE = readSets();
const SETS = TABLE.sets as Record<VersionSetName, { jobset: string; trainer: string; kueue: string }>;

export const VERSION_SETS = Object.keys(SETS) as VersionSetName[];
/** The newest set: every run tests it in full. */
export const NEWEST_SET: VersionSetName = 'v2.3';
/** The components every e2e-real run needs whatever its sets. */
export const ALWAYS_COMPONENTS = TABLE.always;

/**
 * The version sets this run tests: `GANTRY_VERSION_SETS` (comma-separated names, or `all`), all of
 * them when unset. CI tests the newest set in full and one older set by rotation (.ci/run).
 */
export function activeVersionSets(): VersionSetName[] {
  const raw = (process.env.GANTRY_VERSION_SETS ?? 'all').trim();
  if (raw === 'all' || raw === '') return VERSION_SETS;
  const asked = raw.split(',').map((s) => s.trim());
  const unknown = asked.filter((s) => !VERSION_SETS.includes(s as VersionSetName));
  if (unknown.length)
    throw new Error(
      `GANTRY_VERSION_SETS: unknown set ${unknown.join(', ')} (sets: ${VERSION_SETS.join(', ')}, or all)`,
    );
  return VERSION_SETS.filter((s) => asked.includes(s));
}

/** The oldest set this run tests (the newest when it tests only that one). */
export function oldestActiveSet(): VersionSetName {
  return activeVersionSets()[0] ?? NEWEST_SET;
}

export interface VersionSet {
  name: VersionSetName;
  /** Build component (tools/realcp-heavy/<component>) holding each binary. */
  jobsetComponent: string;
  trainerComponent: string;
  kueueComponent: string;
  /** The distinct components the set needs (for heavyMissing). */
  components: string[];
  trainer: string;
  kueue: string;
  jobset: string;
}

function pinned(goMod: string, module: string): string | undefined {
  if (!existsSync(goMod)) return undefined;
  for (const line of readFileSync(goMod, 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[0] === module && f[1]) return f[1];
    if (f[0] === 'require' && f[1] === module && f[2]) return f[2];
  }
  return undefined;
}

export const JOBSET_MODULE = 'sigs.k8s.io/jobset';
export const TRAINER_MODULE = 'github.com/kubeflow/trainer/v2';
export const KUEUE_MODULE = 'sigs.k8s.io/kueue';

export function versionSet(name: VersionSetName): VersionSet {
  const c = SETS[name];
  const at = (component: string, module: string) =>
    pinned(join(TOOLS, component, 'go.mod'), module) ?? 'unpinned';
  return {
    name,
    jobsetComponent: c.jobset,
    trainerComponent: c.trainer,
    kueueComponent: c.kueue,
    components: [...new Set([c.jobset, c.trainer, c.kueue])],
    jobset: at(c.jobset, JOBSET_MODULE),
    trainer: at(c.trainer, TRAINER_MODULE),
    kueue: at(c.kueue, KUEUE_MODULE),
  };
}

/**
 * The requirements of `module`'s own go.mod (at the version the component pins) that the
 * component's module graph selects at another version, as "path: go.mod wants X, graph selects Y".
 * Empty when the binary is compiled exactly against what its project asks for.
 */
export function graphContradictions(component: string, module: string): string[] {
  const dir = join(TOOLS, component);
  const version = pinned(join(dir, 'go.mod'), module);
  if (!version) return [`${component} does not require ${module}`];
  const env = goEnv();
  // -e: modules of the graph no package is built from may be unavailable (k8s.io/kubernetes's v0.0.0 staging)
  const r = spawnSync('go', ['list', '-e', '-m', '-f', '{{.Path}} {{.Version}}', 'all'], {
    cwd: dir,
    env,
    encoding: 'utf8',
  });
  const selected = new Map<string, string>();
  for (const line of (r.stdout ?? '').split('\n')) {
    const [p, v] = line.trim().split(' ');
    if (p && v) selected.set(p, v);
  }
  const out: string[] = [];
  for (const [p, want] of goModRequires(module, version)) {
    const got = selected.get(p);
    if (got !== want) out.push(`${p}: go.mod wants ${want}, graph selects ${got ?? 'nothing'}`);
  }
  return out;
}

function goEnv(): NodeJS.ProcessEnv {
  return { ...process.env, GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? 'local', GOFLAGS: '-mod=readonly' };
}

/** The requirements (path → version) of `module@version`'s own go.mod, from the Go module cache. */
export function goModRequires(module: string, version: string): Map<string, string> {
  const info = JSON.parse(
    execFileSync('go', ['mod', 'download', '-json', `${module}@${version}`], {
      cwd: TOOLS,
      env: goEnv(),
      encoding: 'utf8',
    }),
  ) as { GoMod?: string; Error?: string };
  if (!info.GoMod) throw new Error(`realcp-heavy: no go.mod for ${module}@${version}: ${info.Error ?? ''}`);
  const out = new Map<string, string>();
  let block = false;
  for (const raw of readFileSync(info.GoMod, 'utf8').split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    let req: string[] | undefined;
    if (/^require\s*\($/.test(line)) block = true;
    else if (block && line === ')') block = false;
    else if (block && line) req = line.split(/\s+/);
    else if (/^require\s+[^(]/.test(line)) req = line.split(/\s+/).slice(1);
    if (req?.[0] && req[1]) out.set(req[0], req[1]);
  }
  return out;
}

/** The `tool` packages of a wrapper module's go.mod. */
function tools(component: string): string[] {
  const goMod = join(TOOLS, component, 'go.mod');
  if (!existsSync(goMod)) return [];
  const out: string[] = [];
  let block = false;
  for (const raw of readFileSync(goMod, 'utf8').split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    if (/^tool\s*\($/.test(line)) block = true;
    else if (block && line === ')') block = false;
    else if (block && line) out.push(line);
    else if (line.startsWith('tool ')) out.push(line.slice(5).trim());
  }
  return out;
}

/** The binaries a component builds (as the build script names them: last path element, no ".v1"). */
export function componentBinaries(component: string): string[] {
  return tools(component).map((t) => (t.split('/').pop() ?? t).replace(/\.v[0-9]+$/, ''));
}

let binDirCache: Record<string, string> | undefined;

/** component → bin dir, as `scripts/realcp-heavy-build.sh --print-bin-dirs` computes it (no build). */
export function heavyBinDirs(): Record<string, string> {
  if (binDirCache) return binDirCache;
  const r = spawnSync('bash', [HEAVY_BUILD_SCRIPT, '--print-bin-dirs'], { encoding: 'utf8' });
  const out: Record<string, string> = {};
  for (const line of (r.stdout ?? '').split('\n')) {
    const [c, dir] = line.split('\t');
    if (c && dir) out[c] = dir;
  }
  for (const c of Object.keys(out)) {
    const env = process.env[`REALCP_HEAVY_BIN_DIR_${c.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`];
    if (env) out[c] = env;
  }
  binDirCache = out;
  return out;
}

/**
 * What is missing to run the given components, one precise line each (the module@version that
 * failed to build when the build script recorded one), for tierAvailable().
 */
export function heavyMissing(components: string[]): string[] {
  const dirs = heavyBinDirs();
  const missing: string[] = [];
  for (const c of components) {
    const dir = dirs[c];
    if (!dir) {
      missing.push(`${c} (no wrapper module tools/realcp-heavy/${c})`);
      continue;
    }
    const bins = componentBinaries(c);
    const absent = (bins.length ? bins : ['(none)']).filter((b) => !existsSync(join(dir, b)));
    if (absent.length === 0) continue;
    const failedFile = join(dir, '..', 'FAILED');
    const why = existsSync(failedFile)
      ? `build failed: ${readFileSync(failedFile, 'utf8').trim()}`
      : `not built: run bash scripts/realcp-heavy-build.sh ${c}`;
    missing.push(`${c} binaries ${absent.join(', ')} in ${dir} (${why})`);
  }
  return missing;
}

function binPath(component: string, name: string): string {
  const dir = heavyBinDirs()[component];
  if (!dir) throw new Error(`realcp-heavy: unknown component ${component}`);
  const p = join(dir, name);
  if (!existsSync(p)) throw new Error(`realcp-heavy: ${heavyMissing([component]).join('; ')}`);
  return p;
}

let modCache: string | undefined;
/** `$GOMODCACHE/<module>@<version>` (module paths here have no upper-case letters to escape). */
export function moduleDir(module: string, version: string): string {
  modCache ??= execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8' }).trim();
  const dir = join(modCache, `${module}@${version}`);
  if (!existsSync(dir)) {
    // Extract it (the build already downloaded it on this machine; a fresh one fetches it).
    execFileSync('go', ['mod', 'download', `${module}@${version}`], {
      cwd: TOOLS,
      env: { ...process.env, GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? 'local', GOFLAGS: '-mod=mod' },
      stdio: 'ignore',
    });
  }
  if (!existsSync(dir)) throw new Error(`realcp-heavy: ${module}@${version} is not in ${modCache}`);
  return dir;
}

// ----------------------------------------------------------------------------------------------------
// Processes (children are listed in the light tier's <runDir>/pids, so its watchdog kills them too)

interface Proc {
  name: string;
  child: ChildProcess;
  logFile: string;
  exited: boolean;
  exitCode: number | null;
  exitPromise: Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHook = false;

function spawnLogged(
  name: string,
  bin: string,
  args: string[],
  runDir: string,
  env: NodeJS.ProcessEnv = {},
): Proc {
  if (!exitHook) {
    exitHook = true;
    process.on('exit', () => {
      for (const c of live) {
        try {
          c.kill('SIGKILL');
        } catch {
          /* gone */
        }
      }
    });
  }
  const logFile = join(runDir, `${name}.log`);
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    const base: NodeJS.ProcessEnv = { ...process.env };
    for (const k of Object.keys(base)) if (k === 'KUBECONFIG' || k.startsWith('KUBE')) delete base[k];
    child = spawn(bin, args, { stdio: ['ignore', fd, fd], cwd: runDir, env: { ...base, ...env } });
  } finally {
    closeSync(fd);
  }
  const proc: Proc = { name, child, logFile, exited: false, exitCode: null, exitPromise: Promise.resolve() };
  proc.exitPromise = new Promise<void>((res) => {
    child.once('exit', (code) => {
      proc.exited = true;
      proc.exitCode = code;
      live.delete(child);
      res();
    });
    child.once('error', (err) => {
      proc.exited = true;
      live.delete(child);
      writeFileSync(logFile, `\nspawn error: ${err.message}\n`, { flag: 'a' });
      res();
    });
  });
  if (child.pid !== undefined) {
    child.unref();
    live.add(child);
    writeFileSync(join(runDir, 'pids'), `${child.pid}\n`, { flag: 'a' });
  }
  return proc;
}

function logTail(p: Proc, lines = 30): string {
  try {
    return readFileSync(p.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

class HeavyError extends Error {}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const debug = (msg: string): void => {
  if (process.env.REALCP_DEBUG) process.stderr.write(`[realcp-heavy ${new Date().toISOString()}] ${msg}\n`);
};

async function waitFor(
  what: string,
  deadline: number,
  check: () => Promise<true | string>,
  procs: Proc[],
  intervalMs = 200,
): Promise<void> {
  let last = '';
  for (;;) {
    for (const p of procs) {
      if (p.exited) {
        throw new HeavyError(
          `realcp-heavy: ${p.name} exited (code ${p.exitCode}) while waiting for ${what}; last lines of ${p.logFile}:\n${logTail(p)}`,
        );
      }
    }
    try {
      const r = await check();
      if (r === true) return;
      last = r;
    } catch (err) {
      if (err instanceof HeavyError) throw err;
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline)
      throw new HeavyError(`realcp-heavy: timed out waiting for ${what} (last: ${last})`);
    await sleep(intervalMs);
  }
}

/** GET a URL; any HTTP status counts as an answer. TLS is not verified (health endpoints only). */
function probe(url: string): Promise<{ status: number; text: string }> {
  return new Promise((res, rej) => {
    const opts = { method: 'GET', timeout: 2000, rejectUnauthorized: false };
    const req = (url.startsWith('https:') ? httpsRequest : httpRequest)(url, opts, (resp) => {
      let text = '';
      resp.setEncoding('utf8');
      resp.on('data', (c: string) => {
        text += c;
      });
      resp.on('end', () => res({ status: resp.statusCode ?? 0, text }));
      resp.on('error', rej);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', rej);
    req.end();
  });
}

const healthy = (url: string) => async (): Promise<true | string> => {
  const r = await probe(url);
  return r.status === 200 ? true : `HTTP ${r.status} ${r.text.slice(0, 200)}`;
};

// ----------------------------------------------------------------------------------------------------
// Certificates (openssl): one CA, one serving cert for 127.0.0.1 shared by every webhook server

interface Certs {
  dir: string;
  caPem: string;
  crt: string;
  key: string;
}

/** A server certificate for `san`, signed by the CA already in `dir` (ca.crt, ca.key). */
function issueServerCert(dir: string, opts: { cn: string; san: string; days: number }): Certs {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  writeFileSync(
    join(dir, 'ext.cnf'),
    `subjectAltName=${opts.san}\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n`,
  );
  run([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'tls.key',
    '-out',
    'tls.csr',
    '-subj',
    `/CN=${opts.cn}`,
  ]);
  run([
    'x509',
    '-req',
    '-in',
    'tls.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'tls.crt',
    '-days',
    String(opts.days),
    '-extfile',
    'ext.cnf',
  ]);
  return {
    dir,
    caPem: readFileSync(join(dir, 'ca.crt'), 'utf8'),
    crt: readFileSync(join(dir, 'tls.crt'), 'utf8'),
    key: readFileSync(join(dir, 'tls.key'), 'utf8'),
  };
}

function makeCerts(runDir: string): Certs {
  const dir = join(runDir, 'webhook-certs');
  mkdirSync(dir, { recursive: true });
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  run([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '2',
    '-subj',
    '/CN=gantry-realcp-heavy-ca',
  ]);
  return issueServerCert(dir, { cn: '127.0.0.1', san: 'IP:127.0.0.1,DNS:localhost', days: 2 });
}

function writeCertDir(dir: string, certs: Certs): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'tls.crt'), certs.crt);
  writeFileSync(join(dir, 'tls.key'), certs.key, { mode: 0o600 });
  writeFileSync(join(dir, 'ca.crt'), certs.caPem);
  return dir;
}

/**
 * Kueue always watches /etc/kueue/metrics/certs/tls.{crt,key} when its internal cert management is
 * off, and exits if they are missing (cmd/kueue/main.go), whatever the metrics address. Metrics are
 * off here, so any valid pair will do: write one only when none is there (CI runs as root).
 */
function ensureKueueMetricsCerts(certs: Certs): void {
  const dir = '/etc/kueue/metrics/certs';
  if (existsSync(join(dir, 'tls.crt')) && existsSync(join(dir, 'tls.key'))) return;
  mkdirSync(dir, { recursive: true });
  for (const [f, body] of [
    ['tls.key', certs.key],
    ['tls.crt', certs.crt],
  ] as const) {
    const tmp = join(dir, `.${f}.${process.pid}`);
    writeFileSync(tmp, body, { mode: 0o600 });
    renameSync(tmp, join(dir, f));
  }
}

// ----------------------------------------------------------------------------------------------------
// kwok stages

/** The trainer-container env that steers kwok's pod stages (see the file comment). */
export const KWOK_ENV = {
  runDuration: 'KWOK_RUN_DURATION',
  exitCode: 'KWOK_EXIT_CODE',
  imagePull: 'KWOK_IMAGE_PULL',
  /**
   * With KWOK_IMAGE_PULL: the pull succeeds after this long (a kwok duration, e.g. `20s`) — the
   * kubelet's retry after a registry outage — and the pod starts (gantry-pod-image-pulled).
   */
  imagePullRecover: 'KWOK_IMAGE_PULL_RECOVER',
} as const;

const envValue = (name: string) =>
  `.spec.containers.[] | (.env // []) | .[] | select(.name == "${name}") | .value`;

function podStages(): unknown[] {
  // Pods of a batch Job (JobSet/Trainer) or of a Training Operator v1 PyTorchJob (which owns its pods directly).
  const ownedByJob = {
    key: '.metadata.ownerReferences.[].kind',
    operator: 'In',
    values: ['Job', 'PyTorchJob'],
  };
  const runningReady = [
    { key: '.metadata.deletionTimestamp', operator: 'DoesNotExist' },
    { key: '.status.phase', operator: 'In', values: ['Running'] },
    { key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: 'In', values: ['True'] },
    ownedByJob,
  ];
  const terminated = (exit: string, reason: string, phase: string) => `{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: ${exit}
      finishedAt: {{ $now | Quote }}
      reason: ${reason}
      startedAt: {{ $now | Quote }}
{{ end }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: PodCompleted
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: PodCompleted
  type: ContainersReady
phase: ${phase}
`;
  // The kubelet's wording (pkg/kubelet/images/image_manager.go: "Back-off pulling image %q: <the
  // last pull error>"; the pull error as containerd reports an unknown reference).
  const imagePull = `{{ $now := Now }}
{{ $reason := "ImagePullBackOff" }}{{ range .spec.containers }}{{ range .env }}{{ if eq .name "${KWOK_ENV.imagePull}" }}{{ $reason = .value }}{{ end }}{{ end }}{{ end }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodReadyToStartContainers
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  message: "containers with unready status: [{{ range $i, $c := .spec.containers }}{{ if $i }} {{ end }}{{ $c.name }}{{ end }}]"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  reason: ContainersNotReady
  message: "containers with unready status: [{{ range $i, $c := .spec.containers }}{{ if $i }} {{ end }}{{ $c.name }}{{ end }}]"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
{{ $pull := printf "failed to pull and unpack image \\"%s\\": failed to resolve reference \\"%s\\": %s not found" .image .image .image }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    waiting:
      reason: {{ $reason | Quote }}
      message: {{ if eq $reason "ErrImagePull" }}{{ $pull | Quote }}{{ else }}{{ printf "Back-off pulling image \\"%s\\": ErrImagePull: %s" .image $pull | Quote }}{{ end }}
{{ end }}
{{ $hostIPs := NodeIPsWith .spec.nodeName }}
{{ with $hostIPs }}
hostIP: {{ index . 0 | Quote }}
{{ end }}
phase: Pending
startTime: {{ $now | Quote }}
`;
  return [
    {
      // A pod whose trainer container carries KWOK_IMAGE_PULL never starts: its containers wait with
      // that reason (ImagePullBackOff, or ErrImagePull) and it stays Pending, as on a node that
      // cannot pull the image. The upstream pod-ready stage skips such pods (kwokStagesYaml).
      apiVersion: 'kwok.x-k8s.io/v1alpha1',
      kind: 'Stage',
      metadata: { name: 'gantry-pod-image-pull' },
      spec: {
        resourceRef: { apiGroup: 'v1', kind: 'Pod' },
        selector: {
          matchExpressions: [
            { key: '.metadata.deletionTimestamp', operator: 'DoesNotExist' },
            { key: '.status.phase', operator: 'In', values: ['Pending'] },
            { key: envValue(KWOK_ENV.imagePull), operator: 'Exists' },
            {
              key: '.status.containerStatuses.[] | .state.waiting.reason',
              operator: 'NotIn',
              values: ['ImagePullBackOff', 'ErrImagePull'],
            },
            ownedByJob,
          ],
        },
        next: { statusTemplate: imagePull },
      },
    },
    {
      apiVersion: 'kwok.x-k8s.io/v1alpha1',
      kind: 'Stage',
      metadata: { name: 'gantry-pod-complete' },
      spec: {
        resourceRef: { apiGroup: 'v1', kind: 'Pod' },
        selector: {
          matchExpressions: [...runningReady, { key: envValue(KWOK_ENV.exitCode), operator: 'DoesNotExist' }],
        },
        delay: {
          durationMilliseconds: 5000,
          durationFrom: { expressionFrom: envValue(KWOK_ENV.runDuration) },
        },
        next: { statusTemplate: terminated('0', 'Completed', 'Succeeded') },
      },
    },
    {
      apiVersion: 'kwok.x-k8s.io/v1alpha1',
      kind: 'Stage',
      metadata: { name: 'gantry-pod-fail' },
      spec: {
        resourceRef: { apiGroup: 'v1', kind: 'Pod' },
        selector: {
          matchExpressions: [...runningReady, { key: envValue(KWOK_ENV.exitCode), operator: 'Exists' }],
        },
        delay: {
          durationMilliseconds: 2000,
          durationFrom: { expressionFrom: envValue(KWOK_ENV.runDuration) },
        },
        next: {
          statusTemplate: `{{ $exit := "1" }}{{ range .spec.containers }}{{ range .env }}{{ if eq .name "${KWOK_ENV.exitCode}" }}{{ $exit = .value }}{{ end }}{{ end }}{{ end }}
${terminated('{{ $exit }}', 'Error', 'Failed')}`,
        },
      },
    },
  ];
}

/** Upstream kwok stages from the module: node initialise + heartbeat with lease, pod ready + delete. */
function kwokStagesYaml(kwokDir: string): string {
  const files = [
    'kustomize/stage/node/fast/node-initialize.yaml',
    'kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml',
    'kustomize/stage/pod/fast/pod-ready.yaml',
    'kustomize/stage/pod/fast/pod-delete.yaml',
  ];
  const upstream = files.map((f) => {
    const text = readFileSync(join(kwokDir, f), 'utf8');
    if (!f.endsWith('/pod-ready.yaml')) return text.trim();
    // pod-ready leaves the pods that cannot pull their image to gantry-pod-image-pull.
    const stage = parseYamlAll(text)[0] as {
      metadata: { name: string };
      spec: { selector: { matchExpressions: unknown[] }; delay?: unknown };
    };
    // A pull that recovers (KWOK_IMAGE_PULL_RECOVER): once its pod waits in ImagePullBackOff or
    // ErrImagePull, after that delay pod-ready's own status makes it Running and Ready.
    const pulled = structuredClone(stage);
    pulled.metadata.name = 'gantry-pod-image-pulled';
    pulled.spec.selector.matchExpressions = [
      { key: '.metadata.deletionTimestamp', operator: 'DoesNotExist' },
      { key: '.status.phase', operator: 'In', values: ['Pending'] },
      { key: envValue(KWOK_ENV.imagePullRecover), operator: 'Exists' },
      {
        key: '.status.containerStatuses.[] | .state.waiting.reason',
        operator: 'In',
        values: ['ImagePullBackOff', 'ErrImagePull'],
      },
    ];
    pulled.spec.delay = {
      durationMilliseconds: 20000,
      durationFrom: { expressionFrom: envValue(KWOK_ENV.imagePullRecover) },
    };
    stage.spec.selector.matchExpressions.push({
      key: envValue(KWOK_ENV.imagePull),
      operator: 'DoesNotExist',
    });
    return `${stringifyYaml(stage).trim()}\n---\n${stringifyYaml(pulled).trim()}`;
  });
  return [...upstream, ...podStages().map((s) => stringifyYaml(s).trim())].join('\n---\n');
}

// ----------------------------------------------------------------------------------------------------
// Webhook configurations from the upstream manifests, pointed at 127.0.0.1

type Json = Record<string, unknown>;

interface WebhookEntry {
  name: string;
  clientConfig?: { service?: { path?: string } };
  rules?: { apiGroups?: string[]; resources?: string[] }[];
}

function webhookConfigs(
  manifestFile: string,
  owner: string,
  port: number,
  caPem: string,
  keep: (w: WebhookEntry) => boolean = () => true,
): Json[] {
  const out: Json[] = [];
  for (const doc of parseYamlAll(readFileSync(manifestFile, 'utf8'))) {
    const obj = doc as Json | null;
    if (!obj?.kind) continue;
    const kind = String(obj.kind);
    const webhooks = ((obj.webhooks as WebhookEntry[]) ?? []).filter(keep).map((w) => {
      const path = w.clientConfig?.service?.path ?? '/';
      return {
        ...w,
        clientConfig: {
          url: `https://127.0.0.1:${port}${path}`,
          caBundle: Buffer.from(caPem).toString('base64'),
        },
        timeoutSeconds: 10,
      };
    });
    if (webhooks.length === 0) continue;
    out.push({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind,
      metadata: {
        name: `gantry-${owner}-${kind === 'MutatingWebhookConfiguration' ? 'mutating' : 'validating'}`,
      },
      webhooks,
    });
  }
  return out;
}

// ----------------------------------------------------------------------------------------------------
// Kubeflow Training Operator v1 (opt-in)
//
// v1.9.3 always runs cert-controller's rotator (pkg/cert): it keeps the Secret
// kubeflow/training-operator-webhook-cert valid for `training-operator-ca` (CA) and
// `training-operator.kubeflow.svc` (server), injects that CA into the ValidatingWebhookConfiguration
// `validator.training-operator.kubeflow.org`, and starts its controllers only once the cert file
// exists in the hard-coded /tmp/k8s-webhook-server/serving-certs AND the CA was injected. It never
// writes the files (in-cluster they are the Secret's volume). So: pre-create the Secret with a CA
// and server cert made here (the server cert also valid for IP 127.0.0.1; the rotator keeps a valid
// one), point that webhook configuration at https://127.0.0.1:<port>, serve the same cert from the
// operator's TMPDIR (controller-runtime's default cert dir), and make sure the rotator's mount check
// finds a tls.crt in /tmp/k8s-webhook-server/serving-certs (it only checks that the file exists).

const TRAINING_OPERATOR = 'training-operator';
/** Build component of the scheduler-plugins scheduler (Coscheduling) and PodGroup controller. */
const SCHEDULER_PLUGINS = 'scheduler-plugins';
const SCHEDULER_PLUGINS_MODULE = 'sigs.k8s.io/scheduler-plugins';
/** The runtime whose TrainJobs are gang-scheduled by Coscheduling (HeavyOptions.coscheduling). */
export const GANG_RUNTIME = 'torch-distributed-gang';
const OPERATOR_NS = 'kubeflow';
const OPERATOR_VWC = 'validator.training-operator.kubeflow.org';

function operatorDir(): string {
  return moduleDir(
    'github.com/kubeflow/training-operator',
    pinned(join(TOOLS, TRAINING_OPERATOR, 'go.mod'), 'github.com/kubeflow/training-operator') ?? '',
  );
}

function makeOperatorCerts(runDir: string): Certs {
  const dir = join(runDir, 'training-operator-certs');
  mkdirSync(dir, { recursive: true });
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  // The rotator wants >90 days of validity (its lookahead) and a CA valid for DNS name
  // `training-operator-ca`.
  writeFileSync(
    join(dir, 'ca.cnf'),
    'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\nsubjectAltName=DNS:training-operator-ca\n',
  );
  run([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.csr',
    '-subj',
    '/O=training-operator/CN=training-operator-ca',
  ]);
  // The rotator parses the CA key as PKCS#1 ("RSA PRIVATE KEY"), not OpenSSL 3's default PKCS#8.
  run(['rsa', '-in', 'ca.key', '-out', 'ca.key', '-traditional']);
  run([
    'x509',
    '-req',
    '-in',
    'ca.csr',
    '-signkey',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '365',
    '-extfile',
    'ca.cnf',
  ]);
  return issueServerCert(dir, {
    cn: `${TRAINING_OPERATOR}.${OPERATOR_NS}.svc`,
    san: `DNS:${TRAINING_OPERATOR}.${OPERATOR_NS}.svc,IP:127.0.0.1`,
    days: 365,
  });
}

async function startTrainingOperator(
  runDir: string,
  kubeconfig: string,
  deadline: number,
  procs: Proc[],
  req: (method: string, path: string, body?: unknown) => Promise<KubeResponse>,
  must: (what: string, r: Promise<KubeResponse>, ok?: number[]) => Promise<KubeResponse>,
): Promise<void> {
  const certs = makeOperatorCerts(runDir);
  const [whPort, healthPort] = (await freePorts(2)) as [number, number];
  await must(
    `creating namespace ${OPERATOR_NS}`,
    req('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: OPERATOR_NS },
    }),
    [201, 409],
  );
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const caKey = readFileSync(join(certs.dir, 'ca.key'), 'utf8');
  await must(
    'creating the training-operator webhook cert Secret',
    req('POST', `/api/v1/namespaces/${OPERATOR_NS}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'training-operator-webhook-cert', namespace: OPERATOR_NS },
      type: 'Opaque',
      data: {
        'ca.crt': b64(certs.caPem),
        'ca.key': b64(caKey),
        'tls.crt': b64(certs.crt),
        'tls.key': b64(certs.key),
      },
    }),
    [201],
  );
  // The upstream PyTorchJob webhook only, at 127.0.0.1, under the name the rotator injects into.
  const vwc = webhookConfigs(
    join(operatorDir(), 'manifests/base/webhook/manifests.yaml'),
    TRAINING_OPERATOR,
    whPort,
    certs.caPem,
    (w) => (w.rules ?? []).some((r) => (r.resources ?? []).includes('pytorchjobs')),
  ).find((c) => c.kind === 'ValidatingWebhookConfiguration');
  if (!vwc) throw new HeavyError('realcp-heavy: no PyTorchJob webhook in the training-operator manifests');
  (vwc.metadata as Json).name = OPERATOR_VWC;
  await must(
    `creating ValidatingWebhookConfiguration ${OPERATOR_VWC}`,
    req('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', vwc),
    [201],
  );
  // The rotator's existence check (hard-coded path, shared by every run on the machine: any
  // tls.crt will do, the served one comes from this run's TMPDIR).
  const mountDir = '/tmp/k8s-webhook-server/serving-certs';
  if (!existsSync(join(mountDir, 'tls.crt'))) {
    mkdirSync(mountDir, { recursive: true });
    const tmp = join(mountDir, `.tls.crt.${process.pid}`);
    writeFileSync(tmp, certs.crt);
    renameSync(tmp, join(mountDir, 'tls.crt'));
  }
  const tmpDir = join(runDir, 'tmp-training-operator');
  writeCertDir(join(tmpDir, 'k8s-webhook-server', 'serving-certs'), certs);
  const op = spawnLogged(
    TRAINING_OPERATOR,
    binPath(TRAINING_OPERATOR, 'training-operator'),
    [
      `--kubeconfig=${kubeconfig}`,
      '--enable-scheme=pytorchjob',
      `--webhook-server-port=${whPort}`,
      '--metrics-bind-address=0',
      `--health-probe-bind-address=127.0.0.1:${healthPort}`,
      '--leader-elect=false',
      '--zap-devel=false',
      '--zap-log-level=2',
    ],
    runDir,
    { KUBECONFIG: kubeconfig, TMPDIR: tmpDir, MY_POD_NAMESPACE: OPERATOR_NS },
  );
  procs.push(op);
  // readyz = certs mounted + CA injected + webhook server started (the controllers follow).
  await waitFor(
    'training-operator /readyz',
    deadline,
    healthy(`http://127.0.0.1:${healthPort}/readyz`),
    procs,
  );
  // A PyTorchJob create goes through the webhook: retried (as a dry run) until it answers.
  const probe = {
    apiVersion: 'kubeflow.org/v1',
    kind: 'PyTorchJob',
    metadata: { name: 'gantry-webhook-probe', namespace: OPERATOR_NS },
    spec: {
      pytorchReplicaSpecs: {
        Master: { replicas: 1, template: { spec: { containers: [{ name: 'pytorch', image: 'probe' }] } } },
      },
    },
  };
  await waitFor(
    'training-operator PyTorchJob webhook',
    deadline,
    async () => {
      const r = await req(
        'POST',
        `/apis/kubeflow.org/v1/namespaces/${OPERATOR_NS}/pytorchjobs?dryRun=All`,
        probe,
      );
      return r.status === 201 ? true : `HTTP ${r.status} ${r.text.slice(0, 300)}`;
    },
    procs,
    300,
  );
}

// ----------------------------------------------------------------------------------------------------
// Public API

export interface HeavyOptions {
  set: VersionSetName;
  /** Fake GPU nodes (default 2) and GPUs on each (default 8). */
  nodes?: number;
  gpusPerNode?: number;
  /** The ClusterQueue's nvidia.com/gpu nominal quota (default 8). */
  gpuQuota?: number;
  /** false: only KCM, scheduler and kwok (no JobSet/Trainer/Kueue, no CRDs, no fixtures). Default true. */
  controllers?: boolean;
  /**
   * Also start the Kubeflow Training Operator v1 (component `training-operator`, PyTorchJob scheme
   * only) with the kubeflow.org CRDs and its PyTorchJob validating webhook. Default false.
   */
  trainingOperator?: boolean;
  /**
   * Kueue's `integrations.frameworks`: a list, or `'default'` for the default configuration of the
   * set's Kueue release (its config/components/manager/controller_manager_config.yaml, comments
   * dropped). Default `['trainer.kubeflow.org/trainjob']`.
   */
  kueueFrameworks?: string[] | 'default';
  /**
   * Preemption by priority: the ClusterQueue gets `preemption.withinClusterQueue: LowerPriority` and
   * these WorkloadPriorityClasses (name → value) are created. Default: none (Kueue's default, Never).
   */
  workloadPriorityClasses?: Record<string, number>;
  /**
   * Gang scheduling by the scheduler-plugins Coscheduling plugin (component `scheduler-plugins`):
   * its PodGroup/ElasticQuota CRDs are installed, its kube-scheduler replaces the default one with the
   * module's manifests/coscheduling/scheduler-config.yaml (profile `default-scheduler`, Coscheduling
   * enabled), its PodGroup controller runs, and a ClusterTrainingRuntime `torch-distributed-gang`
   * (torch-distributed with `podGroupPolicy.coscheduling`) is created. Default false.
   */
  coscheduling?: boolean;
  startTimeoutMs?: number;
}

/** The `integrations.frameworks` a Kueue release's default configuration enables (commented ones are not). */
export function kueueDefaultFrameworks(kueueDir: string): string[] {
  const file = join(kueueDir, 'config/components/manager/controller_manager_config.yaml');
  const doc = parseYamlAll(readFileSync(file, 'utf8'))[0] as
    | { integrations?: { frameworks?: string[] } }
    | undefined;
  const frameworks = doc?.integrations?.frameworks;
  if (!frameworks?.length) throw new HeavyError(`realcp-heavy: no integrations.frameworks in ${file}`);
  return frameworks;
}

/** The default frameworks of a version set's Kueue (read from the pinned module). */
export function versionSetKueueDefaultFrameworks(name: VersionSetName): string[] {
  return kueueDefaultFrameworks(moduleDir('sigs.k8s.io/kueue', versionSet(name).kueue));
}

export interface HeavyControlPlane {
  cp: RealControlPlane;
  set: VersionSet;
  /** Names of the cluster-level fixtures. */
  clusterQueue: string;
  resourceFlavor: string;
  runtimes: string[];
  /** Kueue's enabled integrations.frameworks. */
  kueueFrameworks: string[];
  /** ms since the call at which each component was ready. */
  timings: Record<string, number>;
  startupMs: number;
  runDir: string;
  kubeconfigYaml(): string;
  /** A fresh namespace with a LocalQueue `queue` (default "demo-queue") on the ClusterQueue. */
  createQueueNamespace(prefix: string, queue?: string): Promise<string>;
  request<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<KubeResponse<T>>;
  /** Processes still running, by name (a test can assert nothing crashed). */
  exited(): string[];
  logTail(name: string, lines?: number): string;
  stop(): Promise<void>;
}

const CLUSTER_QUEUE = 'gantry-gpu';
const FLAVOR = 'kwok-gpu';
const NODE_LABEL = { 'gantry.dev/pool': 'kwok-gpu' };

export async function startHeavyControlPlane(opts: HeavyOptions): Promise<HeavyControlPlane> {
  const started = Date.now();
  const deadline = started + (opts.startTimeoutMs ?? 240_000);
  const set = versionSet(opts.set);
  const withControllers = opts.controllers !== false;
  const withOperator = withControllers && opts.trainingOperator === true;
  const withGang = withControllers && opts.coscheduling === true;
  const components = [
    'kube',
    'kwok',
    ...(withControllers ? set.components : []),
    ...(withOperator ? [TRAINING_OPERATOR] : []),
    ...(withGang ? [SCHEDULER_PLUGINS] : []),
  ];
  const missing = heavyMissing(components);
  if (missing.length) throw new Error(`realcp-heavy: missing ${missing.join('; ')}`);

  const jobsetDir = moduleDir('sigs.k8s.io/jobset', set.jobset);
  const trainerDir = moduleDir('github.com/kubeflow/trainer/v2', set.trainer);
  const kueueDir = moduleDir('sigs.k8s.io/kueue', set.kueue);
  const frameworks =
    opts.kueueFrameworks === 'default'
      ? kueueDefaultFrameworks(kueueDir)
      : (opts.kueueFrameworks ?? ['trainer.kubeflow.org/trainjob']);
  const kwokDir = moduleDir(
    'sigs.k8s.io/kwok',
    pinned(join(TOOLS, 'kwok', 'go.mod'), 'sigs.k8s.io/kwok') ?? '',
  );
  const pluginsDir = withGang
    ? moduleDir(
        SCHEDULER_PLUGINS_MODULE,
        pinned(join(TOOLS, SCHEDULER_PLUGINS, 'go.mod'), SCHEDULER_PLUGINS_MODULE) ?? '',
      )
    : '';

  // The CRDs are installed even without controllers (the light tier wants at least one).
  const crdDirs = [
    join(jobsetDir, 'config/components/crd/bases'),
    join(trainerDir, 'manifests/base/crds'),
    join(kueueDir, 'config/components/crd/bases'),
    ...(withOperator ? [join(operatorDir(), 'manifests/base/crds')] : []),
    ...(withGang ? [join(pluginsDir, 'config/crd/bases')] : []),
  ];
  const timings: Record<string, number> = {};
  const mark = (what: string) => {
    timings[what] = Date.now() - started;
    debug(`${what} ready at ${timings[what]} ms`);
  };

  const cp = await startRealControlPlane({
    crdDirs,
    startTimeoutMs: Math.max(60_000, deadline - Date.now()),
  });
  mark('apiserver+crds');
  const runDir = cp.runDir;
  const procs: Proc[] = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    for (const p of [...procs].reverse()) await stopProc(p);
    await cp.stop();
  };

  const req = <T = unknown>(method: string, path: string, body?: unknown, contentType?: string) =>
    cp.request<T>(method, path, body, contentType ? { contentType } : undefined);
  const must = async (what: string, r: Promise<KubeResponse>, ok = [200, 201]) => {
    const res = await r;
    if (!ok.includes(res.status))
      throw new HeavyError(`realcp-heavy: ${what} failed (HTTP ${res.status}): ${res.text.slice(0, 800)}`);
    return res;
  };
  /** Create-or-replace by server-side apply of one object (through its webhooks; retried until they answer). */
  const applyObject = async (what: string, obj: Json, retryUntil = deadline) => {
    const file = join(runDir, `apply-${Math.random().toString(36).slice(2)}.yaml`);
    writeFileSync(file, stringifyYaml(obj));
    await waitFor(
      what,
      retryUntil,
      async () => {
        await cp.applyManifests([file], { fieldManager: 'gantry-realcp-heavy' });
        return true;
      },
      procs,
      300,
    );
  };

  const handle = (): HeavyControlPlane => ({
    cp,
    set,
    clusterQueue: CLUSTER_QUEUE,
    resourceFlavor: FLAVOR,
    runtimes: ['torch-distributed', 'torch-distributed-failfast', ...(withGang ? [GANG_RUNTIME] : [])],
    kueueFrameworks: frameworks,
    timings,
    startupMs: Date.now() - started,
    runDir,
    kubeconfigYaml: () => cp.kubeconfigYaml(),
    createQueueNamespace: async (prefix, queue = 'demo-queue') => {
      const ns = await cp.createNamespace(prefix);
      await applyObject(
        `LocalQueue ${ns}/${queue}`,
        {
          apiVersion: 'kueue.x-k8s.io/v1beta2',
          kind: 'LocalQueue',
          metadata: { name: queue, namespace: ns },
          spec: { clusterQueue: CLUSTER_QUEUE },
        },
        Date.now() + 30_000,
      );
      return ns;
    },
    request: req,
    exited: () => procs.filter((p) => p.exited).map((p) => `${p.name} (code ${p.exitCode})`),
    logTail: (name, lines) => {
      const p = procs.find((x) => x.name === name);
      return p ? logTail(p, lines) : '(no such process)';
    },
    stop,
  });

  try {
    const kubeconfig = join(runDir, 'admin.kubeconfig');
    writeFileSync(kubeconfig, cp.kubeconfigYaml(), { mode: 0o600 });
    const certs = makeCerts(runDir);
    const [kcmPort, schedPort, kwokPort, jsWh, jsHealth, trWh, trHealth, kqWh, kqHealth, pgHealth] =
      (await freePorts(10)) as [
        number,
        number,
        number,
        number,
        number,
        number,
        number,
        number,
        number,
        number,
      ];

    // Namespace Kueue runs in (its config `namespace`).
    await must(
      'creating namespace kueue-system',
      req('POST', '/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: 'kueue-system' },
      }),
      [201, 409],
    );

    // 2. kube-controller-manager
    const kubeAuth = [
      `--kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      '--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics',
      '--leader-elect=false',
      '--bind-address=127.0.0.1',
    ];
    const kcm = spawnLogged(
      'kube-controller-manager',
      binPath('kube', 'kube-controller-manager'),
      [
        ...kubeAuth,
        `--secure-port=${kcmPort}`,
        `--cert-dir=${join(runDir, 'kcm-certs')}`,
        `--service-account-private-key-file=${join(runDir, 'sa.key')}`,
        `--root-ca-file=${join(runDir, 'apiserver-certs', 'apiserver.crt')}`,
        '--use-service-account-credentials=false',
        // Quick GC / job reaction for tests.
        '--concurrent-gc-syncs=10',
        '--concurrent-job-syncs=10',
        '--v=1',
      ],
      runDir,
    );
    procs.push(kcm);
    // 3. kube-scheduler (with coscheduling: scheduler-plugins' build of it, from its shipped config,
    // and its PodGroup controller)
    if (withGang) {
      const schedCfg = join(runDir, 'scheduler-plugins-config.yaml');
      const shipped = parseYamlAll(
        readFileSync(join(pluginsDir, 'manifests/coscheduling/scheduler-config.yaml'), 'utf8'),
      )[0] as { clientConnection: { kubeconfig: string } };
      shipped.clientConnection.kubeconfig = kubeconfig;
      writeFileSync(schedCfg, stringifyYaml(shipped));
      procs.push(
        spawnLogged(
          'kube-scheduler',
          binPath(SCHEDULER_PLUGINS, 'scheduler'),
          [
            ...kubeAuth.filter((a) => !a.startsWith('--kubeconfig=') && !a.startsWith('--leader-elect')),
            `--config=${schedCfg}`,
            `--secure-port=${schedPort}`,
            `--cert-dir=${join(runDir, 'scheduler-certs')}`,
            '--v=1',
          ],
          runDir,
        ),
      );
      procs.push(
        spawnLogged(
          'podgroup-controller',
          binPath(SCHEDULER_PLUGINS, 'controller'),
          ['--metricsAddr=0', `--probeAddr=127.0.0.1:${pgHealth}`, '--enableLeaderElection=false'],
          runDir,
          { KUBECONFIG: kubeconfig },
        ),
      );
    } else {
      const sched = spawnLogged(
        'kube-scheduler',
        binPath('kube', 'kube-scheduler'),
        [...kubeAuth, `--secure-port=${schedPort}`, `--cert-dir=${join(runDir, 'scheduler-certs')}`, '--v=1'],
        runDir,
      );
      procs.push(sched);
    }
    // 4. kwok
    const stagesFile = join(runDir, 'kwok-stages.yaml');
    writeFileSync(stagesFile, kwokStagesYaml(kwokDir));
    const kwok = spawnLogged(
      'kwok',
      binPath('kwok', 'kwok'),
      [
        `--kubeconfig=${kubeconfig}`,
        `--config=${stagesFile}`,
        '--manage-all-nodes=true',
        `--server-address=127.0.0.1:${kwokPort}`,
        '--node-ip=10.250.0.1',
        '--cidr=10.244.0.0/16',
        '--node-lease-duration-seconds=40',
      ],
      runDir,
      { HOME: join(runDir, 'kwok-home') },
    );
    procs.push(kwok);

    // 5–7. controllers: configs, certs (each reads its own TMPDIR, so parallel test runs never share files)
    const ctrlEnv = (name: string) => {
      const tmp = join(runDir, `tmp-${name}`);
      writeCertDir(join(tmp, 'k8s-webhook-server', 'serving-certs'), certs);
      writeCertDir(join(tmp, 'k8s-metrics-server', 'serving-certs'), certs);
      return { KUBECONFIG: kubeconfig, TMPDIR: tmp };
    };
    const jsCfg = join(runDir, 'jobset-config.yaml');
    writeFileSync(
      jsCfg,
      stringifyYaml({
        apiVersion: 'config.jobset.x-k8s.io/v1alpha1',
        kind: 'Configuration',
        leaderElection: { leaderElect: false },
        internalCertManagement: { enable: false },
        webhook: {
          port: jsWh,
          host: '127.0.0.1',
          certDir: join(runDir, 'tmp-jobset', 'k8s-webhook-server', 'serving-certs'),
        },
        metrics: { bindAddress: '0' },
        health: { healthProbeBindAddress: `127.0.0.1:${jsHealth}` },
      }),
    );
    if (withControllers) {
      const jobset = spawnLogged(
        'jobset',
        binPath(set.jobsetComponent, 'jobset'),
        [`--config=${jsCfg}`, `--kubeconfig=${kubeconfig}`, '--zap-devel=false'],
        runDir,
        ctrlEnv('jobset'),
      );
      procs.push(jobset);
    }

    const trCfg = join(runDir, 'trainer-config.yaml');
    writeFileSync(
      trCfg,
      stringifyYaml({
        apiVersion: 'config.trainer.kubeflow.org/v1alpha1',
        kind: 'Configuration',
        webhook: { port: trWh, host: '127.0.0.1' },
        metrics: { bindAddress: '0' },
        health: { healthProbeBindAddress: `127.0.0.1:${trHealth}` },
        leaderElection: { leaderElect: false },
        certManagement: { enable: false },
      }),
    );

    const kqCfg = join(runDir, 'kueue-config.yaml');
    writeFileSync(
      kqCfg,
      stringifyYaml({
        apiVersion: 'config.kueue.x-k8s.io/v1beta2',
        kind: 'Configuration',
        namespace: 'kueue-system',
        leaderElection: { leaderElect: false },
        internalCertManagement: { enable: false },
        webhook: {
          port: kqWh,
          host: '127.0.0.1',
          certDir: join(runDir, 'tmp-kueue', 'k8s-webhook-server', 'serving-certs'),
        },
        health: { healthProbeBindAddress: `127.0.0.1:${kqHealth}` },
        metrics: { bindAddress: '0' },
        integrations: { frameworks },
      }),
    );
    ensureKueueMetricsCerts(certs);

    // Nodes, while the controllers come up: kwok makes them Ready and keeps their leases.
    const nodes = opts.nodes ?? 2;
    const gpus = String(opts.gpusPerNode ?? 8);
    await waitFor(
      'kube-controller-manager /healthz',
      deadline,
      healthy(`https://127.0.0.1:${kcmPort}/healthz`),
      procs,
    );
    mark('kube-controller-manager');
    await waitFor(
      'kube-scheduler /healthz',
      deadline,
      healthy(`https://127.0.0.1:${schedPort}/healthz`),
      procs,
    );
    mark('kube-scheduler');
    for (let i = 0; i < nodes; i++) {
      const name = `kwok-gpu-${i}`;
      const capacity = { cpu: '32', memory: '256Gi', pods: '110', 'nvidia.com/gpu': gpus };
      await must(
        `creating node ${name}`,
        req('POST', '/api/v1/nodes', {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: {
            name,
            labels: {
              ...NODE_LABEL,
              'kubernetes.io/hostname': name,
              'kubernetes.io/os': 'linux',
              type: 'kwok',
            },
            annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
          },
          spec: {},
          status: { capacity, allocatable: capacity },
        }),
      );
    }
    await waitFor(
      `${nodes} kwok nodes Ready with nvidia.com/gpu`,
      deadline,
      async () => {
        const r = await req<{
          items: {
            metadata: { name: string };
            status?: {
              allocatable?: Record<string, string>;
              conditions?: { type: string; status: string }[];
            };
          }[];
        }>('GET', '/api/v1/nodes');
        const ready = r.body.items.filter(
          (n) =>
            n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') &&
            n.status?.allocatable?.['nvidia.com/gpu'] === gpus,
        );
        return ready.length >= nodes ? true : `${ready.length}/${nodes} ready`;
      },
      procs,
    );
    mark('kwok+nodes');
    if (!withControllers) return handle();

    await waitFor('jobset /readyz', deadline, healthy(`http://127.0.0.1:${jsHealth}/readyz`), procs);
    for (const cfg of webhookConfigs(
      join(jobsetDir, 'config/components/webhook/manifests.yaml'),
      'jobset',
      jsWh,
      certs.caPem,
    )) {
      await applyObject(`jobset ${String((cfg.metadata as Json).name)}`, cfg);
    }
    mark('jobset');

    const trainer = spawnLogged(
      'trainer-controller-manager',
      binPath(set.trainerComponent, 'trainer-controller-manager'),
      [`--config=${trCfg}`, '--zap-log-level=2'],
      runDir,
      ctrlEnv('trainer'),
    );
    procs.push(trainer);
    const kueue = spawnLogged(
      'kueue',
      binPath(set.kueueComponent, 'kueue'),
      [`--config=${kqCfg}`, '--feature-gates=VisibilityOnDemand=false', '--zap-log-level=2'],
      runDir,
      ctrlEnv('kueue'),
    );
    procs.push(kueue);

    await waitFor('trainer /readyz', deadline, healthy(`http://127.0.0.1:${trHealth}/readyz`), procs);
    for (const cfg of webhookConfigs(
      join(trainerDir, 'manifests/base/webhook/manifests.yaml'),
      'trainer',
      trWh,
      certs.caPem,
    )) {
      await applyObject(`trainer ${String((cfg.metadata as Json).name)}`, cfg);
    }
    mark('trainer');

    await waitFor('kueue /readyz', deadline, healthy(`http://127.0.0.1:${kqHealth}/readyz`), procs);
    const kueueGroups = new Set([
      'kueue.x-k8s.io',
      'trainer.kubeflow.org',
      ...(withOperator ? ['kubeflow.org'] : []),
    ]);
    // Kueue's own kinds, the TrainJob integration and (with the Training Operator) the kubeflow.org
    // v1 kinds only: a disabled integration's webhook is a no-op (that is what a kubeflow.org job
    // meets when the release does not enable it), but pods/deployments/jobsets would all pass
    // through the others for nothing.
    const keepKueue = (w: WebhookEntry) =>
      (w.rules ?? []).some((r) => (r.apiGroups ?? []).some((g) => kueueGroups.has(g)));
    for (const cfg of webhookConfigs(
      join(kueueDir, 'config/components/webhook/manifests.yaml'),
      'kueue',
      kqWh,
      certs.caPem,
      keepKueue,
    )) {
      await applyObject(`kueue ${String((cfg.metadata as Json).name)}`, cfg);
    }
    mark('kueue');

    if (withOperator) {
      await startTrainingOperator(runDir, kubeconfig, deadline, procs, req, must);
      mark(TRAINING_OPERATOR);
    }

    // 8. fixtures (through the webhooks: each apply retries until its webhook answers)
    await applyObject('ResourceFlavor', {
      apiVersion: 'kueue.x-k8s.io/v1beta2',
      kind: 'ResourceFlavor',
      metadata: { name: FLAVOR },
      spec: { nodeLabels: NODE_LABEL },
    });
    for (const [name, value] of Object.entries(opts.workloadPriorityClasses ?? {})) {
      await applyObject(`WorkloadPriorityClass ${name}`, {
        apiVersion: 'kueue.x-k8s.io/v1beta2',
        kind: 'WorkloadPriorityClass',
        metadata: { name },
        value,
        description: `gantry e2e-real priority ${value}`,
      });
    }
    await applyObject('ClusterQueue', {
      apiVersion: 'kueue.x-k8s.io/v1beta2',
      kind: 'ClusterQueue',
      metadata: { name: CLUSTER_QUEUE },
      spec: {
        namespaceSelector: {},
        queueingStrategy: 'BestEffortFIFO',
        ...(opts.workloadPriorityClasses
          ? { preemption: { withinClusterQueue: 'LowerPriority', reclaimWithinCohort: 'Never' } }
          : {}),
        resourceGroups: [
          {
            coveredResources: ['cpu', 'memory', 'nvidia.com/gpu'],
            flavors: [
              {
                name: FLAVOR,
                resources: [
                  { name: 'cpu', nominalQuota: '256' },
                  { name: 'memory', nominalQuota: '2Ti' },
                  { name: 'nvidia.com/gpu', nominalQuota: String(opts.gpuQuota ?? 8) },
                ],
              },
            ],
          },
        ],
      },
    });
    await waitFor(
      'ClusterQueue Active',
      deadline,
      async () => {
        const r = await req<{
          status?: { conditions?: { type: string; status: string; message?: string }[] };
        }>('GET', `/apis/kueue.x-k8s.io/v1beta2/clusterqueues/${CLUSTER_QUEUE}`);
        const active = r.body.status?.conditions?.find((c) => c.type === 'Active');
        return active?.status === 'True' ? true : `Active=${active?.status} ${active?.message ?? ''}`;
      },
      procs,
    );

    const runtimeDoc = (
      parseYamlAll(
        readFileSync(join(trainerDir, 'manifests/base/runtimes/torch_distributed.yaml'), 'utf8'),
      ) as Json[]
    ).find((o) => o?.kind === 'ClusterTrainingRuntime');
    if (!runtimeDoc)
      throw new HeavyError('realcp-heavy: no ClusterTrainingRuntime in torch_distributed.yaml');
    await applyObject('ClusterTrainingRuntime torch-distributed', runtimeDoc);
    const failfast = structuredClone(runtimeDoc) as {
      metadata: { name: string };
      spec: { template: { spec: { replicatedJobs: { template: { spec: Json } }[] } } };
    };
    failfast.metadata.name = 'torch-distributed-failfast';
    for (const rj of failfast.spec.template.spec.replicatedJobs) rj.template.spec.backoffLimit = 0;
    await applyObject('ClusterTrainingRuntime torch-distributed-failfast', failfast as unknown as Json);
    if (withGang) {
      await waitFor(
        'podgroup-controller /readyz',
        deadline,
        healthy(`http://127.0.0.1:${pgHealth}/readyz`),
        procs,
      );
      const gang = structuredClone(runtimeDoc) as { metadata: { name: string }; spec: Json };
      gang.metadata.name = GANG_RUNTIME;
      gang.spec.podGroupPolicy = { coscheduling: { scheduleTimeoutSeconds: 60 } };
      await applyObject(`ClusterTrainingRuntime ${GANG_RUNTIME}`, gang as unknown as Json);
    }
    mark('fixtures');

    return handle();
  } catch (err) {
    if (process.env.REALCP_KEEP_RUN_DIR !== '1') {
      for (const p of procs) process.stderr.write(`--- ${p.name} (last lines)\n${logTail(p, 15)}\n`);
    }
    await stop();
    throw err;
  }
}
