import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { S3Client } from '@aws-sdk/client-s3';
import { ApiServer } from './apiserver.ts';
import { createClock, type SimClock } from './clock.ts';
import { type ControllerStats, Controllers, type Disruption, type QueueConfig } from './controller.ts';
import { type Gang, loadCrds } from './crds.ts';
import { type Fault, HttpFront, type RequestStats } from './http.ts';
import {
  type FlavorConfig,
  KUEUE_DEFAULT_INTEGRATIONS,
  type KueueVersion,
  type WaitForPodsReady,
} from './kueue.ts';
import { type AdminEvictionReason, isAdminEvictionReason } from './kueue-eviction.ts';
import type { PodScenario } from './pods.ts';
import { Registry } from './registry.ts';
import type { TrainerVersion } from './stubs.ts';
import { kueueWebhook, trainerWebhooks } from './webhooks.ts';

/**
 * A Kubernetes API server for the resources Gantry uses, with simulated Kueue, coscheduling,
 * Kubeflow Trainer and Training Operator behaviour, for the embedded default (`npm run dev`),
 * integration tests and benchmarks. The production ClusterGateway talks to it through
 * @kubernetes/client-node and `kubeconfigYaml()`, unchanged.
 *
 *   const sim = await startClusterSimulator({ trainerVersion: '2.2', speed: 3600,
 *     queues: [{ name: 'team-a', clusterQueue: 'gpu', quota: { 'nvidia.com/gpu': 8 } }], s3 });
 *   … new KubeConfig().loadFromString(sim.kubeconfigYaml()) …
 *   await sim.close();
 */

export { createClock, type SimClock } from './clock.ts';
export type { Disruption, QueueConfig } from './controller.ts';
export { SIM_ANNOTATIONS } from './controller.ts';
export type { Gang } from './crds.ts';
export type { Fault, RequestStats } from './http.ts';
export { KUEUE_DEFAULT_INTEGRATIONS } from './kueue.ts';
export { finalAccuracy, OPTIMUM, parseHyperparameters } from './objective.ts';
export type { PodScenario } from './pods.ts';
export type { TrainerVersion } from './stubs.ts';

