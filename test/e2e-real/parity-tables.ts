import { StopExecutionCommand } from '@aws-sdk/client-sfn';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RunRecord } from '../../lib/run/record.ts';
import type { RunRequestInput } from '../../lib/run/schema.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import { type Embedded, startEmbedded } from '../../local/embedded.ts';
import type { Json } from '../../local/simulator/apiserver.ts';
import type { SimulatorOptions } from '../../local/simulator/index.ts';
import { POD_FAILURE_ANNOTATION } from '../../local/simulator/pods.ts';
import { DEMO_TEAM, type Stack } from '../../local/stack.ts';
import { REAL_STACK_START_MS, type RealStack, startRealStack, stopRealStack } from '../helpers/real-stack.ts';
import {
  GANG_RUNTIME,
  type HeavyControlPlane,
  type HeavyOptions,
  heavyMissing,
  KWOK_ENV,
  type VersionSetName,
} from '../helpers/realcp-heavy.ts';
import { runDriver } from '../helpers/runs.ts';
import { tierAvailable } from '../helpers/tiers.ts';

/**
 * The parity harness (test/e2e-real/parity.test.ts and parity-coscheduling.test.ts run its tables,
 * each file in a process of its own). Parity (issue 16 item 3): one table of scenarios, run through Gantry's state machine and
 * reconciler against the REAL controllers (heavy tier: Trainer, JobSet, Kueue, KCM, scheduler,
 * kwok) and then against the cluster SIMULATOR (the embedded default), comparing what a user sees
 * of each run:
 *
 *   - the sequence of run phases, each with its reason (`transitions`, e.g. `Pending/Preempted`);
 *   - the final `reason` of the record (e.g. `AdmissionTimeout`, `TrainingFailed`);
 *   - the final admission note's `state` and `reason` (e.g. `Queued`/`Pending`, `Evicted`/`Preempted`),
 *     except a note in state `Admitted`: that one is written only if a reconciler tick happens to
 *     land in the second or two between Kueue's admission and the pods running, so it is sampling,
 *     not behaviour (the real cluster showed it for some runs and not for others).
 *
 * Not compared: free-text messages (the real controllers' and the simulator's wording differ, and
 * they carry uids and quantities), timestamps, and metrics/progress values (the simulator plays the
 * training code itself; here the test plays it on the real side). A difference fails the test and
 * names the scenario.
 *
 * Steering is per backend and is not part of what is compared: a run's trainer env carries kwok's
 * knobs (KWOK_RUN_DURATION, KWOK_EXIT_CODE, KWOK_IMAGE_PULL); on the simulator a test-only
 * mutating hook turns them into the simulator's scenario annotations when the TrainJob is created (duration × SIM_SPEED, so
 * wall times match; an exit code → fail-at-percent 100, i.e. fail when the run time is over, as kwok;
 * an image-pull reason → the simulator's pod-failure annotation with that reason).
 * A scenario that did not finish on either backend counts as a difference.
 * Both backends get a `torch-distributed-failfast` runtime (the upstream one with backoffLimit 0).
 * The table runs on every installable version set (v2.1, v2.2, v2.3), each against the simulator
 * set up as that set (simulatorFor). A second table (GANG_SCENARIOS, `parity coscheduling`) runs
 * unqueued runs on the gang runtime against scheduler-plugins Coscheduling (v2.3 set, 2 nodes × 4
 * GPUs) and against the simulator's `gang: 'coscheduling'` with a capacity of the same 8 GPUs. v2.3: Kueue v0.19.2's v1beta2 configuration defaults
 * `waitForPodsReady` to enabled (apis/config/v1beta2/defaults.go; opt out only with the
 * DisableWaitForPodsReady gate), so the real Kueue writes `PodsReady` (WaitForStart/Started); the
 * simulator is told the same.
 */

/**
 * The simulator as each set: its Trainer line, its Kueue line (the simulator's 0.19 stands for
 * Kueue v0.17.1 too: both patch a TrainJob through `runtimePatches`), and `waitForPodsReady` as the
 * set's Kueue release defaults it in the v1beta2 configuration the heavy tier writes: v0.19.2
 * enables it (30 min), v0.16.6 and v0.17.1 leave it off (their apis/config/v1beta2/defaults.go only
 * fill in a section that is given).
 */
