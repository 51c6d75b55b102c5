import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// One project per test tier (see README). `npm test` runs them all; tiers whose tools are missing
// skip with a loud line, or fail when GANTRY_REQUIRE_ALL_TIERS=1 (as .ci/run sets it).
export default defineConfig({
  test: {
    reporters: ['default'],
    // At least two files at a time: vitest's default is one worker less than the CPUs, which is one
    // on the 2-core CI machine (a bigger machine keeps that default), and most files wait on their
    // servers more than they compute (an e2e file used ~45 % of one core, by /usr/bin/time). Tiers
    // that share one apiserver or one deployment (contract, deploy, e2e-real) still run their files
    // one at a time.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // A closing summary of the tiers that were skipped, and why (test/helpers/tier-summary.ts).
    globalSetup: ['test/helpers/tier-summary.ts'],
    projects: [
      {
        test: {
          name: 'unit',
          setupFiles: ['test/helpers/test-logs.ts'],
          include: ['test/unit/**/*.test.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'contract',
          setupFiles: ['test/helpers/test-logs.ts'],
          include: ['test/contract/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'integration',
          setupFiles: ['test/helpers/test-logs.ts'],
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          // serverless package (osls) offline + cfn-lint on the template; deploy/k8s on a real apiserver.
          name: 'deploy',
          setupFiles: ['test/helpers/test-logs.ts'],
          include: ['test/deploy/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // Each file starts its own stack on ephemeral ports and its own state folder, so two run at once.
          name: 'e2e',
          setupFiles: ['test/helpers/test-logs.ts'],
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          // Real controllers (KCM, scheduler, kwok, JobSet, Trainer, Kueue) built from the Go module proxy
          // by scripts/realcp-heavy-build.sh; one fake GPU cluster per Trainer/Kueue version set.
          name: 'e2e-real',
          setupFiles: ['test/helpers/test-logs.ts'],
          include: ['test/e2e-real/**/*.test.ts'],
          testTimeout: 240_000,
          hookTimeout: 400_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