export interface SimulatorOptions {
  /** Which TrainJob shape to serve; 'none' serves no Trainer v2 API. Default '2.2'. */
  trainerVersion?: TrainerVersion | 'none';
  /** Simulated seconds per real second (3600: an hour a second); 0 stops the clock (use advance()). Default 1. */
  speed?: number;
  queues?: QueueConfig[];
  /** Where finished jobs write their output (GANTRY_OUTPUT_URI); without it nothing is written. */
  s3?: S3Client;
  /** Gang admission: Kueue (default), coscheduling PodGroups, or none. */
  gang?: Gang;
  /** The shared CRD folder; default `$GANTRY_CRD_ROOT`, else `<repo>/../shared/k8s/crds` when present; null forces the built-in stubs. */
  crdRoot?: string | null;
  /** Faults armed at start (see inject()). */
  faults?: Fault[];
  /** Serve the Training Operator v1 kinds (default true). */
  legacy?: boolean;
  /**
   * Extra APIs to serve besides the chosen gang scheduler's: e.g. `{ coscheduling: true }` in Kueue
   * mode serves PodGroups too (nothing admits them then). Volcano and JobSet CRDs are served only
   * from the shared CRD folder.
   */
  install?: {
    kueue?: boolean;
    coscheduling?: boolean;
    volcano?: boolean;
    jobset?: boolean;
    kserve?: boolean;
  };
  /** Run the simulated controllers (default true); false leaves a bare apiserver, like envtest. */
  controllers?: boolean;
  /** Simulate Kueue's and Trainer's admission webhooks (default true). */
  webhooks?: boolean;
  /** WorkloadPriorityClass name → value (created at start). */
  priorityClasses?: Record<string, number>;
  /** Cluster capacity for coscheduling (default: the sum of the queues' quotas). */
  capacity?: Record<string, number | string>;
  /** Simulated seconds a job trains once its gang runs (default 60; annotation sim.gantry.dev/duration-seconds overrides). */
  defaultDurationSeconds?: number;
  /**
   * Varies the default duration of each job by up to ± this fraction (0.1: 54–66 s of a 60 s default),
   * fixed per job by its name, as trainings of one configuration differ in start-up, data loading and
   * nodes. Default 0: every job trains exactly the default (jobs started together end together).
   */
  durationSpread?: number;
  /**
   * How a job's pods fail to start, decided when the job is created, for jobs without the
   * `sim.gantry.dev/pod-failure` annotation (which wins): tests pick one job of many (e.g. one
   * sweep trial) without reaching into what Gantry builds. Default: none — pods start, as on a
   * healthy cluster.
   */
  podFailure?: (job: Record<string, unknown>) => PodScenario | undefined;
  /** Kueue's UnadmittedWorkloadsObservability feature gate (granular QuotaReserved reasons). Default false, as in Kueue v0.19. */
  kueueGranularReasons?: boolean;
  /**
   * Kueue's enabled `integrations.frameworks` (e.g. `kubeflow.org/pytorchjob`). Default: the default
   * configuration of the simulated Kueue line — v0.16 (Trainer 2.1) enables the Training Operator v1
   * integrations, v0.19 (Trainer 2.2/2.3, none) does not, so a queued PyTorchJob gets no Workload.
   */
  kueueIntegrations?: readonly string[];
  /**
   * Trainer's alpha `TrainJobStatus` feature gate (v2.2+): report status.trainerStatus. Default
   * false, as a default install (Trainer's pkg/features/features.go).
   */
  trainerStatus?: boolean;
  /**
   * The simulated training code reports progress and metrics through Gantry's metric channel: JSON
   * Lines objects under its GANTRY_METRICS_URI, written with `s3` (every job kind). Default true.
   */
  metricChannel?: boolean;
  /**
   * The simulated training code follows the checkpoint contract: it saves its progress under its
   * GANTRY_CHECKPOINT_URI (`latest.json`, each progress report) and a later attempt of the run
   * resumes from it, training only the rest. Default true.
   */
  checkpoints?: boolean;
  /**
   * Kueue release line: default the one that targets the Trainer version (0.16 for 2.1, 0.19 for
   * 2.2/2.3). Kueue 0.19 with Trainer 2.1 admits a TrainJob but never unsuspends it (kueue#11931).
   */
  kueueVersion?: KueueVersion;
  /**
   * Kueue's waitForPodsReady (PodsReady condition, timeout, requeuing backoff, deactivation); `false`
   * turns it off. Default as the release defaults it: on with a 30-minute timeout from Kueue 0.19
   * (v1beta2 `SetDefaults_Configuration`), off in 0.16 (v1beta1 `Enable: false`).
   */
  waitForPodsReady?: WaitForPodsReady | false;
  /** Node labels and tolerations of the ResourceFlavor `default-flavor`, injected into admitted pods. Default none. */
  flavor?: FlavorConfig;
  /** Namespaces to create at start besides default/kube-system/kube-public/kube-node-lease. */
  namespaces?: string[];
  /** Real milliseconds between controller ticks (default 20). */
  tickMs?: number;
  /** Start of simulated time (default now). */
  startTime?: Date;
  /**
   * What the timestamps objects carry: the wall clock (default, as a real apiserver; only training
   * and the controllers' timers are accelerated) or simulated time (tests that read simulated
   * durations off condition times).
   */
  timestamps?: 'wall' | 'simulated';
  /** A clock of your own (overrides speed, startTime and timestamps); see clock.ts. */
  clock?: SimClock;
  port?: number;
  host?: string;
  log?: (msg: string) => void;
}

export interface SimulatorStats {
  requests: RequestStats;
  jobs: ControllerStats;
  /** This process: resident set now and at peak (MiB), CPU seconds used, uptime. */
  process: {
    rssMiB: number;
    maxRssMiB: number;
    cpuUserSeconds: number;
    cpuSystemSeconds: number;
    uptimeSeconds: number;
  };
  /** Objects stored, per resource. */
  objects: Record<string, number>;
  pendingFaults: number;
}