export function simulatorFor(name: VersionSetName): Partial<SimulatorOptions> {
  switch (name) {
    case 'v2.1':
      return { trainerVersion: '2.1', kueueVersion: '0.16', waitForPodsReady: false };
    case 'v2.2':
      return { trainerVersion: '2.2', kueueVersion: '0.19', waitForPodsReady: false };
    case 'v2.3':
      return { trainerVersion: '2.3', kueueVersion: '0.19', waitForPodsReady: {} };
  }
}
const SPEED = 60;
/**
 * Simulated seconds per real second on the simulator. 1: the simulator stamps objects
 * (`creationTimestamp`, condition times) with its simulated clock, so at a higher speed a job's
 * creationTimestamp runs ahead of the wall clock and the reconciler's orphan grace keeps a cancelled
 * run's job for as long as that lead (seen: > 60 s at speed 10; a real cluster: ~1 s). Parity
 * compares behaviour, not time compression.
 */
const SIM_SPEED = 1;
const TRAINJOBS = '/apis/trainer.kubeflow.org/v1alpha1';
export const PRIORITIES = { low: 100, high: 1000 };

type Backend = 'real' | 'simulator';

interface Observed {
  phases: string[];
  reason?: string;
  admission?: { state?: string; reason?: string | undefined };
}

interface Ctx {
  backend: Backend;
  driver: ReturnType<typeof runDriver>;
  ns: string;
  /** What the training code writes while the job runs (the simulator's code writes it itself). */
  playTraining(run: RunSpec): Promise<void>;
  jobGone(run: RunSpec): Promise<unknown>;
  /** The HTTP status of a GET on the cluster (real apiserver or simulator). */
  status(path: string): Promise<number>;
}

interface Scenario {
  name: string;
  /** Runs the scenario; returns the record whose outcome is compared. */
  run(ctx: Ctx): Promise<RunRecord>;
}

const TERMINAL = ['Succeeded', 'Failed', 'Cancelled'];

async function settled(ctx: Ctx, runId: string, timeoutMs = 150_000): Promise<RunRecord> {
  return ctx.driver.waitFor(
    `run ${runId} to end`,
    async () => {
      const r = await ctx.driver.record(runId);
      return TERMINAL.includes(r.phase) ? r : undefined;
    },
    timeoutMs,
  );
}

const phaseIs = (ctx: Ctx, runId: string, want: string, timeoutMs = 90_000) =>
  ctx.driver.waitFor(
    `run ${runId} phase ${want}`,
    async () => ((await ctx.driver.record(runId)).phase === want ? true : undefined),
    timeoutMs,
  );

const queued = (r: Partial<RunRequestInput>): Partial<RunRequestInput> => ({ queue: 'demo-queue', ...r });

