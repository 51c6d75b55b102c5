import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Global setup of `npm test`: a file where every skipped tier writes one line (tiers.ts), read
 * back at the end into a closing summary — which tiers did not run and why — after the report.
 */
export default function setup() {
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
        ? '\nTiers: every tier ran (none skipped).\n'
        : `\n\u001b[33mTiers skipped (${lines.length}):\n${lines.map((l) => `  - ${l}`).join('\n')}\u001b[0m\n` +
          'Install what they name (README "Tests") or run `bash .ci/run`, which installs everything.\n';
    process.stdout.write(out);
  };
}