export interface ClusterSimulator {
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  /** Where each API's CRDs came from (a folder of the shared CRDs, or `stub`). */
  crdSources: Record<string, string>;
  /** A kubeconfig for this server (token auth; the simulator accepts any token). */
  kubeconfigYaml(opts?: { namespace?: string; context?: string }): string;
  close(): Promise<void>;
  stats(): SimulatorStats;
  /** Fail the next `times` requests whose path matches with `status` (429/500/503/504). */
  inject(fault: Fault): void;
  clearFaults(): void;
  /**
   * Evict a job's gang (Kueue: Workload Evicted/Preempted, job suspended, requeued). `reason`: Kueue's
   * eviction reason instead of Preempted — PodsReadyTimeout, AdmissionCheck, ClusterQueueStopped,
   * LocalQueueStopped, NodeFailures (kueue-eviction.ts ADMIN_EVICTION_MESSAGES).
   */
  preempt(namespace: string, name: string, plural?: string, reason?: AdminEvictionReason): Promise<boolean>;
  /** Deactivate a job's Workload as a person would (`spec.active=false`; Kueue evicts it `Deactivated`). */
  deactivate(namespace: string, name: string, plural?: string): Promise<boolean>;
  /**
   * Fail a running TrainJob by a disruption of its pods, as a real cluster would (controller.ts
   * `disruptJob`): `node-lost` (taint manager), `preempted` (scheduler preemption, no requeue) or
   * `evicted` (drain / spot interruption). False when the job is not running.
   */
  disrupt(namespace: string, name: string, cause: Disruption, plural?: string): Promise<boolean>;
  /** Move simulated time forward and process what became due. */
  advance(seconds: number): Promise<void>;
  /** Process what is due now and wait for in-flight output uploads. */
  settle(): Promise<void>;
  now(): Date;
  /** The storage and request semantics (for tests that need to look behind the API). */
  api: ApiServer;
  clock: SimClock;
}

function defaultCrdRoot(): string | undefined {
  if (process.env.GANTRY_CRD_ROOT) return process.env.GANTRY_CRD_ROOT;
  const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const shared = process.env.GANTRY_SHARED_DIR ?? resolve(repo, '../shared');
  const dir = resolve(shared, 'k8s/crds');
  return existsSync(dir) ? dir : undefined;
}