export const SCENARIOS: Scenario[] = [
  {
    name: 'success',
    async run(ctx) {
      const run = ctx.driver.spec(
        queued({ resourcesPerNode: { gpu: 2 }, env: { [KWOK_ENV.runDuration]: '10s' } }),
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      await phaseIs(ctx, run.runId, 'Running');
      await ctx.playTraining(run);
      await ctx.driver.finished(arn, 150_000);
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
  {
    name: 'over quota: AdmissionTimeout',
    async run(ctx) {
      const run = ctx.driver.spec(
        queued({ resourcesPerNode: { gpu: 16 }, admissionDeadlineSeconds: 600 }),
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      await ctx.driver.finished(arn, 90_000);
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
  {
    name: 'pod failure: TrainingFailed',
    async run(ctx) {
      const run = ctx.driver.spec(
        queued({
          runtime: { name: 'torch-distributed-failfast' },
          resourcesPerNode: { gpu: 1 },
          env: { [KWOK_ENV.exitCode]: '137', [KWOK_ENV.runDuration]: '2s' },
        }),
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      await ctx.driver.finished(arn, 90_000);
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
  {
    name: 'image pull failure: ImagePullFailed',
    async run(ctx) {
      const run = ctx.driver.spec(
        queued({ resourcesPerNode: { gpu: 2 }, env: { [KWOK_ENV.imagePull]: 'ImagePullBackOff' } }),
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      await ctx.driver.finished(arn, 90_000);
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
  {
    name: 'cancel while running',
    async run(ctx) {
      const run = ctx.driver.spec(
        queued({ resourcesPerNode: { gpu: 2 }, env: { [KWOK_ENV.runDuration]: '10m' } }),
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      await phaseIs(ctx, run.runId, 'Running');
      await ctx.driver.sfn.send(
        new StopExecutionCommand({ executionArn: arn, error: 'Cancelled', cause: 'parity test' }),
      );
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
  {
    name: 'preemption: the low-priority run is evicted, readmitted and succeeds',
    async run(ctx) {
      const low = ctx.driver.spec(
        queued({
          priorityClass: 'low',
          resourcesPerNode: { gpu: 8 },
          producesArtifacts: false,
          env: { [KWOK_ENV.runDuration]: '20s' },
        }),
        ctx.ns,
      );
      const lowArn = await ctx.driver.start(low);
      await phaseIs(ctx, low.runId, 'Running');
      const high = ctx.driver.spec(
        queued({
          priorityClass: 'high',
          resourcesPerNode: { gpu: 8 },
          producesArtifacts: false,
          env: { [KWOK_ENV.runDuration]: '5s' },
        }),
        ctx.ns,
      );
      const highArn = await ctx.driver.start(high);
      await ctx.driver.finished(highArn, 150_000);
      await ctx.driver.finished(lowArn, 200_000);
      return settled(ctx, low.runId);
    },
  },
];

/** Unqueued runs on the gang runtime: the PodGroup alone gates them (Coscheduling). */
export const GANG_SCENARIOS: Scenario[] = [
  {
    name: 'gang fits: the PodGroup is admitted, the run succeeds',
    async run(ctx) {
      const run = ctx.driver.spec(
        {
          runtime: { name: GANG_RUNTIME },
          numNodes: 2,
          resourcesPerNode: { gpu: 4 },
          env: { [KWOK_ENV.runDuration]: '10s' },
        },
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      await phaseIs(ctx, run.runId, 'Running');
      await ctx.playTraining(run);
      await ctx.driver.finished(arn, 150_000);
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
  {
    name: 'gang cannot fit: AdmissionTimeout',
    async run(ctx) {
      const run = ctx.driver.spec(
        {
          runtime: { name: GANG_RUNTIME },
          numNodes: 3,
          resourcesPerNode: { gpu: 4 },
          admissionDeadlineSeconds: 600,
        },
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      await ctx.driver.finished(arn, 90_000);
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
];

/**
 * Queued runs on the gang runtime: Kueue admits or keeps the Workload queued, and Trainer's PodGroup
 * (built while the TrainJob is still suspended) places the admitted gang (Coscheduling).
 */
export const KUEUE_GANG_SCENARIOS: Scenario[] = [
  {
    name: 'queued gang fits: Kueue admits, the PodGroup places it, the run succeeds',
    async run(ctx) {
      const run = ctx.driver.spec(
        queued({
          runtime: { name: GANG_RUNTIME },
          numNodes: 2,
          resourcesPerNode: { gpu: 4 },
          env: { [KWOK_ENV.runDuration]: '10s' },
        }),
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      await phaseIs(ctx, run.runId, 'Running');
      await ctx.playTraining(run);
      await ctx.driver.finished(arn, 150_000);
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
  {
    name: 'queued gang over quota: Kueue keeps it queued beside its PodGroup, AdmissionTimeout',
    async run(ctx) {
      const run = ctx.driver.spec(
        queued({
          runtime: { name: GANG_RUNTIME },
          numNodes: 3,
          resourcesPerNode: { gpu: 4 },
          admissionDeadlineSeconds: 600,
        }),
        ctx.ns,
      );
      const arn = await ctx.driver.start(run);
      // Trainer builds the PodGroup of the suspended, queued TrainJob: both gates exist.
      await ctx.driver.waitFor(
        `PodGroup ${run.jobName} of the queued job`,
        async () =>
          (await ctx.status(
            `/apis/scheduling.x-k8s.io/v1alpha1/namespaces/${ctx.ns}/podgroups/${run.jobName}`,
          )) === 200
            ? true
            : undefined,
        30_000,
      );
      await ctx.driver.finished(arn, 90_000);
      await ctx.jobGone(run);
      return settled(ctx, run.runId);
    },
  },
];

function observe(r: RunRecord): Observed {
  return {
    phases: r.transitions.map((t) => (t.reason ? `${t.phase}/${t.reason}` : t.phase)),
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    ...(r.admission && r.admission.state !== 'Admitted'
      ? { admission: { state: r.admission.state, reason: r.admission.reason } }
      : {}),
  };
}

/** kwok's `<n>s` / `<n>m` duration as seconds. */
function seconds(go: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(go);
  if (!m) throw new Error(`unsupported duration ${go}`);
  const n = Number(m[1]);
  return m[2] === 'ms' ? n / 1000 : m[2] === 's' ? n : m[2] === 'm' ? n * 60 : n * 3600;
}

interface Table {
  /** Names the table in the test titles and the printed table. */
  name: string;
  label: string;
  components: string[];
  scenarios: Scenario[];
  real: HeavyOptions;
  simulator: Partial<SimulatorOptions>;
  /** The team's queues (none: its runs go unqueued). */
  queues: string[];
}

/** The image-pull scenario's pull never recovers: a short start-error grace (default 600 s) on both backends. */
const PULL_GRACE_SECONDS = 5;

/** One parity table: the scenarios on the real controllers, then on the simulator, then compared. */
export function parityTable(t: Table) {
  const SCENARIOS = t.scenarios;
  const name = t.name;
  const available = tierAvailable(`e2e-real parity ${name} (${t.label})`, heavyMissing(t.components));

  describe.runIf(available)(`parity ${name}: simulator vs real controllers (${t.label})`, () => {
    const observed: Record<Backend, Map<string, Observed>> = { real: new Map(), simulator: new Map() };

    describe('real controllers', () => {
      let hc: HeavyControlPlane;
      let stack: Stack;
      let ctx: Ctx;
      let real: RealStack | undefined;

      beforeAll(async () => {
        real = await startRealStack({
          controlPlane: t.real,
          namespaces: ['demo'],
          stack: (nss) => ({
            speed: SPEED,
            containerStartGraceSeconds: PULL_GRACE_SECONDS,
            // CreateJob re-checks the run against its team, which must own the namespace.
            teams: [{ ...DEMO_TEAM, namespaces: nss, queues: t.queues, priorityClasses: ['low', 'high'] }],
          }),
        });
        ({ hc, stack } = real);
        const { driver } = real;
        const ns = real.namespaces[0] as string;
        ctx = {
          backend: 'real',
          driver,
          ns,
          playTraining: (run) => driver.writeOutput(stack.s3, run),
          status: async (path) => (await hc.request('GET', path)).status,
          jobGone: (run) =>
            driver.waitFor(
              `TrainJob ${run.jobName} to be deleted`,
              async () => {
                const r = await hc.request('GET', `${TRAINJOBS}/namespaces/${ns}/trainjobs/${run.jobName}`);
                return r.status === 404 ? true : undefined;
              },
              60_000,
            ),
        };
      }, REAL_STACK_START_MS);

      afterAll(() => stopRealStack(real));

      for (const s of SCENARIOS) {
        it(`real: ${s.name}`, async () => {
          observed.real.set(s.name, observe(await s.run(ctx)));
        }, 300_000);
      }

      it('no controller crashed', () => {
        expect(hc.exited()).toEqual([]);
      });
    });

    describe('simulator', () => {
      let env: Embedded;
      let ctx: Ctx;

      beforeAll(async () => {
        vi.resetModules();
        env = await startEmbedded({
          simSpeed: SIM_SPEED,
          sfnSpeed: SPEED,
          simulator: t.simulator,
          stack: {
            reconcileEveryMs: 300,
            orphanGraceSeconds: 0,
            consumer: false,
            containerStartGraceSeconds: PULL_GRACE_SECONDS,
            // The preemption scenario names priority classes: the team must be given them.
            teams: [{ ...DEMO_TEAM, queues: t.queues, priorityClasses: ['low', 'high'] }],
          },
        });
        // The runtimes the heavy tier makes: torch-distributed with backoffLimit 0 (failfast) and
        // with podGroupPolicy.coscheduling (gang).
        const base = `${env.sim.url}${TRAINJOBS}/clustertrainingruntimes`;
        const upstream = (await (await fetch(`${base}/torch-distributed`)).json()) as {
          spec: Json & { template: { spec: { replicatedJobs: Array<{ template: { spec: Json } }> } } };
        };
        const failfast = structuredClone(upstream.spec);
        for (const rj of failfast.template.spec.replicatedJobs) rj.template.spec.backoffLimit = 0;
        const gang = {
          ...structuredClone(upstream.spec),
          podGroupPolicy: { coscheduling: { scheduleTimeoutSeconds: 60 } },
        };
        for (const [runtime, spec] of [
          ['torch-distributed-failfast', failfast],
          [GANG_RUNTIME, gang],
        ] as const) {
          const created = await fetch(base, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              apiVersion: 'trainer.kubeflow.org/v1alpha1',
              kind: 'ClusterTrainingRuntime',
              metadata: { name: runtime },
              spec,
            }),
          });
          expect(created.status).toBe(201);
        }
        // kwok's knobs → the simulator's scenario annotations, at TrainJob creation.
        env.sim.api.addAdmission({
          mutate(op, def, obj) {
            if (op !== 'CREATE' || def.kind !== 'TrainJob') return;
            const trainer = ((obj.spec as Json | undefined)?.trainer ?? {}) as {
              env?: Array<{ name: string; value?: string }>;
            };
            const knob = (name: string) => trainer.env?.find((e) => e.name === name)?.value;
            const meta = obj.metadata as { annotations?: Record<string, string> };
            const annotations = { ...(meta.annotations ?? {}) };
            const duration = knob(KWOK_ENV.runDuration);
            if (duration !== undefined)
              annotations['sim.gantry.dev/duration-seconds'] = String(seconds(duration) * SIM_SPEED);
            if (knob(KWOK_ENV.exitCode) !== undefined) annotations['sim.gantry.dev/fail-at-percent'] = '100';
            const imagePull = knob(KWOK_ENV.imagePull);
            if (imagePull !== undefined) annotations[POD_FAILURE_ANNOTATION] = imagePull;
            meta.annotations = annotations;
          },
        });
        const driver = runDriver(env.stack);
        ctx = {
          backend: 'simulator',
          driver,
          ns: 'demo',
          playTraining: async () => undefined,
          status: async (path) => (await fetch(`${env.sim.url}${path}`)).status,
          jobGone: (run) =>
            driver.waitFor(
              `TrainJob ${run.jobName} to be deleted`,
              async () => {
                const r = await fetch(`${env.sim.url}${TRAINJOBS}/namespaces/demo/trainjobs/${run.jobName}`);
                return r.status === 404 ? true : undefined;
              },
              60_000,
            ),
        };
      }, 120_000);

      afterAll(async () => {
        await env?.close();
      });

      for (const s of SCENARIOS) {
        it(`simulator: ${s.name}`, async () => {
          observed.simulator.set(s.name, observe(await s.run(ctx)));
        }, 300_000);
      }
    });

    describe('parity table', () => {
      it('every scenario: the same phases, final reason and admission note on both', () => {
        const table = SCENARIOS.map((s) => ({
          scenario: s.name,
          real: observed.real.get(s.name),
          simulator: observed.simulator.get(s.name),
        }));
        console.log(`[e2e-real parity ${name}]\n${JSON.stringify(table, null, 2)}`);
        const differences = table
          .filter(
            (row) =>
              row.real === undefined ||
              row.simulator === undefined ||
              JSON.stringify(row.real) !== JSON.stringify(row.simulator),
          )
          .map(
            (row) =>
              `${row.scenario}: real ${JSON.stringify(row.real)} ≠ simulator ${JSON.stringify(row.simulator)}`,
          );
        expect(differences).toEqual([]);
      });
    });
  });
}
