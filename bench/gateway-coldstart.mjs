#!/usr/bin/env node
// Cold start of the Kubernetes gateway, as BUDGETS.md measures it: esbuild bundles (minified, ESM,
// platform node, target node24), each run N times as a fresh process under the project's Node 24,
// alternating, after one warm-up round. The process imports the bundle and invokes its handler once.
//
//   node bench/gateway-coldstart.mjs [--runs 10] [--write]
//
// --write also saves the table to bench/results/gateway-coldstart.md (between the RESULTS markers).
// Bundles go to bench/.out/ (git-ignored). Only ratios from one run count: timings are noisy.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'bench/.out/gateway-coldstart');
const NODE = join(ROOT, 'node_modules/.bin/node');
const args = process.argv.slice(2);
const RUNS = Number(args[args.indexOf('--runs') + 1]) || 10;

/**
 * client-node's generated code imports undici (≈0.7 MB minified) only for its default fetch-based
 * HTTP library, which the gateway replaces with node:https. undici's package.json does not declare
 * itself side-effect free, so esbuild keeps it unless told: this plugin tells it. Any bundle of a
 * Kubernetes-talking function needs the same plugin (or `alias: { undici: <stub> }`); when something
 * in the bundle does use undici (client-node's KubeConfig does), esbuild keeps it anyway.
 */
export const undiciSideEffectFree = {
  name: 'undici-side-effect-free',
  setup(b) {
    b.onResolve({ filter: /^undici$/ }, async (a) => {
      if (a.pluginData?.undici) return undefined;
      const r = await b.resolve(a.path, {
        kind: a.kind,
        resolveDir: a.resolveDir,
        importer: a.importer,
        pluginData: { undici: true },
      });
      return { ...r, sideEffects: false };
    });
  },
};

const SERVER = "'https://127.0.0.1:6443'";
const CA = "'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMtLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=='";

const DEEP = '@kubernetes/client-node/dist/gen';
const STATIC_CONN = `{ getCurrentCluster: () => ({ server: ${SERVER} }),
    applyToHTTPSOptions: async (o) => { o.headers = { Authorization: 'Bearer t' }; } }`;
const CLIENT_NODE_ONLY = `import { ServerConfiguration } from '${DEEP}/servers.js';
import { ObjectCustomObjectsApi } from '${DEEP}/types/ObjectParamAPI.js';
import { wrapHttpLibrary } from '${DEEP}/http/http.js';
const customObjects = () => new ObjectCustomObjectsApi({ baseServer: new ServerConfiguration(${SERVER}, {}),
  httpApi: wrapHttpLibrary({ send: async () => { throw new Error('no network'); } }), middleware: [], authMethods: {} });`;

/**
 * The handlers compared (sources are written next to the bundles). Each "SDK only" bundle constructs
 * exactly the clients the Gantry bundle after it needs, so the difference is Gantry's own code.
 */
