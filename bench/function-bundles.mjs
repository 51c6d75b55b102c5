#!/usr/bin/env node
// Size and cold-start init of every deployed function's bundle, against a minimal handler and against
// a bundle that only constructs the SDK clients that function needs (BUDGETS.md).
//
//   node bench/function-bundles.mjs [--runs 10] [--only submitRun,reconciler] [--before DIR] [--instructions [--counts N]] [--write]
//
// --only limits the run to the named functions (callgrind is slow). --before DIR also bundles the
// same functions from another checkout of the project (DIR, e.g. `git archive <commit>` unpacked
// with node_modules linked) and runs them in the same rounds, side by side: the rows "<fn> (before)"
// and a table of what the change adds.
//
// Each function is bundled with the esbuild options and plugins of serverless.yml's custom.esbuild
// and the Gantry config `npm run package` ships by default (deploy/serverless/config/dev.json: with
// eks.endpoint/caData the EKS SDK is left out). The SDK-only baseline of a function constructs the
// AWS SDK clients on its main path (what the entry imports, plus what functions/ imports dynamically,
// e.g. the gateway); clients reachable only through dynamic imports in lib/ (fallbacks) are listed
// but not in the baseline. Talking to Kubernetes is Gantry's own code (custom-objects.ts) unless a
// bundle holds client-node's generated CustomObjectsApi, which then joins the baseline; the
// "reference" row is that client alone, for comparison. Each bundle then runs as a fresh process under the project's Node 24
// (node_modules/.bin/node): the process imports the bundle and calls nothing (Lambda's init phase;
// nothing may run at import time). All bundles run once as a warm-up, then --runs rounds, alternating
// within each round; medians. "wall" is the whole process, "import" is measured inside it, peak RSS
// is process.resourceUsage().maxRSS. Only ratios from one run count: timings on shared machines move.
// --instructions also counts each bundle's import under valgrind's callgrind (node --single-threaded,
// so V8's background compilation and GC run on the main thread and the count repeats to ≈ ±0.5 %
// whatever else the machine is doing); one count per bundle (--counts N: the median of N, as one
// count of the same bundle can still move by ≈ 1 %), reported beside the wall times. A
// function constructs its SDK clients on first use, the SDK-only bundle at import, so the
// instructions ratio adds back what constructing them costs (SDK-only less an import-only bundle
// of the same clients). "CPU" is the process's user + system time (resourceUsage), less moved by
// other work on the machine than wall.
// --write puts the table into bench/results/function-bundles.md (between the RESULTS markers).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deflateRawSync } from 'node:zlib';
import { build } from 'esbuild';
import { parseYaml as parse } from '../lib/yaml.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'bench/.out/function-bundles');
const NODE = join(ROOT, 'node_modules/.bin/node');
const args = process.argv.slice(2);
const RUNS = Number(args[args.indexOf('--runs') + 1]) || 10;
const INSTRUCTIONS = args.includes('--instructions');
/** Callgrind counts per bundle (median): one count can move by ≈ 1 % between identical bundles. */
const COUNTS = args.includes('--counts') ? Number(args[args.indexOf('--counts') + 1]) || 1 : 1;
const ONLY = args.includes('--only') ? new Set(args[args.indexOf('--only') + 1].split(',')) : undefined;
const BEFORE = args.includes('--before') ? args[args.indexOf('--before') + 1] : undefined;
const require = createRequire(import.meta.url);
process.chdir(ROOT); // the plugins name entries relative to the service directory, as serverless-esbuild does

// ---- the packaging's esbuild options ------------------------------------------------------------

