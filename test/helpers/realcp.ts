/**
 * Light-tier real control plane for contract tests: a real etcd + kube-apiserver (built from the Go
 * module proxy by scripts/realcp-build.sh) with CRDs installed, in the style of controller-runtime's
 * envtest. There are no controllers: no GC, no Job controller, no scheduler, no webhooks, no default
 * ServiceAccounts. Namespaces never finish terminating, so give every test its own namespace
 * (`createNamespace`).
 *
 * Usage:
 *   const cp = await startRealControlPlane({ crdDirs: ["/work/shared/k8s/crds/trainer-v2.2.1"] });
 *   try { ... cp.kubeconfigYaml() ... } finally { await cp.stop(); }
 *
 * Several versions of the same CRDs (e.g. two Trainer versions) cannot share one apiserver: start one
 * control plane per version set.
 *
 * Environment: REALCP_BIN_DIR (bin dir override), GANTRY_CACHE (cache root, as in the build script),
 * REALCP_TMPDIR (where run dirs go; default /dev/shm if writable, else os.tmpdir()),
 * REALCP_KEEP_RUN_DIR=1 (keep the run dir with the logs after stop()), REALCP_DEBUG=1 (print
 * start-up phases to stderr).
 *
 * Lifetime: children are SIGKILLed on the test process's 'exit', and a small detached watchdog kills
 * them and removes the run dir if the test process dies by a signal.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPair, randomBytes } from 'node:crypto';
import {
  accessSync,
  closeSync,
  existsSync,
  constants as fsConstants,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { Agent, request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseYamlAll, stringifyYaml } from '../../lib/yaml.ts';

// ----------------------------------------------------------------------------------------------------
// Public types

export interface KubeconfigUser {
  /** Bearer token; defaults to the admin token. */
  token?: string;
  /** Impersonate this user (kubeconfig `as`). The admin (system:masters) may impersonate anyone. */
  impersonateUser?: string;
  /** Impersonate these groups (kubeconfig `as-groups`); needs `impersonateUser`. */
  impersonateGroups?: string[];
}

export interface StaticUser {
  name: string;
  groups?: string[];
}

export interface StartOptions {
  /** Directories (searched recursively) or single files whose `kind: CustomResourceDefinition` docs are installed. */
  crdDirs: string[];
  /** Directory holding `etcd` and `kube-apiserver`; default: the realcp build cache (see realcpBinDir()). */
  binDir?: string;
  /** Extra static-token users (not in system:masters), e.g. for RBAC tests; tokens are in `userTokens`. */
  users?: StaticUser[];
  /** Overall start-up timeout in ms (processes ready + CRDs established). Default 120000. */
  startTimeoutMs?: number;
  /** Extra kube-apiserver flags, e.g. ["--feature-gates=Foo=true"]. */
  extraApiserverArgs?: string[];
}

export interface KubeResponse<T = unknown> {
  status: number;
  body: T;
  /** The raw response text. */
  text: string;
}

export interface KubeTarget {
  server: string;
  token: string;
  caPem: string;
}

export interface AppliedObject {
  file: string;
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  path: string;
}

export interface RealControlPlane extends KubeTarget {
  /** https://127.0.0.1:<port> */
  server: string;
  /** Admin bearer token (user `admin`, group `system:masters`). */
  token: string;
  /** base64 of caPem (kubeconfig `certificate-authority-data`). */
  caData: string;
  /** PEM the apiserver serving cert verifies against (its self-signed leaf + CA). */
  caPem: string;
  /** Tokens of the extra static users, by user name. */
  userTokens: Record<string, string>;
  /** Versions actually running, e.g. { kubernetes: "v1.35.4", etcd: "3.6.16" }. */
  versions: { kubernetes: string; etcd: string };
  /** Names of the installed CRDs. */
  crds: string[];
  /** Time spent in startRealControlPlane, ms. */
  startupMs: number;
  /**
   * Start-up phases, ms since the call: etcd healthy; kube-apiserver /readyz ok; CRDs established and
   * served. CRDs are created while the apiserver finishes its post-start hooks, so the last two overlap.
   */
  timings: { etcdReadyMs: number; apiserverReadyMs: number; crdsReadyMs: number };
  /** Per-run directory (logs: etcd.log, kube-apiserver.log). Removed by stop(). */
  runDir: string;
  kubeconfigYaml(user?: KubeconfigUser): string;
  /** Creates a namespace `<prefix>-<random>` and returns its name. */
  createNamespace(prefix: string): Promise<string>;
  /** Server-side apply every document of the given YAML files (see applyManifests). */
  applyManifests(yamlFiles: string[], opts?: ApplyOptions): Promise<AppliedObject[]>;
  /** Raw REST call with the admin token (or `opts.token`); never throws on HTTP status. */
  request<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    opts?: RequestOptions,
  ): Promise<KubeResponse<T>>;
  stop(): Promise<void>;
}