const CASES = [
  {
    id: 'a',
    label: 'minimal handler (returns a constant)',
    src: `export const handler = async () => ({ ok: true });`,
  },
  {
    id: 'b',
    label: 'KubeConfig + CustomObjectsApi from the `@kubernetes/client-node` 2.0.1 entry (BUDGETS.md row)',
    src: `import { KubeConfig, CustomObjectsApi } from '@kubernetes/client-node';
export const handler = async () => {
  const kc = new KubeConfig();
  kc.loadFromOptions({ clusters: [{ name: 'c', server: ${SERVER}, caData: ${CA} }], users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }], currentContext: 'x' });
  return typeof kc.makeApiClient(CustomObjectsApi);
};`,
  },
  {
    id: 'c',
    label: 'SDK only: client-node CustomObjectsApi by deep import, no undici',
    src: `${CLIENT_NODE_ONLY}
export const handler = async () => typeof customObjects();`,
  },
  {
    id: 'd',
    label: 'Gantry gateway (`makeKubernetesGateway`, static connection)',
    src: `import { makeKubernetesGateway } from '${ROOT}/lib/adapters/kubernetes/gateway.ts';
export const handler = async () => typeof makeKubernetesGateway({ kubeConfig: ${STATIC_CONN} }).createJob;`,
  },
  {
    id: 'e',
    label: 'SDK only: EKSClient + client-node CustomObjectsApi',
    src: `import { EKSClient, DescribeClusterCommand } from '@aws-sdk/client-eks';
${CLIENT_NODE_ONLY}
export const handler = async () =>
  typeof new EKSClient({ region: 'eu-west-1' }) + typeof DescribeClusterCommand + typeof customObjects();`,
  },
  {
    id: 'f',
    label: 'Gantry gateway on EKS: EKSClient + `eksKubeConfig` (DescribeCluster path, no call made)',
    src: `import { EKSClient } from '@aws-sdk/client-eks';
import { eksKubeConfig } from '${ROOT}/lib/adapters/kubernetes/kubeconfig.ts';
import { makeKubernetesGateway } from '${ROOT}/lib/adapters/kubernetes/gateway.ts';
export const handler = async () => {
  const eks = new EKSClient({ region: 'eu-west-1' });
  const gw = makeKubernetesGateway({ kubeConfig: () => eksKubeConfig({ clusterName: 'c', region: 'eu-west-1', eks }) });
  return typeof gw.createJob;
};`,
  },
  {
    id: 'g',
    label:
      'Gantry gateway on EKS, endpoint + CA from configuration (`eksConnection`), credentials `fromEnv()`, no EKSClient',
    src: `import { fromEnv } from '@aws-sdk/credential-provider-env';
import { eksConnection } from '${ROOT}/lib/adapters/kubernetes/kubeconfig.ts';
import { makeKubernetesGateway } from '${ROOT}/lib/adapters/kubernetes/gateway.ts';
export const handler = async () => {
  const gw = makeKubernetesGateway({ kubeConfig: eksConnection({ clusterName: 'c', region: 'eu-west-1',
    endpoint: { server: ${SERVER}, caData: ${CA} }, credentials: fromEnv() }) });
  return typeof gw.createJob;
};`,
  },
  {
    id: 'h',
    label:
      '(g) without `kubeConfigFromYaml` in the bundle: same connection inlined (what splitting the YAML loader out of kubeconfig.ts would give)',
    src: `import { fromEnv } from '@aws-sdk/credential-provider-env';
import { makeEksTokenProvider } from '${ROOT}/lib/adapters/kubernetes/eks-token.ts';
import { makeKubernetesGateway } from '${ROOT}/lib/adapters/kubernetes/gateway.ts';
export const handler = async () => {
  const tokens = makeEksTokenProvider({ clusterName: 'c', region: 'eu-west-1', credentials: fromEnv() });
  const ca = Buffer.from(${CA}, 'base64');
  const gw = makeKubernetesGateway({ kubeConfig: { getCurrentCluster: () => ({ server: ${SERVER} }),
    applyToHTTPSOptions: async (o) => { o.ca = ca; o.headers = { Authorization: 'Bearer ' + (await tokens.getToken()) }; } } });
  return typeof gw.createJob;
};`,
  },
];

async function bundle(c) {
  mkdirSync(OUT, { recursive: true });
  const entry = join(OUT, `${c.id}.entry.mjs`);
  const outfile = join(OUT, `${c.id}.mjs`);
  writeFileSync(entry, `${c.src}\n`);
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    // ESM builds of the AWS SDK / Smithy packages (dist-es) tree-shake; the default for platform
    // node ('main' first) picks dist-cjs, which drags all of @smithy/core into signature-v4 alone.
    mainFields: ['module', 'main'],
    outfile,
    metafile: true,
    logLevel: 'error',
    absWorkingDir: ROOT,
    plugins: [undiciSideEffectFree],
    // CommonJS dependencies call require() on Node built-ins: give the ESM bundle one.
    banner: { js: "import{createRequire as __cr}from'node:module';const require=__cr(import.meta.url);" },
  });
  const inputs = Object.values(result.metafile.outputs)[0].inputs;
  const byPackage = new Map();
  for (const [path, { bytesInOutput }] of Object.entries(inputs)) {
    const nm = path.lastIndexOf('node_modules/');
    let key = relative(ROOT, join(ROOT, path));
    if (nm >= 0) {
      const rest = path.slice(nm + 'node_modules/'.length).split('/');
      key = rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
      if (key === '@kubernetes/client-node') key += `/${rest.slice(2, 4).join('/')}`;
    } else if (key.startsWith('lib/')) key = 'lib/ (Gantry)';
    byPackage.set(key, (byPackage.get(key) ?? 0) + bytesInOutput);
  }
  const top = [...byPackage.entries()].sort((x, y) => y[1] - x[1]).slice(0, 5);
  return { ...c, outfile, size: statSync(outfile).size, top };
}

