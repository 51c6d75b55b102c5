#!/usr/bin/env node
// Bench-only experiment: what zod/mini would save at a cold start. The same configuration schemas
// (bench/zod-mini/config-zod.ts and config-zod-mini.ts: lib/config.ts without data triggers) are
// built and used once (the config of deploy/serverless/config/dev.json and a Lambda-like
// environment parsed at import, i.e. init + the first invocation's parsing) next to an S3 client,
// against the S3 client alone and against Gantry's lib/config.ts as it is. Same esbuild options and
// method as bench/function-bundles.mjs: fresh processes, alternated, medians; only ratios count.
//
//   node bench/zod-mini.mjs [--runs 15]
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { parseYaml as parse } from '../lib/yaml.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'bench/.out/zod-mini');
const NODE = join(ROOT, 'node_modules/.bin/node');
const args = process.argv.slice(2);
const RUNS = Number(args[args.indexOf('--runs') + 1]) || 15;
const require = createRequire(import.meta.url);
const { zodEnglishOnly, undiciSideEffectFree } = require('../deploy/serverless/esbuild-plugins.cjs');
const custom = parse(readFileSync(join(ROOT, 'serverless.yml'), 'utf8')).custom.esbuild;

const DEV = JSON.parse(readFileSync(join(ROOT, 'deploy/serverless/config/dev.json'), 'utf8'));
const { dataTriggers: _dataTriggers, ...WITHOUT_TRIGGERS } = DEV;
const ENV = JSON.stringify({ GANTRY_BUCKET: 'gantry-bucket', GANTRY_STATE_MACHINE_ARN: 'arn:aws:states:x' });
const S3 =
  "import { S3Client } from '@aws-sdk/client-s3';\nconst s3 = new S3Client({ region: 'us-east-1' });\n";
const use = (module, call) =>
  `${S3}import { ${call} } from '${module}';\n` +
  `const parsed = [${
    call === 'parseConfig'
      ? `parseConfig(${JSON.stringify(DEV)})`
      : `parseConfig(${JSON.stringify(WITHOUT_TRIGGERS)}), parseEnv(${ENV})`
  }];\n` +
  'export const handler = async () => [s3, parsed].length;\n';
const ENTRIES = {
  's3 only': `${S3}export const handler = async () => [s3].length;\n`,
  's3 + schemas in zod (classic)': use(join(ROOT, 'bench/zod-mini/config-zod.ts'), 'parseConfig, parseEnv'),
  's3 + same schemas in zod/mini': use(
    join(ROOT, 'bench/zod-mini/config-zod-mini.ts'),
    'parseConfig, parseEnv',
  ),
  "s3 + Gantry's lib/config.ts (parseConfig)": use(join(ROOT, 'lib/config.ts'), 'parseConfig'),
};

rmSync(OUT, { recursive: true, force: true });
mkdirSync(OUT, { recursive: true });
const bundles = [];
for (const [label, source] of Object.entries(ENTRIES)) {
  const id = `b${bundles.length}`;
  const entry = join(OUT, `${id}.entry.ts`);
  writeFileSync(entry, source);
  const outfile = join(OUT, `${id}.mjs`);
  await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'node',
    target: custom.target,
    mainFields: custom.mainFields,
    banner: custom.banner,
    plugins: [zodEnglishOnly, undiciSideEffectFree],
    logLevel: 'error',
  });
  bundles.push({ label, outfile, size: statSync(outfile).size, samples: [] });
}

function runOnce(file) {
  const code = `const t=performance.now();await import(${JSON.stringify(file)});
process.stdout.write(JSON.stringify({ms:performance.now()-t,rss:process.resourceUsage().maxRSS}))`;
  const t0 = process.hrtime.bigint();
  const r = spawnSync(NODE, ['--input-type=module', '-e', code], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH },
  });
  const wall = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${file} failed: ${r.stderr.slice(-2000)}`);
  const { ms, rss } = JSON.parse(r.stdout);
  return { wall, ms, rss: rss / 1024 };
}
const median = (xs) => {
  const s = [...xs].sort((p, q) => p - q);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const loadBefore = loadavg()[0];
for (const b of bundles) runOnce(b.outfile);
for (let i = 0; i < RUNS; i++) for (const b of bundles) b.samples.push(runOnce(b.outfile));
for (const b of bundles) for (const k of ['wall', 'ms', 'rss']) b[k] = median(b.samples.map((s) => s[k]));
const [base] = bundles;
console.log(
  `${RUNS} rounds, medians; ${cpus().length} CPUs, load average ${loadBefore.toFixed(1)} before / ${loadavg()[0].toFixed(1)} after.\n`,
);
console.log(
  '| bundle | size | wall | import + parse | peak RSS | × s3 only (wall) | × s3 only (import) | × s3 only (RSS) |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const b of bundles) {
  console.log(
    `| ${b.label} | ${(b.size / 1024).toFixed(0)} KB | ${b.wall.toFixed(0)} ms | ${b.ms.toFixed(1)} ms | ${b.rss.toFixed(0)} MiB | ` +
      `${(b.wall / base.wall).toFixed(2)} | ${(b.ms / base.ms).toFixed(2)} | ${(b.rss / base.rss).toFixed(2)} |`,
  );
}
