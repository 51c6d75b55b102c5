#!/usr/bin/env node
// The `gantry` bin. The CLI is TypeScript run by Node's type stripping (Node >= 24, as every
// npm script here runs). Under an older `node` on PATH, it is re-run with the Node 24 that
// `npm ci` installs into this checkout's node_modules.
import { spawnSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(realpathSync(fileURLToPath(import.meta.url)));
if (process.features.typescript) {
  await import('./gantry.ts');
} else {
  const node = join(here, '..', 'node_modules', 'node', 'bin', 'node');
  if (!existsSync(node)) {
    console.error(
      `gantry needs Node.js >= 24 (this is ${process.version}); run npm ci in ${join(here, '..')}`,
    );
    process.exit(3);
  }
  const r = spawnSync(node, [join(here, 'gantry.ts'), ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