export interface RequestOptions {
  token?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

export interface ApplyOptions {
  /** Namespace for namespaced objects without metadata.namespace. Default "default". */
  namespace?: string;
  /** Field manager for server-side apply. Default "gantry-realcp". */
  fieldManager?: string;
}

// ----------------------------------------------------------------------------------------------------
// Binary location (same computation as scripts/realcp-build.sh --print-bin-dir)

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const BUILD_SCRIPT = join(REPO_ROOT, 'scripts', 'realcp-build.sh');

function pinnedVersion(goModPath: string, module: string): string {
  const text = readFileSync(goModPath, 'utf8');
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[0] === module && f[1]) return f[1];
    if (f[0] === 'require' && f[1] === module && f[2]) return f[2];
  }
  throw new Error(`realcp: ${module} is not required in ${goModPath}`);
}

/** The pinned versions, read from tools/realcp/{kube,etcd}/go.mod. */
export function realcpVersions(): { kubernetes: string; etcd: string } {
  return {
    kubernetes: pinnedVersion(join(REPO_ROOT, 'tools/realcp/kube/go.mod'), 'k8s.io/kubernetes'),
    etcd: pinnedVersion(join(REPO_ROOT, 'tools/realcp/etcd/go.mod'), 'go.etcd.io/etcd/server/v3'),
  };
}

/** `${GANTRY_CACHE:-$HOME/.cache/gantry}/realcp/k8s-<ver>-etcd-<ver>/bin`, like the build script. */
export function realcpBinDir(): string {
  const v = realcpVersions();
  const cacheRoot = process.env.GANTRY_CACHE || join(homedir(), '.cache', 'gantry');
  return join(cacheRoot, 'realcp', `k8s-${v.kubernetes}-etcd-${v.etcd}`, 'bin');
}

function resolveBinaries(binDir: string | undefined): { etcd: string; apiserver: string } {
  const explicit = binDir ?? process.env.REALCP_BIN_DIR;
  const dir = explicit ?? realcpBinDir();
  const out = { etcd: join(dir, 'etcd'), apiserver: join(dir, 'kube-apiserver') };
  for (const [name, path] of [
    ['etcd', out.etcd],
    ['kube-apiserver', out.apiserver],
  ] as const) {
    try {
      accessSync(path, fsConstants.X_OK);
    } catch {
      const how = explicit
        ? `put the ${name} binary there, or omit binDir/REALCP_BIN_DIR and run: bash ${BUILD_SCRIPT}`
        : `build it with: bash ${BUILD_SCRIPT}`;
      throw new Error(`realcp: ${name} binary missing: ${path} (not found or not executable); ${how}`);
    }
  }
  return out;
}

// ----------------------------------------------------------------------------------------------------
// Process bookkeeping: nothing may outlive the test process

const live = new Set<ChildProcess>();
const liveDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const child of live) {
      try {
        child.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
    if (process.env.REALCP_KEEP_RUN_DIR !== '1') {
      for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
    }
  });
}

/**
 * A detached watchdog also covers a test process that dies by a signal (no 'exit' event): once the
 * parent is gone it SIGKILLs the pids listed in <runDir>/pids and removes the run dir. It exits by
 * itself when the run dir disappears (normal stop()).
 */
const WATCHDOG = `
const fs = require("node:fs");
const [ppid, dir, keep] = process.argv.slice(1);
const pidsFile = dir + "/pids";
setInterval(() => {
  if (!fs.existsSync(dir)) process.exit(0);
  let parentAlive = true;
  try { process.kill(Number(ppid), 0); } catch { parentAlive = false; }
  if (parentAlive) return;
  let pids = [];
  try { pids = fs.readFileSync(pidsFile, "utf8").split(/\\s+/).filter(Boolean).map(Number); } catch {}
  for (const pid of pids) { try { process.kill(pid, "SIGKILL"); } catch {} }
  if (keep !== "1") { try { fs.rmSync(dir, { recursive: true, force: true }); } catch {} }
  process.exit(0);
}, 500);
`;

function startWatchdog(runDir: string): ChildProcess {
  const wd = spawn(
    process.execPath,
    ['-e', WATCHDOG, String(process.pid), runDir, process.env.REALCP_KEEP_RUN_DIR === '1' ? '1' : '0'],
    { detached: true, stdio: 'ignore' },
  );
  wd.unref();
  return wd;
}

interface Proc {
  name: string;
  child: ChildProcess;
  logFile: string;
  exited: boolean;
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  exitPromise: Promise<void>;
}

