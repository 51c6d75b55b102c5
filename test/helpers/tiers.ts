import { appendFileSync, existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root and the shared folder beside it (CRDs, references). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const SHARED = process.env.GANTRY_SHARED_DIR ?? resolve(ROOT, '../shared');
export const CRD_ROOT = resolve(SHARED, 'k8s/crds');

const requireAll = process.env.GANTRY_REQUIRE_ALL_TIERS === '1';

/**
 * Decide whether a tier can run. When something it needs is missing, print one loud line naming
 * it and return false (the caller then skips), or throw when GANTRY_REQUIRE_ALL_TIERS=1 so CI can
 * never pass on a silent skip.
 */
export function tierAvailable(tier: string, missing: string[]): boolean {
  if (missing.length === 0) return true;
  const line = `TIER SKIPPED: ${tier} — missing ${missing.join(', ')}`;
  if (requireAll) throw new Error(`${line} (GANTRY_REQUIRE_ALL_TIERS=1 forbids skipping)`);
  // For the closing summary of `npm test` (tier-summary.ts).
  const report = process.env.GANTRY_TIER_REPORT;
  if (report) appendFileSync(report, `${tier}: missing ${missing.join(', ')}\n`);
  console.warn(`\n\u001b[33m${'!'.repeat(8)} ${line}\u001b[0m\n`);
  return false;
}

/** The CRD folder for one release, e.g. `crdDir('trainer-v2.2.1')`, or undefined when absent. */
export function crdDir(name: string): string | undefined {
  const dir = resolve(CRD_ROOT, name);
  return existsSync(dir) ? dir : undefined;
}