const sls = parse(readFileSync(join(ROOT, 'serverless.yml'), 'utf8'));
const { pluginsFor, undiciSideEffectFree } = require('../deploy/serverless/esbuild-plugins.cjs');
const { K8S_FUNCTIONS } = require('../deploy/serverless/iam.cjs');
/** serverless-esbuild's own options, removed before esbuild sees the rest (as its bundle.js does). */
const PLUGIN_ONLY = [
  'concurrency',
  'zipConcurrency',
  'exclude',
  'nativeZip',
  'packager',
  'packagePath',
  'watch',
  'keepOutputDirectory',
  'packagerOptions',
  'installExtraArgs',
  'outputFileExtension',
  'outputBuildFolder',
  'outputWorkFolder',
  'nodeExternals',
  'skipBuild',
  'skipRebuild',
  'skipBuildExcludeFns',
  'stripEntryResolveExtensions',
  'disposeContext',
  'plugins',
];
const custom = sls.custom.esbuild;
const esbuildOptions = Object.fromEntries(Object.entries(custom).filter(([k]) => !PLUGIN_ONLY.includes(k)));
const external = [...(custom.external ?? []), ...(custom.exclude ?? []).filter((e) => e !== '*')];
/** The Gantry config `npm run package` ships by default (stage dev): it decides whether the EKS SDK ships. */
const CONFIG = 'deploy/serverless/config/dev.json';
const functionPlugins = pluginsFor(sls.functions, JSON.parse(readFileSync(join(ROOT, CONFIG), 'utf8')));