function runOnce(file) {
  const code = `const t=performance.now();const m=await import(${JSON.stringify(file)});await m.handler({});
process.stdout.write(JSON.stringify({ms:performance.now()-t,rss:process.resourceUsage().maxRSS}))`;
  const t0 = process.hrtime.bigint();
  const r = spawnSync(NODE, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  const wall = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${file} failed: ${r.stderr}`);
  const { ms, rss } = JSON.parse(r.stdout);
  return { wall, ms, rssMiB: rss / 1024 };
}

const median = (xs) => {
  const s = [...xs].sort((p, q) => p - q);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmtSize = (b) =>
  b < 1024 ? `${b} B` : b < 1024 * 1024 ? `${(b / 1024).toFixed(0)} KB` : `${(b / 1048576).toFixed(2)} MB`;

const loadBefore = loadavg()[0];
const bundles = [];
for (const c of CASES) bundles.push(await bundle(c));
const samples = new Map(bundles.map((b) => [b.id, []]));
for (const b of bundles) runOnce(b.outfile); // warm-up (page cache, node binary)
for (let i = 0; i < RUNS; i++) for (const b of bundles) samples.get(b.id).push(runOnce(b.outfile));

const stats = bundles.map((b) => {
  const s = samples.get(b.id);
  return {
    ...b,
    wall: median(s.map((x) => x.wall)),
    ms: median(s.map((x) => x.ms)),
    rss: median(s.map((x) => x.rssMiB)),
  };
});
const base = stats[0];
const nodeVersion = spawnSync(NODE, ['--version'], { encoding: 'utf8' }).stdout.trim();
const lines = [
  `Node ${nodeVersion}, ${RUNS} runs each after a warm-up, alternating, medians; ${new Date().toISOString().slice(0, 10)}; ` +
    `${cpus().length} CPUs, load average ${loadBefore.toFixed(1)} before / ${loadavg()[0].toFixed(1)} after (other work on the machine inflates every row).`,
  '',
  '| bundle | size | wall (process) | import + handler | peak RSS | × minimal (wall) | × minimal (RSS) |',
  '| --- | --- | --- | --- | --- | --- | --- |',
  ...stats.map(
    (s) =>
      `| (${s.id}) ${s.label} | ${fmtSize(s.size)} | ${s.wall.toFixed(0)} ms | ${s.ms.toFixed(1)} ms | ${s.rss.toFixed(0)} MiB | ${(s.wall / base.wall).toFixed(2)} | ${(s.rss / base.rss).toFixed(2)} |`,
  ),
  '',
  'Largest inputs per bundle (bytes in the minified output):',
  '',
  ...stats
    .filter((s) => s.id !== 'a')
    .map((s) => `- (${s.id}) ${s.top.map(([k, v]) => `${k} ${fmtSize(v)}`).join(', ')}`),
];
const table = lines.join('\n');
console.log(table);

if (args.includes('--write')) {
  const file = join(ROOT, 'bench/results/gateway-coldstart.md');
  const text = readFileSync(file, 'utf8');
  const start = '<!-- RESULTS:START -->';
  const end = '<!-- RESULTS:END -->';
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i < 0 || j < 0) throw new Error(`${file} lacks the ${start} / ${end} markers`);
  writeFileSync(file, `${text.slice(0, i + start.length)}\n${table}\n${text.slice(j)}`);
  spawnSync(join(ROOT, 'node_modules/.bin/biome'), ['format', '--write', file], { stdio: 'ignore' }); // align the table
  console.log(`\nwritten to ${relative(ROOT, file)}`);
}
