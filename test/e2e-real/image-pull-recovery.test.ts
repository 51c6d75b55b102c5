import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_TEAM } from '../../local/stack.ts';
import { REAL_STACK_START_MS, type RealStack, startRealStack, stopRealStack } from '../helpers/real-stack.ts';
import { heavyMissing, KWOK_ENV, versionSet } from '../helpers/realcp-heavy.ts';
import type { runDriver } from '../helpers/runs.ts';
import { tierAvailable } from '../helpers/tiers.ts';

/**
 * A pull that fails for a while and then succeeds, on the real controllers (Trainer v2.3 + Kueue
 * v0.19.2 + JobSet v0.12.0): kwok's gantry-pod-image-pull stage leaves the trainer pod waiting in
 * ImagePullBackOff with the kubelet's message, and gantry-pod-image-pulled (KWOK_IMAGE_PULL_RECOVER)
 * makes it Running after 20 s, as the kubelet's retry does once a registry is back. Gantry shows the
 * failing pull within its grace (docs/transient-faults.md), keeps waiting, and the run ends Succeeded.
 * Kueue's waitForPodsReady timeout (30 min) is far away.
 */

const SPEED = 60;
const set = versionSet('v2.3');
const label = `Trainer ${set.trainer} + Kueue ${set.kueue} + JobSet ${set.jobset}`;
const available = tierAvailable(
  `e2e-real image pull recovery (${label})`,
  heavyMissing(['kube', 'kwok', ...set.components]),
);

describe.runIf(available)(`real controllers, a pull that recovers: ${label}`, () => {
  let driver: ReturnType<typeof runDriver>;
  let ns: string;
  let real: RealStack | undefined;

  beforeAll(async () => {
    real = await startRealStack({
      controlPlane: { set: 'v2.3', nodes: 1, gpusPerNode: 4, gpuQuota: 8 },
      namespaces: ['demo'],
      // A grace well beyond the 20 s outage: the run must not fail while the pull is retried.
      stack: (nss) => ({
        speed: SPEED,
        containerStartGraceSeconds: 300,
        teams: [{ ...DEMO_TEAM, namespaces: nss }],
      }),
    });
    ({ driver } = real);
    ns = real.namespaces[0] as string;
  }, REAL_STACK_START_MS);

  afterAll(async () => {
    await stopRealStack(real);
  });

  it('shows the failing pull within the grace, then the pod runs and the run ends Succeeded', async () => {
    // Prepare: the pull fails with ImagePullBackOff for 20 s, then succeeds; the training takes 10 s.
    const run = driver.spec(
      {
        queue: 'demo-queue',
        numNodes: 1,
        resourcesPerNode: { gpu: 2 },
        producesArtifacts: false,
        env: {
          [KWOK_ENV.imagePull]: 'ImagePullBackOff',
          [KWOK_ENV.imagePullRecover]: '20s',
          [KWOK_ENV.runDuration]: '10s',
        },
      },
      ns,
    );

    // Act
    const arn = await driver.start(run);
    const shown = await driver.waitFor(
      'the failing pull in the admission note',
      async () => {
        const r = await driver.record(run.runId);
        return r.admission?.reason === 'ImagePullFailed' ? r : undefined;
      },
      60_000,
    );
    const ended = await driver.finished(arn, 180_000);

    // Assess
    expect(shown.phase).toBe('Pending');
    expect(shown.admission?.message).toMatch(
      // The kubelet's message as kwok's stage writes it: the back-off, then the pull's own error.
      /^image pull failing for \d+ s: pod .+: ImagePullBackOff: Back-off pulling image "[^"]+".*; Gantry gives up after 300 s$/,
    );
    expect(ended.status).toBe('SUCCEEDED');
    const record = await driver.record(run.runId);
    expect(record.phase).toBe('Succeeded');
    expect(record.transitions.map((t) => t.phase)).toEqual(
      expect.arrayContaining(['Pending', 'Running', 'Succeeded']),
    );
  });
});
