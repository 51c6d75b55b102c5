import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The part of vitest's TestProject this setup reads: which projects (tiers) this invocation runs. */
interface Invocation {
  vitest: { projects: Array<{ name: string }> };
}

/**
 * Global setup of `npm test`: a file where every skipped tier writes one line (tiers.ts), read
 * back at the end into a closing summary — which tiers this invocation ran (`--project` may ask for
 * fewer than all), which of them skipped and why, and the e2e-real version sets — after the report.
 */
export default function setup(project: Invocation) {
  const tiers = project.vitest.projects.map((p) => p.name);
  const sets = tiers.includes('e2e-real')
    ? `; e2e-real version sets: ${process.env.GANTRY_VERSION_SETS ?? 'all'} (GANTRY_VERSION_SETS)`
    : '';
  const dir = mkdtempSync(join(tmpdir(), 'gantry-tiers-'));
  const file = join(dir, 'skipped.txt');
  process.env.GANTRY_TIER_REPORT = file;
  return () => {
    let lines: string[] = [];
    try {
      lines = [...new Set(readFileSync(file, 'utf8').split('\n').filter(Boolean))];
    } catch {
      // no tier was skipped
    }
    rmSync(dir, { recursive: true, force: true });
    const out =
      lines.length === 0
        ? `\nTiers run: ${tiers.join(', ')} (none skipped)${sets}.\n`
        : `\nTiers run: ${tiers.join(', ')}${sets}.\n` +
          `\u001b[33mTiers skipped (${lines.length}):\n${lines.map((l) => `  - ${l}`).join('\n')}\u001b[0m\n` +
          'Install what they name (docs/contributing/testing.md) or run `bash .ci/run`, which installs everything.\n';
    process.stdout.write(out);
  };
}
