import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './tiers.ts';

/**
 * KServe's InferenceService CRD, fetched from KServe's Go module by scripts/kserve-crds.sh into the
 * cache outside the repo (keyed by tools/kserve/version): the folder, when the file is there.
 */
export const KSERVE_CRD_FILE = 'serving.kserve.io_inferenceservices.yaml';

export function kserveCrdDir(): string | undefined {
  const dir = execFileSync('bash', [join(ROOT, 'scripts/kserve-crds.sh'), '--print-dir'], {
    encoding: 'utf8',
  }).trim();
  return existsSync(join(dir, KSERVE_CRD_FILE)) ? dir : undefined;
}