function spawnLogged(name: string, bin: string, args: string[], runDir: string): Proc {
  const logFile = join(runDir, `${name}.log`);
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(bin, args, { stdio: ['ignore', fd, fd], cwd: runDir, env: childEnv() });
  } finally {
    closeSync(fd);
  }
  const proc: Proc = {
    name,
    child,
    logFile,
    exited: false,
    exitCode: null,
    exitSignal: null,
    exitPromise: Promise.resolve(),
  };
  proc.exitPromise = new Promise<void>((res) => {
    child.once('exit', (code, signal) => {
      proc.exited = true;
      proc.exitCode = code;
      proc.exitSignal = signal;
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
    // Unref'd: a test process that forgets stop() still ends, and its 'exit' hook kills the child.
    child.unref();
    live.add(child);
    writeFileSync(join(runDir, 'pids'), `${child.pid}\n`, { flag: 'a' });
  }
  return proc;
}

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Never let a developer's kube/etcd settings leak into the children.
  for (const k of Object.keys(env)) {
    if (k === 'KUBECONFIG' || k.startsWith('ETCD_') || k.startsWith('ETCDCTL_')) delete env[k];
  }
  return env;
}

function logTail(p: Proc, lines = 40): string {
  try {
    const all = readFileSync(p.logFile, 'utf8').trimEnd().split('\n');
    return all.slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** An error that ends a wait loop at once (as opposed to a transient failure that is retried). */
class RealcpError extends Error {}

function exitedError(p: Proc, what: string): Error {
  const how = p.exitSignal ? `signal ${p.exitSignal}` : `code ${p.exitCode}`;
  return new RealcpError(
    `realcp: ${p.name} exited (${how}) while ${what}; last log lines of ${p.logFile} (the run dir is removed on failure unless REALCP_KEEP_RUN_DIR=1):\n${logTail(p)}`,
  );
}

/** SIGTERM, then SIGKILL after `graceMs`; shared with the heavy tier's harness. */
export async function stopProc(
  p: Pick<Proc, 'child' | 'exited' | 'exitPromise'>,
  graceMs = 5000,
): Promise<void> {
  if (p.exited) return;
  try {
    p.child.kill('SIGTERM');
  } catch {
    /* gone */
  }
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    p.exitPromise.then(() => false),
    new Promise<boolean>((res) => {
      timer = setTimeout(() => res(true), graceMs);
    }),
  ]);
  if (timer) clearTimeout(timer);
  if (timedOut && !p.exited) {
    try {
      p.child.kill('SIGKILL');
    } catch {
      /* gone */
    }
    await p.exitPromise;
  }
}

// ----------------------------------------------------------------------------------------------------
// Small utilities

/** REALCP_DEBUG=1 prints start-up phases to stderr. */
const debug = (msg: string): void => {
  if (process.env.REALCP_DEBUG) process.stderr.write(`[realcp ${new Date().toISOString()}] ${msg}\n`);
};

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Reserves `n` distinct free TCP ports on 127.0.0.1 (all held open together, then released). */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<ReturnType<typeof createServer>>((res, rej) => {
          const s = createServer();
          s.once('error', rej);
          s.listen(0, '127.0.0.1', () => res(s));
        }),
    ),
  );
  const ports = servers.map((s) => {
    const a = s.address();
    if (a === null || typeof a === 'string') throw new Error('realcp: could not get a free port');
    return a.port;
  });
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  return ports;
}