export async function startClusterSimulator(opts: SimulatorOptions = {}): Promise<ClusterSimulator> {
  const trainerVersion = opts.trainerVersion ?? '2.2';
  const gang = opts.gang ?? 'kueue';
  const kueueVersion: KueueVersion = opts.kueueVersion ?? (trainerVersion === '2.1' ? '0.16' : '0.19');
  const kueueIntegrations = opts.kueueIntegrations ?? KUEUE_DEFAULT_INTEGRATIONS[kueueVersion];
  const log = opts.log ?? ((m: string) => console.error(m));
  const clock =
    opts.clock ??
    createClock(opts.speed ?? 1, opts.startTime?.getTime(), undefined, opts.timestamps ?? 'wall');
  const registry = new Registry();
  const api = new ApiServer(registry, clock);

  const crdRoot = opts.crdRoot === null ? undefined : (opts.crdRoot ?? defaultCrdRoot());
  const loaded = await loadCrds({
    trainerVersion,
    crdRoot,
    install: {
      kueue: opts.install?.kueue ?? gang === 'kueue',
      coscheduling: opts.install?.coscheduling ?? gang === 'coscheduling',
      volcano: opts.install?.volcano ?? false,
      jobset: opts.install?.jobset ?? false,
      legacy: opts.legacy ?? true,
      // KServe's InferenceService, with simulated readiness (inference-services.ts).
      kserve: opts.install?.kserve ?? true,
    },
  });

  seedCluster(api, registry, loaded.crds, opts.namespaces ?? []);

  const controllers = makeControllers(api, clock, opts, {
    trainerVersion,
    gang,
    kueueVersion,
    kueueIntegrations,
    log,
  });
  const ctr = registry.get('trainer.kubeflow.org', 'clustertrainingruntimes');
  if (ctr) {
    for (const rt of loaded.runtimes) {
      try {
        api.seed(ctr, rt);
      } catch (e) {
        log(
          `simulator: skipping runtime ${String((rt.metadata as { name?: string })?.name)}: ${e instanceof Error ? e.message : String(e)}`,
        );
      }
    }
  }
  const runControllers = opts.controllers ?? true;
  if (runControllers) controllers.seed();
  else controllers.detach();
  if (opts.webhooks ?? true) {
    if (gang === 'kueue') api.addAdmission(kueueWebhook(trainerVersion, kueueVersion, kueueIntegrations));
    if (trainerVersion !== 'none') api.addAdmission(trainerWebhooks(api, clock, trainerVersion));
  }

  let address = '127.0.0.1:0';
  const front = new HttpFront({
    api,
    version: simulatorVersion(),
    address: () => address,
    admin: async (method, path, body) => adminCall(method, path, body),
    podLog: (pod, container, last) => controllers.podLog(pod, container, last),
  });
  for (const f of opts.faults ?? []) front.inject(f);

  const b = (body: unknown) => (body && typeof body === 'object' ? (body as Record<string, unknown>) : {});
  async function adminCall(method: string, path: string, body: unknown): Promise<unknown> {
    if (method === 'GET' && path === '/stats') return stats();
    if (method === 'GET' && path === '/time')
      return { now: new Date(clock.now()).toISOString(), speed: clock.speed };
    if (method === 'POST' && path === '/faults') {
      const f = b(body);
      const p = typeof f.regex === 'string' ? new RegExp(f.regex) : String(f.path ?? '');
      const fault: Fault = { path: p, status: Number(f.status ?? 503), times: Number(f.times ?? 1) };
      if (typeof f.method === 'string') fault.method = f.method;
      if (typeof f.retryAfterSeconds === 'number') fault.retryAfterSeconds = f.retryAfterSeconds;
      front.inject(fault);
      return { pending: front.pendingFaults() };
    }
    if (method === 'DELETE' && path === '/faults') {
      front.clearFaults();
      return { pending: 0 };
    }
    if (method === 'POST' && path === '/preempt') {
      const x = b(body);
      const reason = typeof x.reason === 'string' ? x.reason : 'Preempted';
      if (!isAdminEvictionReason(reason)) return { preempted: false };
      return {
        preempted: await preempt(
          String(x.namespace ?? 'default'),
          String(x.name ?? ''),
          typeof x.plural === 'string' ? x.plural : undefined,
          reason,
        ),
      };
    }
    if (method === 'POST' && path === '/disrupt') {
      const x = b(body);
      const cause = String(x.cause ?? 'node-lost');
      if (cause !== 'node-lost' && cause !== 'preempted' && cause !== 'evicted') return { disrupted: false };
      return {
        disrupted: await disrupt(
          String(x.namespace ?? 'default'),
          String(x.name ?? ''),
          cause,
          typeof x.plural === 'string' ? x.plural : undefined,
        ),
      };
    }
    if (method === 'POST' && path === '/deactivate') {
      const x = b(body);
      return {
        deactivated: await deactivate(
          String(x.namespace ?? 'default'),
          String(x.name ?? ''),
          typeof x.plural === 'string' ? x.plural : undefined,
        ),
      };
    }
    if (method === 'POST' && path === '/advance') {
      await advance(Number(b(body).seconds ?? 0));
      return { now: new Date(clock.now()).toISOString() };
    }
    return undefined;
  }

  function stats(): SimulatorStats {
    const objects: Record<string, number> = {};
    for (const d of registry.all()) {
      const n = api.peekAll(d).length;
      if (n > 0) objects[d.group ? `${d.plural}.${d.group}` : d.plural] = n;
    }
    const ru = process.resourceUsage();
    return {
      requests: structuredClone(front.stats),
      jobs: controllers.snapshot(),
      process: {
        rssMiB: Math.round((process.memoryUsage().rss / 2 ** 20) * 10) / 10,
        maxRssMiB: Math.round((ru.maxRSS / 1024) * 10) / 10,
        cpuUserSeconds: ru.userCPUTime / 1e6,
        cpuSystemSeconds: ru.systemCPUTime / 1e6,
        uptimeSeconds: process.uptime(),
      },
      objects,
      pendingFaults: front.pendingFaults(),
    };
  }

  async function settle(): Promise<void> {
    await new Promise((r) => setImmediate(r));
    controllers.tick();
    await controllers.drain();
    await new Promise((r) => setImmediate(r));
    controllers.tick();
  }

  async function advance(seconds: number): Promise<void> {
    await settle();
    clock.advance(seconds);
    await settle();
  }

  async function preempt(
    ns: string,
    name: string,
    plural?: string,
    reason?: AdminEvictionReason,
  ): Promise<boolean> {
    await settle();
    let done = false;
    controllers.enqueue(() => {
      done = controllers.preemptJob(ns, name, plural, reason);
    });
    controllers.tick();
    return done;
  }

  async function disrupt(ns: string, name: string, cause: Disruption, plural?: string): Promise<boolean> {
    await settle();
    let done = false;
    controllers.enqueue(() => {
      done = controllers.disruptJob(ns, name, cause, plural);
    });
    controllers.tick();
    await settle();
    return done;
  }

  async function deactivate(ns: string, name: string, plural?: string): Promise<boolean> {
    await settle();
    let done = false;
    controllers.enqueue(() => {
      done = controllers.deactivateJob(ns, name, plural);
    });
    controllers.tick();
    return done;
  }

  const server: Server = createServer({ keepAlive: true }, front.handle);
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((res, rej) => {
    server.once('error', rej);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => res());
  });
  const port = (server.address() as AddressInfo).port;
  const host = opts.host ?? '127.0.0.1';
  address = `${host}:${port}`;
  const url = `http://${host}:${port}`;
  if (runControllers) controllers.start(opts.tickMs ?? 20);

  let closed = false;
  return {
    url,
    port,
    crdSources: loaded.sources,
    kubeconfigYaml: (o = {}) => kubeconfigFor(url, o),
    async close() {
      if (closed) return;
      closed = true;
      await controllers.stop();
      front.endWatches();
      await new Promise<void>((res) => {
        server.close(() => res());
        server.closeAllConnections();
      });
    },
    stats,
    inject: (f) => front.inject(f),
    clearFaults: () => front.clearFaults(),
    preempt,
    deactivate,
    disrupt,
    advance,
    settle,
    now: () => new Date(clock.now()),
    api,
    clock,
  };
}

