import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_TEAM, type Stack } from '../../local/stack.ts';
import { REAL_STACK_START_MS, type RealStack, startRealStack, stopRealStack } from '../helpers/real-stack.ts';
import { type HeavyControlPlane, heavyMissing, KWOK_ENV, versionSet } from '../helpers/realcp-heavy.ts';
import type { runDriver } from '../helpers/runs.ts';
import { tierAvailable } from '../helpers/tiers.ts';

/**
 * What a default install of Trainer v2.3 + Kueue v0.19.2 does with Gantry's runs (issue 17), on the
 * real controllers:
 *
 * A dataset URI on the built-in `torch-distributed` runtime (no dataset-initializer job): Gantry
 * passes it as `DATASET_URI` env instead of `spec.initializer`, so Trainer's validating webhook
 * admits the TrainJob and the run ends Succeeded.
 *
 * Health after admission (item 3): Kueue admits a gang its quota can
 * hold (8 GPUs) but no node can (each has 4), Trainer unsuspends the TrainJob, JobSet and the Job
 * controller make the pod, and the real kube-scheduler leaves it `PodScheduled=False Unschedulable`.
 * Gantry lists its pods (they carry its labels through Trainer's runtime patch), shows the
 * scheduler's message while the run is Pending, fails the run `Unschedulable` after the grace and
 * deletes the job, which frees the quota. A pod that cannot pull its image (kwok's
 * gantry-pod-image-pull stage, steered by KWOK_IMAGE_PULL, leaves it Pending with its container
 * waiting in ImagePullBackOff and the kubelet's message) fails the run `ImagePullFailed` once the
 * start-error grace (here 5 s) has passed.
 * Trainer v2.3 + Kueue v0.19.2 + JobSet v0.12.0.
 */

const SPEED = 60;
const GRACE_SECONDS = 5;
const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1';

const set = versionSet('v2.3');
const label = `Trainer ${set.trainer} + Kueue ${set.kueue} + JobSet ${set.jobset}`;
const available = tierAvailable(
  `e2e-real default install (${label})`,
  heavyMissing(['kube', 'kwok', ...set.components]),
);

