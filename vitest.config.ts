import { defineConfig } from 'vitest/config';

// One project per test tier (see README). `npm test` runs them all; tiers whose tools are missing
// skip with a loud line, or fail when GANTRY_REQUIRE_ALL_TIERS=1 (as .ci/run sets it).
export default defineConfig({
  test: {
    reporters: ['default'],
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
          name: 'e2e',
          setupFiles: ['test/helpers/test-logs.ts'],
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          fileParallelism: false,
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