/** Baselines get the packaging's options too, minus the per-function Kubernetes stub. */
async function bundle(id, entry, plugins = functionPlugins) {
  const outfile = join(OUT, `${id}.mjs`);
  const result = await build({
    ...esbuildOptions,
    // The service directory (--before bundles from another checkout): entries, tsconfig, node_modules.
    absWorkingDir: process.cwd(),
    entryPoints: [entry],
    outfile,
    external,
    plugins,
    metafile: true,
    logLevel: 'error',
  });
  const code = readFileSync(outfile);
  const inputs = Object.values(result.metafile.outputs)[0].inputs;
  const byPart = new Map();
  for (const [path, { bytesInOutput }] of Object.entries(inputs)) {
    const nm = path.lastIndexOf('node_modules/');
    let key;
    if (nm >= 0) {
      const rest = path.slice(nm + 'node_modules/'.length).split('/');
      key = rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
      if (key === '@kubernetes/client-node') key += `/${rest.slice(2, 4).join('/')}`;
    } else if (path.startsWith('lib/') || path.startsWith('functions/')) key = 'Gantry (lib/, functions/)';
    else key = relative(ROOT, join(ROOT, path));
    byPart.set(key, (byPart.get(key) ?? 0) + bytesInOutput);
  }
  const has = (re, paths = Object.keys(inputs)) =>
    [...paths].some((p) => re.test(p) && inputs[p]?.bytesInOutput > 0);
  // The main path: what the entry imports, and what the handler wiring (functions/) imports
  // dynamically on first use (e.g. the Kubernetes gateway). Dynamic imports inside lib/ or
  // node_modules are fallbacks (the EKS SDK when the configuration lacks endpoint and CA, a
  // kubeconfig) or the SDK's own lazy credential chain: in the bundle, not loaded on the main path.
  const meta = result.metafile.inputs;
  const main = new Set();
  const todo = Object.keys(meta).filter((p) => p === relative(ROOT, entry) || p === entry);
  while (todo.length > 0) {
    const p = todo.pop();
    if (main.has(p) || !meta[p]) continue;
    main.add(p);
    for (const i of meta[p].imports ?? []) {
      if (i.external) continue;
      if (i.kind !== 'dynamic-import' || p.startsWith('functions/')) todo.push(i.path);
    }
  }
  const client = (c) => new RegExp(`node_modules/@aws-sdk/client-${c}/`);
  const CLIENTS = ['dynamodb', 'eventbridge', 's3', 'sfn', 'sqs', 'ssm', 'eks'];
  return {
    id,
    outfile,
    size: statSync(outfile).size,
    deflated: deflateRawSync(code, { level: 9 }).length,
    parts: [...byPart.entries()].sort((a, b) => b[1] - a[1]),
    clients: CLIENTS.filter((c) => has(client(c), main)),
    lazyClients: CLIENTS.filter((c) => has(client(c)) && !has(client(c), main)),
    /** client-node's generated API (and its model classes); Gantry's own REST client otherwise. */
    kubernetes: has(/node_modules\/@kubernetes\/client-node\/dist\/gen\/apis\/CustomObjectsApi/),
    /** Talks to Kubernetes (client-node or Gantry's lib/adapters/kubernetes/ on the main path). */
    kube:
      has(/node_modules\/@kubernetes\/client-node\//, main) ||
      has(/^lib\/adapters\/kubernetes\/gateway\.ts$/, main),
  };
}

// ---- baselines ----------------------------------------------------------------------------------

const CLIENT_CLASS = {
  dynamodb: 'DynamoDBClient',
  eventbridge: 'EventBridgeClient',
  s3: 'S3Client',
  sfn: 'SFNClient',
  sqs: 'SQSClient',
  ssm: 'SSMClient',
  eks: 'EKSClient',
};
/** The state table's client is the document client over DynamoDB (functions/_deps.ts `table()`). */
const DOCUMENT_CLIENT = "import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';";
/**
 * The Kubernetes client as the gateway uses it: client-node's generated CustomObjectsApi by deep
 * import (lib/adapters/kubernetes/gateway.ts), constructed with a placeholder transport.
 */
const DEEP = '@kubernetes/client-node/dist/gen';
const KUBE = `import { ServerConfiguration } from '${DEEP}/servers.js';
import { ObjectCustomObjectsApi } from '${DEEP}/types/ObjectParamAPI.js';
import { wrapHttpLibrary } from '${DEEP}/http/http.js';
const api = new ObjectCustomObjectsApi({ baseServer: new ServerConfiguration('https://127.0.0.1:6443', {}),
  httpApi: wrapHttpLibrary({ send: async () => { throw new Error('no network'); } }), middleware: [], authMethods: {} });`;

function sdkOnlySource(clients, kubernetes) {
  const lines = clients.map((c) => `import { ${CLIENT_CLASS[c]} } from '@aws-sdk/client-${c}';`);
  if (clients.includes('dynamodb')) lines.push(DOCUMENT_CLIENT);
  if (kubernetes) lines.push(KUBE);
  const made = clients.map((c) =>
    c === 'dynamodb'
      ? "DynamoDBDocumentClient.from(new DynamoDBClient({ region: 'us-east-1' }))"
      : `new ${CLIENT_CLASS[c]}({ region: 'us-east-1' })`,
  );
  if (kubernetes) made.push('api');
  lines.push(`const clients = [${made.join(', ')}];`, 'export const handler = async () => clients.length;');
  return `${lines.join('\n')}\n`;
}

/** The same clients imported but not constructed: what a function's bundle holds at init (it constructs on first use). */
function sdkImportOnlySource(clients) {
  const lines = clients.map((c) => `import { ${CLIENT_CLASS[c]} } from '@aws-sdk/client-${c}';`);
  if (clients.includes('dynamodb')) lines.push(DOCUMENT_CLIENT);
  const classes = clients.map((c) => CLIENT_CLASS[c]);
  if (clients.includes('dynamodb')) classes.push('DynamoDBDocumentClient');
  lines.push(`export const handler = async () => [${classes.join(', ')}].length;`);
  return `${lines.join('\n')}\n`;
}

const fmt = (b) =>
  b < 1024 ? `${b} B` : b < 1048576 ? `${(b / 1024).toFixed(0)} KB` : `${(b / 1048576).toFixed(2)} MB`;
const median = (xs) => {
  const s = [...xs].sort((p, q) => p - q);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function runOnce(file) {
  const code = `const t=performance.now();await import(${JSON.stringify(file)});
const u=process.resourceUsage();
process.stdout.write(JSON.stringify({ms:performance.now()-t,rss:u.maxRSS,cpu:(u.userCPUTime+u.systemCPUTime)/1000}))`;
  const t0 = process.hrtime.bigint();
  const r = spawnSync(NODE, ['--input-type=module', '-e', code], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH },
  });
  const wall = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${file} failed to load: ${r.stderr}`);
  const { ms, rss, cpu } = JSON.parse(r.stdout);
  return { wall, ms, rss: rss / 1024, cpu };
}

/** Instructions executed by a process that imports the bundle (callgrind), in millions. */
function instructionsOnce(file) {
  const r = spawnSync(
    'valgrind',
    [
      '--tool=callgrind',
      '--callgrind-out-file=/dev/null',
      NODE,
      '--single-threaded',
      '--input-type=module',
      '-e',
      `await import(${JSON.stringify(file)})`,
    ],
    { encoding: 'utf8', env: { PATH: process.env.PATH } },
  );
  const m = /refs:\s+([\d,]+)/.exec(r.stderr ?? '');
  if (r.status !== 0 || !m)
    throw new Error(`callgrind on ${file} failed (is valgrind installed?): ${r.stderr?.slice(-400)}`);
  return Number(m[1].replaceAll(',', '')) / 1e6;
}

/** The median of COUNTS callgrind counts of one bundle, in millions. */
function instructions(file) {
  const counts = Array.from({ length: COUNTS }, () => instructionsOnce(file)).sort((a, b) => a - b);
  return counts[Math.floor(counts.length / 2)];
}

// ---- run ----------------------------------------------------------------------------------------

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
const loadBefore = loadavg()[0];

const functions = [];
for (const [key, fn] of Object.entries(sls.functions)) {
  if (ONLY && !ONLY.has(key)) continue;
  const entry = `${fn.handler.slice(0, fn.handler.lastIndexOf('.'))}.ts`;
  functions.push({ ...(await bundle(key, entry)), key, k8s: K8S_FUNCTIONS.includes(key) });
  if (BEFORE) {
    // Entries and the plugins' paths are relative to the service directory: bundle from there.
    process.chdir(BEFORE);
    try {
      const before = await bundle(`${key}@before`, entry);
      functions.push({ ...before, key: `${key} (before)`, of: key, k8s: K8S_FUNCTIONS.includes(key) });
    } finally {
      process.chdir(ROOT);
    }
  }
}
writeFileSync(join(OUT, 'minimal.entry.mjs'), 'export const handler = async () => ({ ok: true });\n');
const minimal = await bundle('minimal', join(OUT, 'minimal.entry.mjs'), [undiciSideEffectFree]);
const baselines = new Map();
for (const f of functions) {
  const id = `sdk-${f.clients.join('-') || 'none'}${f.kubernetes ? '-kube' : ''}`;
  if (!baselines.has(id)) {
    writeFileSync(join(OUT, `${id}.entry.mjs`), sdkOnlySource(f.clients, f.kubernetes));
    baselines.set(id, await bundle(id, join(OUT, `${id}.entry.mjs`), [undiciSideEffectFree]));
    if (INSTRUCTIONS && f.clients.length > 0) {
      writeFileSync(join(OUT, `${id}-import.entry.mjs`), sdkImportOnlySource(f.clients));
      const importOnly = await bundle(`${id}-import`, join(OUT, `${id}-import.entry.mjs`), [
        undiciSideEffectFree,
      ]);
      baselines.get(id).importOnly = importOnly;
    }
  }
  f.baseline = id;
}

if (!baselines.has('sdk-kube')) {
  writeFileSync(join(OUT, 'sdk-kube.entry.mjs'), sdkOnlySource([], true));
  baselines.set(
    'sdk-kube',
    await bundle('sdk-kube', join(OUT, 'sdk-kube.entry.mjs'), [undiciSideEffectFree]),
  );
}

const all = [minimal, ...baselines.values(), ...functions];
const samples = new Map(all.map((b) => [b.id, []]));
for (const b of all) runOnce(b.outfile); // warm-up: page cache, node binary
for (let i = 0; i < RUNS; i++) for (const b of all) samples.get(b.id).push(runOnce(b.outfile));
if (INSTRUCTIONS) {
  for (const b of all) b.instr = instructions(b.outfile);
  for (const b of baselines.values())
    if (b.importOnly) b.importOnly.instr = instructions(b.importOnly.outfile);
}
for (const b of all) {
  const s = samples.get(b.id);
  b.wall = median(s.map((x) => x.wall));
  b.ms = median(s.map((x) => x.ms));
  b.rss = median(s.map((x) => x.rss));
  b.cpu = median(s.map((x) => x.cpu));
}

/**
 * Instructions of the function with its clients constructed, over the SDK-only bundle: a function
 * constructs its clients on first use, so its init lacks what constructing them costs (the
 * SDK-only bundle's count less the import-only one's); adding it back compares like with like.
 */
const fairInstr = (f) => {
  const b = baselines.get(f.baseline);
  const construct = b.importOnly ? b.instr - b.importOnly.instr : 0;
  return (f.instr + construct) / b.instr;
};

// ---- report -------------------------------------------------------------------------------------

const nodeVersion = spawnSync(NODE, ['--version'], { encoding: 'utf8' }).stdout.trim();
const pct = (x) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(0)} %`;
const instrCell = (b) => (INSTRUCTIONS ? ` ${b.instr.toFixed(0)} M |` : '');
const verdict = (f) => {
  const b = baselines.get(f.baseline);
  const own = Math.max(f.wall / b.wall - 1, f.rss / b.rss - 1);
  const checks = [own <= 0.1 ? 'own code ≤ 10 % ✓' : `own code ${pct(own)} ✗`];
  if (INSTRUCTIONS) {
    const ownInstr = fairInstr(f) - 1;
    checks.push(ownInstr <= 0.1 ? 'instructions ≤ 10 % ✓' : `instructions ${pct(ownInstr)} ✗`);
  }
  if (f.k8s) checks.push(f.wall / minimal.wall <= 2.5 ? '≤ 2.5× minimal ✓' : '> 2.5× minimal ✗');
  if (!f.k8s && (f.kubernetes || f.kube)) checks.push('ships the Kubernetes client ✗');
  return checks.join(', ');
};
const lines = [
  `Node ${nodeVersion}; ${RUNS} rounds after a warm-up, every bundle once per round, medians; ${new Date().toISOString().slice(0, 10)}; ` +
    `${cpus().length} CPUs, load average ${loadBefore.toFixed(1)} before / ${loadavg()[0].toFixed(1)} after` +
    `${INSTRUCTIONS ? `; instructions: ${COUNTS === 1 ? 'one callgrind count' : `median of ${COUNTS} callgrind counts`} per bundle (node --single-threaded)` : ''}.`,
  '',
  `| bundle | k8s | SDK clients | size | zipped (deflate) | wall | CPU | import | peak RSS |${INSTRUCTIONS ? ' instructions |' : ''} × minimal (wall) | × SDK-only (wall) | × SDK-only (CPU) | × SDK-only (RSS) |${INSTRUCTIONS ? ' × SDK-only (instructions, clients constructed) |' : ''} budget |`,
  `| --- | --- | --- | --- | --- | --- | --- | --- | --- |${INSTRUCTIONS ? ' --- |' : ''} --- | --- | --- | --- |${INSTRUCTIONS ? ' --- |' : ''} --- |`,
  ...[minimal, ...baselines.values()].map(
    (b) =>
      `| ${b.id === 'minimal' ? 'minimal handler' : b.id === 'sdk-kube' ? 'reference: client-node CustomObjectsApi only' : `SDK only: ${b.id.slice(4)}`} | | | ${fmt(b.size)} | ${fmt(b.deflated)} | ${b.wall.toFixed(0)} ms | ${b.cpu.toFixed(0)} ms | ${b.ms.toFixed(1)} ms | ${b.rss.toFixed(0)} MiB |${INSTRUCTIONS ? ` ${b.instr.toFixed(0)} M${b.importOnly ? ` (import only ${b.importOnly.instr.toFixed(0)} M)` : ''} |` : ''} ${(b.wall / minimal.wall).toFixed(2)} | | | |${INSTRUCTIONS ? ' |' : ''} |`,
  ),
  ...functions.map((f) => {
    const b = baselines.get(f.baseline);
    return (
      `| ${f.key} | ${f.k8s ? 'yes' : ''} | ${[...f.clients, ...(f.kubernetes ? ['client-node'] : []), ...f.lazyClients.map((c) => `(${c}: fallback only)`)].join(', ')} | ${fmt(f.size)} | ${fmt(f.deflated)} | ` +
      `${f.wall.toFixed(0)} ms | ${f.cpu.toFixed(0)} ms | ${f.ms.toFixed(1)} ms | ${f.rss.toFixed(0)} MiB |${instrCell(f)} ${(f.wall / minimal.wall).toFixed(2)} | ` +
      `${(f.wall / b.wall).toFixed(2)} | ${(f.cpu / b.cpu).toFixed(2)} | ${(f.rss / b.rss).toFixed(2)} |${INSTRUCTIONS ? ` ${fairInstr(f).toFixed(2)} |` : ''} ${verdict(f)} |`
    );
  }),
  '',
  'Largest parts of each bundle (bytes in the minified output):',
  '',
  ...functions.map(
    (f) =>
      `- ${f.key} (${fmt(f.size)}): ${f.parts
        .slice(0, 7)
        .map(([k, v]) => `${k} ${fmt(v)}`)
        .join(', ')}`,
  ),
];
if (BEFORE) {
  const after = new Map(functions.filter((f) => !f.of).map((f) => [f.key, f]));
  const signed = (x, digits = 0, unit = '') => `${x >= 0 ? '+' : ''}${x.toFixed(digits)}${unit}`;
  lines.push(
    '',
    `What the change adds (this tree over ${BEFORE}, same rounds):`,
    '',
    `| function | size | peak RSS | wall |${INSTRUCTIONS ? ' instructions |' : ''} own code over SDK-only, before → after (RSS${INSTRUCTIONS ? ' / instructions' : ''}) |`,
    `| --- | --- | --- | --- |${INSTRUCTIONS ? ' --- |' : ''} --- |`,
    ...functions
      .filter((f) => f.of)
      .map((b) => {
        const a = after.get(b.of);
        const base = baselines.get(a.baseline);
        const baseB = baselines.get(b.baseline);
        const own = (f, bl) =>
          `${pct(f.rss / bl.rss - 1)}${INSTRUCTIONS ? ` / ${pct(fairInstr(f) - 1)}` : ''}`;
        return (
          `| ${b.of} | ${fmt(b.size)} → ${fmt(a.size)} (${signed((a.size - b.size) / 1024, 1, ' KB')}) | ` +
          `${signed(a.rss - b.rss, 1, ' MiB')} | ${signed(a.wall - b.wall, 0, ' ms')} (${signed((a.wall / b.wall - 1) * 100, 1, ' %')}) |` +
          `${INSTRUCTIONS ? ` ${signed(a.instr - b.instr, 1, ' M')} (${signed((a.instr / b.instr - 1) * 100, 1, ' %')}) |` : ''} ` +
          `${own(b, baseB)} → ${own(a, base)} |`
        );
      }),
  );
}
const table = lines.join('\n');
console.log(table);

if (args.includes('--write')) {
  const file = join(ROOT, 'bench/results/function-bundles.md');
  const text = readFileSync(file, 'utf8');
  const start = '<!-- RESULTS:START -->';
  const end = '<!-- RESULTS:END -->';
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i < 0 || j < 0) throw new Error(`${file} lacks the ${start} / ${end} markers`);
  writeFileSync(file, `${text.slice(0, i + start.length)}\n${table}\n${text.slice(j)}`);
  spawnSync(join(ROOT, 'node_modules/.bin/biome'), ['format', '--write', file], { stdio: 'ignore' });
  console.log(`\nwritten to ${relative(ROOT, file)}`);
}