describe.runIf(available)(`real controllers, default install: ${label}`, () => {
  let hc: HeavyControlPlane;
  let stack: Stack;
  let driver: ReturnType<typeof runDriver>;
  let ns: string;
  let real: RealStack | undefined;
  const previousGrace = process.env.GANTRY_UNSCHEDULABLE_GRACE_SECONDS;

  beforeAll(async () => {
    // The handlers read it once, at first use: a short grace so the test need not wait 300 s.
    process.env.GANTRY_UNSCHEDULABLE_GRACE_SECONDS = String(GRACE_SECONDS);
    real = await startRealStack({
      controlPlane: { set: 'v2.3', nodes: 1, gpusPerNode: 4, gpuQuota: 8 },
      namespaces: ['demo'],
      // The image pull test's pull never recovers: the same short grace for retried start errors.
      stack: (nss) => ({
        speed: SPEED,
        containerStartGraceSeconds: GRACE_SECONDS,
        teams: [{ ...DEMO_TEAM, namespaces: nss }],
      }),
    });
    ({ hc, stack, driver } = real);
    ns = real.namespaces[0] as string;
  }, REAL_STACK_START_MS);

  /**
   * Every state of a run's pods, through the watch API in short rounds (the LIST's resourceVersion
   * first, so nothing between them is missed); `found()` is the first pod state `want` accepts.
   */
  function watchPods(runId: string, want: (p: Pod) => boolean) {
    const path = `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(`gantry.dev/run-id=${runId}`)}`;
    let hit: Pod | undefined;
    let stop = false;
    let listed: () => void = () => undefined;
    const ready = new Promise<void>((r) => {
      listed = r;
    });
    const loop = (async () => {
      const list = await hc.request<{ metadata: { resourceVersion: string }; items: Pod[] }>('GET', path);
      hit = list.body.items.find(want);
      let rv = list.body.metadata.resourceVersion;
      listed();
      while (!stop && !hit) {
        const w = await hc.request('GET', `${path}&watch=1&timeoutSeconds=2&resourceVersion=${rv}`);
        for (const line of w.text.split('\n').filter(Boolean)) {
          const ev = JSON.parse(line) as { type: string; object: Pod };
          if (ev.type === 'ERROR') throw new Error(`pod watch failed: ${line}`);
          rv = ev.object.metadata.resourceVersion ?? rv;
          if (!hit && want(ev.object)) hit = ev.object;
        }
      }
    })().finally(() => listed());
    return {
      ready,
      found: () => hit,
      stop: async () => {
        stop = true;
        await loop;
      },
    };
  }

  afterAll(async () => {
    await stopRealStack(real);
    if (previousGrace === undefined) delete process.env.GANTRY_UNSCHEDULABLE_GRACE_SECONDS;
    else process.env.GANTRY_UNSCHEDULABLE_GRACE_SECONDS = previousGrace;
  });

  it('a datasetUri on torch-distributed reaches the trainer as DATASET_URI: Trainer’s webhook admits it, the run succeeds', async () => {
    // Prepare
    const dataUri = 's3://datasets/vision/2026-12-01/';
    const run = driver.spec(
      {
        queue: 'demo-queue',
        resourcesPerNode: { gpu: 2 },
        datasetUri: dataUri,
        env: { [KWOK_ENV.runDuration]: '10s' },
      },
      ns,
    );
    // Act
    const arn = await driver.start(run);
    const created = await driver.waitFor(
      'the TrainJob',
      async () => {
        const r = await hc.request<{ spec?: Record<string, unknown> }>(
          'GET',
          `${TRAINJOBS}/namespaces/${ns}/trainjobs/${run.jobName}`,
        );
        return r.status === 200 ? r.body : undefined;
      },
      60_000,
    );
    await driver.writeOutput(stack.s3, run);
    const ended = await driver.finished(arn, 120_000);
    // Assess
    const trainer = created.spec?.trainer as { env?: Array<{ name: string; value: string }> };
    expect(created.spec?.initializer).toBeUndefined();
    expect(trainer.env).toEqual(expect.arrayContaining([{ name: 'DATASET_URI', value: dataUri }]));
    expect(ended.status).toBe('SUCCEEDED');
    expect((await driver.record(run.runId)).phase).toBe('Succeeded');
  });

  it('shows the scheduler’s message while Pending, then fails Unschedulable and deletes the job', async () => {
    // Prepare: one node of 6 GPUs against nodes of 4 and a quota of 8.
    const run = driver.spec({ queue: 'demo-queue', numNodes: 1, resourcesPerNode: { gpu: 6 } }, ns);
    // Act
    const arn = await driver.start(run);
    const shown = await driver.waitFor(
      'the scheduler’s reason in the admission note',
      async () => {
        const r = await driver.record(run.runId);
        return r.admission?.reason === 'Unschedulable' ? r : undefined;
      },
      60_000,
    );
    const ended = await driver.finished(arn, 120_000);
    // Assess
    expect(shown.phase).toBe('Pending');
    expect(shown.admission?.message).toMatch(/0\/1 nodes are available: .*Insufficient nvidia\.com\/gpu/);
    expect(ended.status).toBe('FAILED');
    const record = await driver.record(run.runId);
    expect(record).toMatchObject({ phase: 'Failed', reason: 'Unschedulable' });
    const gone = await driver.waitFor(
      'the job to be deleted',
      async () => {
        const r = await hc.request('GET', `${TRAINJOBS}/namespaces/${ns}/trainjobs/${run.jobName}`);
        return r.status === 404 ? true : undefined;
      },
      60_000,
    );
    expect(gone).toBe(true);
  });

  it('a pod that cannot pull its image: after the grace the run fails ImagePullFailed with the kubelet’s message and the job is deleted', async () => {
    // Prepare: kwok keeps the pod Pending with its container waiting in ImagePullBackOff.
    const run = driver.spec(
      {
        queue: 'demo-queue',
        numNodes: 1,
        resourcesPerNode: { gpu: 2 },
        env: { [KWOK_ENV.imagePull]: 'ImagePullBackOff' },
      },
      ns,
    );
    // Act: watch the run's pods from before the start — Gantry fails the run and deletes the job
    // as soon as it sees the pod in ImagePullBackOff, so a poll can miss that state on a busy machine.
    const watch = watchPods(run.runId, (p) => containerWaiting(p) === 'ImagePullBackOff');
    await watch.ready;
    const arn = await driver.start(run);
    const pod = await driver.waitFor(
      'the pod waiting in ImagePullBackOff',
      async () => watch.found(),
      60_000,
    );
    await watch.stop();
    const ended = await driver.finished(arn, 120_000);
    // Assess: the pod is as the kubelet leaves it, and the run fails as on the simulator.
    expect(pod.status).toMatchObject({
      phase: 'Pending',
      containerStatuses: [
        {
          ready: false,
          state: {
            waiting: {
              reason: 'ImagePullBackOff',
              message: expect.stringMatching(/^Back-off pulling image "/),
            },
          },
        },
      ],
    });
    expect(ended.status).toBe('FAILED');
    const record = await driver.record(run.runId);
    expect(record).toMatchObject({ phase: 'Failed', reason: 'ImagePullFailed' });
    expect(record.message).toMatch(
      new RegExp(`^pod ${pod.metadata.name}: ImagePullBackOff: Back-off pulling image ".+": ErrImagePull: `),
    );
    expect(record.transitions.map((t) => t.phase)).not.toContain('Running');
    const gone = await driver.waitFor(
      'the job to be deleted',
      async () => {
        const r = await hc.request('GET', `${TRAINJOBS}/namespaces/${ns}/trainjobs/${run.jobName}`);
        return r.status === 404 ? true : undefined;
      },
      60_000,
    );
    expect(gone).toBe(true);
  });
});

type Json = Record<string, unknown>;
type Pod = { metadata: { name: string; resourceVersion?: string }; status?: Json };

function containerWaiting(p: Pod): string | undefined {
  return (
    p.status?.containerStatuses as Array<{ state?: { waiting?: { reason?: string } } }> | undefined
  )?.[0]?.state?.waiting?.reason;
}