/** The namespaces a fresh cluster has (and those asked for), and the CRDs installed. */
function seedCluster(
  api: ApiServer,
  registry: Registry,
  crds: Awaited<ReturnType<typeof loadCrds>>['crds'],
  namespaces: readonly string[],
) {
  const nsDef = registry.get('', 'namespaces')!;
  for (const ns of ['default', 'kube-system', 'kube-public', 'kube-node-lease', ...namespaces]) {
    if (!api.peek(nsDef, undefined, ns))
      api.seed(nsDef, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  }
  const crdDef = registry.get('apiextensions.k8s.io', 'customresourcedefinitions')!;
  for (const crd of crds) api.seed(crdDef, crd);
}

/** The controllers the simulator plays (Trainer, Kueue or coscheduling, the kubelet), from the options. */
function makeControllers(
  api: ApiServer,
  clock: SimClock,
  opts: SimulatorOptions,
  at: {
    trainerVersion: TrainerVersion | 'none';
    gang: Gang;
    kueueVersion: KueueVersion;
    kueueIntegrations: readonly string[];
    log: (m: string) => void;
  },
): Controllers {
  const { trainerVersion, gang, kueueVersion, kueueIntegrations, log } = at;
  return new Controllers({
    api,
    clock,
    trainerVersion,
    gang,
    queues: opts.queues ?? [],
    priorityClasses: opts.priorityClasses ?? {},
    capacity: opts.capacity,
    s3: opts.s3,
    defaultDurationSeconds: opts.defaultDurationSeconds ?? 60,
    durationSpread: opts.durationSpread ?? 0,
    podFailure: opts.podFailure,
    kueueGranularReasons: opts.kueueGranularReasons ?? false,
    trainerStatus: (opts.trainerStatus ?? false) && (trainerVersion === '2.2' || trainerVersion === '2.3'),
    metricChannel: opts.metricChannel ?? true,
    checkpoints: opts.checkpoints ?? true,
    kueueVersion,
    waitForPodsReady:
      opts.waitForPodsReady === false
        ? undefined
        : (opts.waitForPodsReady ?? (kueueVersion === '0.16' ? undefined : { timeoutSeconds: 1800 })),
    flavor: opts.flavor ?? {},
    kueueIntegrations,
    log,
  });
}

/** What `/version` answers: a Kubernetes 1.35 API server. */
function simulatorVersion() {
  return {
    major: '1',
    minor: '35',
    emulationMajor: '1',
    emulationMinor: '35',
    minCompatibilityMajor: '1',
    minCompatibilityMinor: '34',
    gitVersion: 'v1.35.4',
    gitCommit: 'gantry-cluster-simulator',
    gitTreeState: 'clean',
    buildDate: '1970-01-01T00:00:00Z',
    goVersion: 'none',
    compiler: 'gantry-simulator',
    platform: `${process.platform}/${process.arch}`,
  };
}

function kubeconfigFor(url: string, o: { namespace?: string; context?: string }): string {
  const ctx = o.context ?? 'gantry-sim';
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: ${ctx}`,
    '  cluster:',
    `    server: ${url}`,
    // Plain HTTP on 127.0.0.1: client-node only allows http:// with this flag set.
    '    insecure-skip-tls-verify: true',
    'users:',
    `- name: ${ctx}`,
    '  user:',
    '    token: gantry-simulator',
    'contexts:',
    `- name: ${ctx}`,
    '  context:',
    `    cluster: ${ctx}`,
    `    user: ${ctx}`,
    `    namespace: ${o.namespace ?? 'default'}`,
    `current-context: ${ctx}`,
    '',
  ].join('\n');
}