function pickTmpRoot(): string {
  if (process.env.REALCP_TMPDIR) return process.env.REALCP_TMPDIR;
  try {
    accessSync('/dev/shm', fsConstants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

function genToken(): string {
  return randomBytes(24).toString('hex');
}

function httpGetText(url: string, timeoutMs = 2000): Promise<{ status: number; text: string }> {
  return new Promise((res, rej) => {
    const req = httpRequest(url, { method: 'GET', timeout: timeoutMs }, (resp) => {
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

// ----------------------------------------------------------------------------------------------------
// REST client (node:https with the apiserver's own CA; no external HTTP library)

const agents = new WeakMap<KubeTarget, Agent>();

function agentFor(t: KubeTarget): Agent {
  let a = agents.get(t);
  if (!a) {
    a = new Agent({ keepAlive: true, maxSockets: 16, ca: t.caPem });
    agents.set(t, a);
  }
  return a;
}

function kubeRequest<T = unknown>(
  t: KubeTarget,
  method: string,
  path: string,
  body?: unknown,
  opts: RequestOptions & { agent?: Agent; timeoutMs?: number } = {},
): Promise<KubeResponse<T>> {
  const url = new URL(path, t.server);
  const payload =
    body === undefined
      ? undefined
      : typeof body === 'string' || Buffer.isBuffer(body)
        ? body
        : JSON.stringify(body);
  const headers: Record<string, string> = {
    Accept: 'application/json',
    Authorization: `Bearer ${opts.token ?? t.token}`,
    ...(payload !== undefined
      ? {
          'Content-Type': opts.contentType ?? 'application/json',
          'Content-Length': String(Buffer.byteLength(payload)),
        }
      : {}),
    ...opts.headers,
  };
  return new Promise((res, rej) => {
    const req = httpsRequest(
      url,
      { method, headers, agent: opts.agent ?? agentFor(t), timeout: opts.timeoutMs ?? 60_000 },
      (resp) => {
        const chunks: Buffer[] = [];
        resp.on('data', (c: Buffer) => chunks.push(c));
        resp.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          if ((resp.headers['content-type'] ?? '').includes('json')) {
            try {
              parsed = JSON.parse(text);
            } catch {
              /* keep text */
            }
          }
          res({ status: resp.statusCode ?? 0, body: parsed as T, text });
        });
        resp.on('error', rej);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`realcp: ${method} ${path} timed out`)));
    req.on('error', rej);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

function statusMessage(r: KubeResponse): string {
  const b = r.body as { message?: string } | undefined;
  return (typeof b === 'object' && b?.message) || r.text.slice(0, 2000);
}

// ----------------------------------------------------------------------------------------------------
// YAML loading. Documents are split the way kubectl does (a `---` line) and sent to the apiserver as
// YAML, so the server's own YAML reading applies and big CRDs are never parsed in Node. Only small
// documents (manifests, or a CRD file whose `kind:` is not a plain top-level line) are parsed here.

type KubeObject = {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; generateName?: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
};

interface RawDoc {
  file: string;
  /** 0-based index among the file's `---`-separated documents. */
  index: number;
  text: string;
}

const DOC_SEPARATOR = /^---[ \t]*(?:#.*)?$/;

function splitYamlDocs(file: string, text: string): RawDoc[] {
  const out: RawDoc[] = [];
  let cur: string[] = [];
  let index = 0;
  const flush = () => {
    const docText = cur.join('\n');
    // Skip documents that hold only comments, blank lines or a `...` end marker.
    if (
      docText.split('\n').some((l) => l.trim() !== '' && !l.trimStart().startsWith('#') && l.trim() !== '...')
    ) {
      out.push({ file, index, text: `${docText}\n` });
    }
    index++;
    cur = [];
  };
  for (const line of text.split(/\r?\n/)) {
    if (DOC_SEPARATOR.test(line)) flush();
    else cur.push(line);
  }
  flush();
  return out;
}

/** A plain top-level scalar (`key: value` at column 0) of a block-style document, else undefined. */
function topLevelScalar(doc: RawDoc, key: string): string | undefined {
  const m = new RegExp(`^${key}:[ \\t]*(.*?)[ \\t]*(?:[ \\t]#.*)?$`, 'm').exec(doc.text);
  if (!m?.[1]) return undefined;
  return m[1].replace(/^(['"])(.*)\1$/, '$2');
}

function parseDoc(doc: RawDoc): KubeObject {
  const where = `${doc.file} (document ${doc.index})`;
  let list: unknown[];
  try {
    list = parseYamlAll(doc.text, { merge: true });
  } catch (err) {
    throw new Error(`realcp: YAML error in ${where}: ${(err as Error).message.split('\n')[0]}`);
  }
  if (list.length !== 1 || !list[0]) throw new Error(`realcp: cannot read ${where} as one YAML document`);
  const obj: unknown = list[0];
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    throw new Error(`realcp: ${where} is not a Kubernetes object`);
  }
  return obj as KubeObject;
}

function docKind(doc: RawDoc): string | undefined {
  return topLevelScalar(doc, 'kind') ?? parseDoc(doc).kind;
}

async function readYamlDocs(file: string): Promise<RawDoc[]> {
  return splitYamlDocs(file, await readFile(file, 'utf8'));
}

async function listYamlFiles(pathOrDir: string): Promise<string[]> {
  const st = await stat(pathOrDir).catch(() => undefined);
  if (!st) throw new Error(`realcp: CRD path does not exist: ${pathOrDir}`);
  if (st.isFile()) return [pathOrDir];
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const e of entries) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else if (/\.ya?ml$/i.test(e.name)) out.push(p);
    }
  };
  await walk(pathOrDir);
  return out;
}

// ----------------------------------------------------------------------------------------------------
// CRDs

interface Crd {
  metadata: { name: string; resourceVersion?: string };
  spec: {
    group: string;
    names: { plural: string; kind: string };
    scope: string;
    versions: Array<{ name: string; served: boolean; storage: boolean }>;
  };
  status?: { conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
}

/** metadata.name of a block-style document, read without parsing the (possibly MB-sized) rest. */
function metadataName(doc: RawDoc): string | undefined {
  const block = /^metadata:[ \t]*\n((?:(?:[ \t]+.*)?\n)*)/m.exec(doc.text)?.[1];
  const indent = block ? /^([ \t]+)\S/m.exec(block)?.[1] : undefined;
  if (!block || !indent) return undefined;
  const m = new RegExp(`^${indent}name:[ \\t]*(.*?)[ \\t]*(?:[ \\t]#.*)?$`, 'm').exec(block);
  return m?.[1]?.replace(/^(['"])(.*)\1$/, '$2') || undefined;
}

async function collectCrds(crdDirs: string[]): Promise<RawDoc[]> {
  const out: RawDoc[] = [];
  const seen = new Map<string, string>();
  for (const dir of crdDirs) {
    let found = 0;
    for (const file of await listYamlFiles(dir)) {
      for (const d of await readYamlDocs(file)) {
        if (docKind(d) !== 'CustomResourceDefinition') continue;
        const name = metadataName(d) ?? parseDoc(d).metadata?.name;
        if (!name) throw new Error(`realcp: CRD without metadata.name in ${file}`);
        const prev = seen.get(name);
        if (prev) {
          throw new Error(
            `realcp: CRD ${name} is defined twice (${prev} and ${file}); start one control plane per version set`,
          );
        }
        seen.set(name, file);
        out.push(d);
        found++;
      }
    }
    if (found === 0) throw new Error(`realcp: no CustomResourceDefinition found under ${dir}`);
  }
  return out;
}

const CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

async function installCrds(
  t: KubeTarget,
  docs: RawDoc[],
  deadline: number,
  procs: Proc[],
): Promise<string[]> {
  // Create all CRDs (the apiserver handles them in parallel), then wait for each one.
  const created = await Promise.all(
    docs.map(async (d) => {
      const apiVersion = topLevelScalar(d, 'apiVersion');
      if (apiVersion !== undefined && apiVersion !== 'apiextensions.k8s.io/v1') {
        throw new Error(
          `realcp: ${d.file}: only apiextensions.k8s.io/v1 CRDs are supported, got ${apiVersion}`,
        );
      }
      const r = await kubeRequest<Crd>(t, 'POST', CRD_PATH, d.text, { contentType: 'application/yaml' });
      return { d, r };
    }),
  );
  debug(`${docs.length} CRDs created`);
  const byName = new Map<string, { file: string; crd: Crd }>();
  const errors: string[] = [];
  for (const { d, r } of created) {
    if (r.status === 201) {
      byName.set(r.body.metadata.name, { file: d.file, crd: r.body });
    } else {
      const hint = r.status === 409 ? ' (defined twice? start one control plane per version set)' : '';
      errors.push(`creating the CRD from ${d.file} failed (HTTP ${r.status}): ${statusMessage(r)}${hint}`);
    }
  }
  if (errors.length > 0) throw new Error(`realcp: ${errors.join('\nrealcp: ')}`);

  // Wait for Established=True through one watch, instead of polling MB-sized objects.
  await watchCrdsEstablished(t, new Set(byName.keys()), deadline);
  debug('CRDs established');

  // Then make sure every served version is actually served (a list returns 200).
  await Promise.all(
    [...byName.values()].flatMap(({ crd }) =>
      crd.spec.versions
        .filter((v) => v.served)
        .map((v) =>
          waitFor(
            `${crd.spec.names.plural}.${crd.spec.group}/${v.name} served`,
            deadline,
            async () => {
              const r = await kubeRequest(
                t,
                'GET',
                `/apis/${crd.spec.group}/${v.name}/${crd.spec.names.plural}?limit=1`,
              );
              return r.status === 200 ? true : `HTTP ${r.status}`;
            },
            50,
            procs,
          ),
        ),
    ),
  );
  debug('CRDs served');
  return [...byName.keys()].sort();
}

function watchCrdsEstablished(t: KubeTarget, pending: Set<string>, deadline: number): Promise<void> {
  return new Promise<void>((res, rej) => {
    let settled = false;
    let req: ReturnType<typeof httpsRequest> | undefined;
    const lastConditions = new Map<string, string>();
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req?.destroy();
      if (err) rej(err);
      else res();
    };
    const timer = setTimeout(
      () => {
        const detail = [...pending].map((n) => `${n}: ${lastConditions.get(n) ?? 'no status'}`).join('; ');
        finish(new RealcpError(`realcp: timed out waiting for CRDs to be Established (${detail})`));
      },
      Math.max(0, deadline - Date.now()),
    );
    const onEvent = (ev: { type?: string; object?: Crd & { message?: string } }) => {
      if (ev.type === 'ERROR') {
        start(); // e.g. "too old resource version": just watch again from the current state
        return;
      }
      const crd = ev.object;
      const name = crd?.metadata?.name;
      if (!crd || !name || !pending.has(name)) return;
      const conds = crd.status?.conditions ?? [];
      lastConditions.set(name, JSON.stringify(conds));
      const na = conds.find((c) => c.type === 'NamesAccepted');
      if (na?.status === 'False') {
        finish(new RealcpError(`realcp: CRD ${name} names not accepted: ${na.reason}: ${na.message}`));
        return;
      }
      if (conds.some((c) => c.type === 'Established' && c.status === 'True')) pending.delete(name);
      if (pending.size === 0) finish();
    };
    const start = () => {
      if (settled) return;
      req?.destroy();
      const url = new URL(`${CRD_PATH}?watch=1&timeoutSeconds=300`, t.server);
      req = httpsRequest(url, {
        method: 'GET',
        headers: { Accept: 'application/json', Authorization: `Bearer ${t.token}` },
        ca: t.caPem,
        agent: false,
      });
      req.on('response', (resp) => {
        if (resp.statusCode !== 200) {
          finish(new RealcpError(`realcp: watching CRDs failed (HTTP ${resp.statusCode})`));
          resp.resume();
          return;
        }
        let buf = '';
        resp.setEncoding('utf8');
        resp.on('data', (chunk: string) => {
          buf += chunk;
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (!line) continue;
            try {
              onEvent(JSON.parse(line));
            } catch (err) {
              finish(err instanceof Error ? err : new Error(String(err)));
              return;
            }
          }
        });
        resp.on('end', () => setTimeout(start, 50)); // server closed the watch: open a new one
        resp.on('error', () => setTimeout(start, 50));
      });
      req.on('error', (err) => {
        if (!settled) finish(new RealcpError(`realcp: watching CRDs failed: ${err.message}`));
      });
      req.end();
    };
    start();
  });
}

async function waitFor(
  what: string,
  deadline: number,
  check: () => Promise<true | string>,
  intervalMs = 100,
  procs: Proc[] = [],
): Promise<void> {
  let last = '';
  for (;;) {
    for (const p of procs) if (p.exited) throw exitedError(p, `waiting for ${what}`);
    try {
      const r = await check();
      if (r === true) return;
      last = r;
    } catch (err) {
      if (err instanceof RealcpError) throw err;
      last = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) throw new RealcpError(`realcp: timed out waiting for ${what} (last: ${last})`);
    await sleep(intervalMs);
  }
}

// ----------------------------------------------------------------------------------------------------
// Generic manifests (server-side apply through discovery)

interface DiscoveredResource {
  name: string;
  kind: string;
  namespaced: boolean;
}

class Discovery {
  private readonly cache = new Map<string, DiscoveredResource[]>();
  private readonly t: KubeTarget;
  constructor(t: KubeTarget) {
    this.t = t;
  }

  async resourceFor(apiVersion: string, kind: string): Promise<DiscoveredResource> {
    for (let attempt = 0; attempt < 2; attempt++) {
      if (attempt === 1) this.cache.delete(apiVersion); // CRDs may have been added since
      let list = this.cache.get(apiVersion);
      if (!list) {
        const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
        const r = await kubeRequest<{ resources?: Array<DiscoveredResource> }>(this.t, 'GET', path);
        if (r.status === 404) list = [];
        else if (r.status !== 200) {
          throw new Error(
            `realcp: discovery of ${apiVersion} failed (HTTP ${r.status}): ${statusMessage(r)}`,
          );
        } else list = (r.body.resources ?? []).filter((x) => !x.name.includes('/'));
        this.cache.set(apiVersion, list);
      }
      const hit = list.find((x) => x.kind === kind);
      if (hit) return hit;
    }
    throw new Error(`realcp: the server does not serve kind ${kind} in ${apiVersion} (CRD not installed?)`);
  }
}

const discoveries = new WeakMap<KubeTarget, Discovery>();

/**
 * Server-side applies (create or update, `force=true`) every non-empty document of the given YAML
 * files, in order, to the REST path found through discovery. Objects without metadata.name but with
 * generateName are POSTed. Any failure throws with the server's message; nothing is skipped.
 */
export async function applyManifests(
  target: KubeTarget,
  yamlFiles: string[],
  opts: ApplyOptions = {},
): Promise<AppliedObject[]> {
  let discovery = discoveries.get(target);
  if (!discovery) {
    discovery = new Discovery(target);
    discoveries.set(target, discovery);
  }
  const fieldManager = encodeURIComponent(opts.fieldManager ?? 'gantry-realcp');
  const applied: AppliedObject[] = [];
  for (const file of yamlFiles) {
    const docs = await readYamlDocs(file);
    if (docs.length === 0) throw new Error(`realcp: ${file} contains no objects`);
    for (const doc of docs) {
      const obj = parseDoc(doc);
      const where = `${file} (document ${doc.index})`;
      if (!obj.apiVersion || !obj.kind) throw new Error(`realcp: ${where} lacks apiVersion or kind`);
      const name = obj.metadata?.name;
      if (!name && !obj.metadata?.generateName) throw new Error(`realcp: ${where} lacks metadata.name`);
      const res = await discovery.resourceFor(obj.apiVersion, obj.kind);
      const base = obj.apiVersion.includes('/') ? `/apis/${obj.apiVersion}` : `/api/${obj.apiVersion}`;
      let namespace: string | undefined;
      let collection: string;
      if (res.namespaced) {
        namespace = obj.metadata?.namespace ?? opts.namespace ?? 'default';
        collection = `${base}/namespaces/${namespace}/${res.name}`;
      } else {
        collection = `${base}/${res.name}`;
      }
      // The document is sent as written (YAML); the server takes the namespace from the URL if absent.
      const r = name
        ? await kubeRequest<KubeObject>(
            target,
            'PATCH',
            `${collection}/${encodeURIComponent(name)}?fieldManager=${fieldManager}&force=true`,
            doc.text,
            { contentType: 'application/apply-patch+yaml' },
          )
        : await kubeRequest<KubeObject>(
            target,
            'POST',
            `${collection}?fieldManager=${fieldManager}`,
            doc.text,
            {
              contentType: 'application/yaml',
            },
          );
      if (r.status !== 200 && r.status !== 201) {
        throw new Error(
          `realcp: applying ${obj.kind} ${namespace ? `${namespace}/` : ''}${name ?? obj.metadata?.generateName} ` +
            `from ${where} failed (HTTP ${r.status}): ${statusMessage(r)}`,
        );
      }
      const finalName = r.body.metadata?.name ?? name ?? '';
      applied.push({
        file,
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: finalName,
        ...(namespace ? { namespace } : {}),
        path: `${collection}/${finalName}`,
      });
    }
  }
  return applied;
}

// ----------------------------------------------------------------------------------------------------
// Kubeconfig

export function kubeconfigYaml(t: KubeTarget, user: KubeconfigUser = {}): string {
  const u: Record<string, unknown> = { token: user.token ?? t.token };
  if (user.impersonateUser) u.as = user.impersonateUser;
  if (user.impersonateGroups?.length) {
    if (!user.impersonateUser) throw new Error('realcp: impersonateGroups needs impersonateUser');
    u['as-groups'] = user.impersonateGroups;
  }
  return stringifyYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'realcp',
        cluster: { server: t.server, 'certificate-authority-data': Buffer.from(t.caPem).toString('base64') },
      },
    ],
    users: [{ name: 'realcp-user', user: u }],
    contexts: [{ name: 'realcp', context: { cluster: 'realcp', user: 'realcp-user' } }],
    'current-context': 'realcp',
    preferences: {},
  });
}

// ----------------------------------------------------------------------------------------------------
// Start

async function startOnce(opts: StartOptions, started: number): Promise<RealControlPlane> {
  const bins = resolveBinaries(opts.binDir);
  const deadline = started + (opts.startTimeoutMs ?? 120_000);
  installExitHook();

  const crdDocs = await collectCrds(opts.crdDirs); // fail fast on bad input, before spawning
  debug(`${crdDocs.length} CRD documents read`);
  const runDir = await mkdtemp(join(pickTmpRoot(), 'gantry-realcp-'));
  liveDirs.add(runDir);
  const watchdog = startWatchdog(runDir);
  const procs: Proc[] = [];
  let agent: Agent | undefined;
  let stopped = false;

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    // apiserver first (it would otherwise log etcd connection errors), then etcd.
    for (const p of [...procs].reverse()) await stopProc(p);
    agent?.destroy();
    try {
      watchdog.kill('SIGKILL');
    } catch {
      /* gone */
    }
    liveDirs.delete(runDir);
    if (process.env.REALCP_KEEP_RUN_DIR !== '1') rmSync(runDir, { recursive: true, force: true });
  };

  try {
    const [etcdClient, etcdPeer, apiPort] = (await freePorts(3)) as [number, number, number];
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const peerUrl = `http://127.0.0.1:${etcdPeer}`;

    // etcd, while the SA key is generated
    const saKeyPromise = new Promise<string>((res, rej) =>
      generateKeyPair(
        'rsa',
        {
          modulusLength: 2048,
          privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
          publicKeyEncoding: { type: 'spki', format: 'pem' },
        },
        (err, _pub, priv) => (err ? rej(err) : res(priv)),
      ),
    );
    const etcd = spawnLogged(
      'etcd',
      bins.etcd,
      [
        '--name=default',
        `--data-dir=${join(runDir, 'etcd-data')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=default=${peerUrl}`,
        '--initial-cluster-state=new',
        '--unsafe-no-fsync=true',
        // Single member: elect itself within ~100 ms instead of ~1 s.
        '--heartbeat-interval=10',
        '--election-timeout=100',
        '--auto-compaction-retention=1',
        '--quota-backend-bytes=4294967296',
        '--log-level=warn',
      ],
      runDir,
    );
    procs.push(etcd);

    const saKeyFile = join(runDir, 'sa.key');
    const tokenFile = join(runDir, 'tokens.csv');
    const certDir = join(runDir, 'apiserver-certs');
    const adminToken = genToken();
    const userTokens: Record<string, string> = {};
    const tokenLines = [`${adminToken},admin,admin,"system:masters"`];
    (opts.users ?? []).forEach((u, i) => {
      if (!/^[A-Za-z0-9@._:-]+$/.test(u.name))
        throw new Error(`realcp: unsupported static user name ${u.name}`);
      const tok = genToken();
      userTokens[u.name] = tok;
      const groups = u.groups?.length ? `,"${u.groups.join(',')}"` : '';
      tokenLines.push(`${tok},${u.name},uid-${i + 1}-${u.name}${groups}`);
    });
    await writeFile(tokenFile, `${tokenLines.join('\n')}\n`, { mode: 0o600 });
    await writeFile(saKeyFile, await saKeyPromise, { mode: 0o600 });

    await waitFor(
      'etcd /health',
      deadline,
      async () => {
        const r = await httpGetText(`${etcdUrl}/health`);
        return r.status === 200 && r.text.includes('"true"') ? true : `HTTP ${r.status} ${r.text}`;
      },
      50,
      procs,
    );
    const etcdReadyMs = Date.now() - started;

    const server = `https://127.0.0.1:${apiPort}`;
    const apiserver = spawnLogged(
      'kube-apiserver',
      bins.apiserver,
      [
        `--etcd-servers=${etcdUrl}`,
        `--cert-dir=${certDir}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${apiPort}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        `--service-account-issuer=${server}`,
        `--service-account-key-file=${saKeyFile}`,
        `--service-account-signing-key-file=${saKeyFile}`,
        `--token-auth-file=${tokenFile}`,
        '--authorization-mode=RBAC',
        '--allow-privileged=true',
        '--disable-admission-plugins=ServiceAccount',
        // Nothing reconciles the `kubernetes` Service endpoints (no advertise-address traffic, no log noise).
        '--endpoint-reconciler-type=none',
        '--profiling=false',
        ...(opts.extraApiserverArgs ?? []),
      ],
      runDir,
    );
    procs.push(apiserver);

    // The apiserver self-signs apiserver.crt (leaf followed by its CA) into --cert-dir before serving.
    const crtFile = join(certDir, 'apiserver.crt');
    await waitFor(
      'apiserver.crt',
      deadline,
      async () => (existsSync(crtFile) ? true : 'not yet written'),
      50,
      procs,
    );
    let caPem = '';
    await waitFor(
      'apiserver.crt complete',
      deadline,
      async () => {
        caPem = await readFile(crtFile, 'utf8');
        return caPem.includes('-----END CERTIFICATE-----') ? true : 'partial';
      },
      50,
      procs,
    );
    const target: KubeTarget = { server, token: adminToken, caPem };
    agent = agentFor(target);

    // The secure port answers (authenticated /version) about a second before /readyz passes; the rest
    // is post-start hooks, mostly the RBAC bootstrap. system:masters needs no RBAC, so the CRDs are
    // created meanwhile, and /readyz is still awaited before returning.
    let gitVersion = 'unknown';
    await waitFor(
      'kube-apiserver serving',
      deadline,
      async () => {
        const r = await kubeRequest<{ gitVersion?: string }>(target, 'GET', '/version', undefined, {
          timeoutMs: 5000,
        });
        if (r.status !== 200) return `HTTP ${r.status} ${r.text.slice(0, 500)}`;
        gitVersion = r.body.gitVersion ?? 'unknown';
        return true;
      },
      50,
      procs,
    );
    debug('kube-apiserver serving');
    const etcdVersion = await httpGetText(`${etcdUrl}/version`).then(
      (r) => (JSON.parse(r.text) as { etcdserver?: string }).etcdserver ?? 'unknown',
      () => 'unknown',
    );

    let apiserverReadyMs = 0;
    const readyz = waitFor(
      'kube-apiserver /readyz',
      deadline,
      async () => {
        const r = await kubeRequest(target, 'GET', '/readyz', undefined, { timeoutMs: 5000 });
        return r.status === 200 && r.text.trim() === 'ok' ? true : `HTTP ${r.status} ${r.text.slice(0, 500)}`;
      },
      50,
      procs,
    ).then(() => {
      apiserverReadyMs = Date.now() - started;
      debug('kube-apiserver ready');
    });
    const [crds] = await Promise.all([installCrds(target, crdDocs, deadline, procs), readyz]);
    for (const p of procs) if (p.exited) throw exitedError(p, 'installing CRDs');
    const crdsReadyMs = Date.now() - started;

    const cp: RealControlPlane = {
      server,
      token: adminToken,
      caPem,
      caData: Buffer.from(caPem).toString('base64'),
      userTokens,
      versions: { kubernetes: gitVersion, etcd: etcdVersion },
      crds,
      startupMs: Date.now() - started,
      timings: { etcdReadyMs, apiserverReadyMs, crdsReadyMs },
      runDir,
      kubeconfigYaml: (user) => kubeconfigYaml(target, user),
      createNamespace: async (prefix) => {
        const base =
          prefix
            .toLowerCase()
            .replace(/[^a-z0-9-]+/g, '-')
            .replace(/^-+|-+$/g, '')
            .slice(0, 50) || 'ns';
        const name = `${base}-${randomBytes(4).toString('hex')}`;
        const r = await kubeRequest(target, 'POST', '/api/v1/namespaces', {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name },
        });
        if (r.status !== 201) {
          throw new Error(
            `realcp: creating namespace ${name} failed (HTTP ${r.status}): ${statusMessage(r)}`,
          );
        }
        return name;
      },
      applyManifests: (files, applyOpts) => applyManifests(target, files, applyOpts),
      request: (method, path, body, reqOpts) => kubeRequest(target, method, path, body, reqOpts),
      stop,
    };
    return cp;
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Starts etcd + kube-apiserver on free 127.0.0.1 ports, installs the CRDs and waits until every CRD is
 * Established and served. Retries twice if a picked port was taken in the meantime.
 */
export async function startRealControlPlane(opts: StartOptions): Promise<RealControlPlane> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts, started);
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      if (attempt < 3 && /address already in use/i.test(msg)) continue;
      throw err;
    }
  }
}
