import middy from '@middy/core';
import { makeModelPublisher } from '../lib/artifacts/publish.ts';
import {
  countingCalls,
  NO_REQUESTS,
  type RequestCounts,
  runEndMetrics,
  tickMetrics,
} from '../lib/observability/metrics.ts';
import { shardShare, tokenBucket } from '../lib/orchestration/pacing.ts';
import { runPasses } from '../lib/orchestration/passes.ts';
import { makeReconciler } from '../lib/orchestration/reconcile.ts';
import { shardScope } from '../lib/orchestration/shards.ts';
import type { JobApi } from '../lib/ports.ts';
import { makeRunRecords } from '../lib/run/records.ts';
import { makeBestPublisher } from '../lib/sweep/publish-best.ts';
import { makeRunStopper } from '../lib/sweep/stop.ts';
import type { SweepCapabilities } from '../lib/sweep/sweeps.ts';
import { jobApi } from '../lib/trainjob/build.ts';
import {
  artifactStore,
  clock,
  config,
  deleteJob,
  env,
  gateway,
  logArchiver,
  podHealth,
  promoter,
  records,
  runQueue,
  servingEvents,
  store,
  sweeps,
  table,
  workflow,
} from './_deps.ts';
import { log, logLine, withLogKeys } from './_log.ts';
import { emitMetrics } from './_metrics.ts';

/** Calls the current pass made to each port, by kind (ReconcilerRequests): reset before each pass. */
const requests: RequestCounts = { ...NO_REQUESTS };

let caps: SweepCapabilities | undefined;

/**
 * The reconciler may do everything a sweep needs: release, stop (and delete jobs), publish the
 * best. Built once, on the first sweep pass (not at build), so a missing queue URL fails that
 * pass only.
 */
function sweepCapabilities(): SweepCapabilities {
  if (caps) return caps;
  const serving = servingEvents();
  caps = {
    queue: runQueue(),
    stopRun: makeRunStopper({
      workflow: workflow(),
      records: records(),
      clock,
      deleteJob,
      archiveLogs: logArchiver(),
      onEnded: (record) => emitMetrics('gantry-reconciler', runEndMetrics(record)),
    }),
    publishBest: makeBestPublisher({
      publisher: makeModelPublisher({
        store: store(),
        artifacts: artifactStore(),
        clock,
        bucket: env().GANTRY_BUCKET,
      }),
      promoter: promoter(),
      ...(serving ? { serving } : {}),
    }),
  };
  return caps;
}

/**
 * The reconciler of one shard: its clusters, and the sweeps when it is shard 0 (any shard advances
 * a sweep whose last trial waiting for quota it saw admitted).
 */
function build(event: unknown) {
  const heartbeatEverySeconds = env().GANTRY_HEARTBEAT_EVERY_SECONDS;
  const sweepsEverySeconds = env().GANTRY_RECONCILE_SWEEPS_EVERY_SECONDS;
  const scope = shardScope(event, env().GANTRY_RECONCILER_SHARDS, config().clusters);
  const clusters = scope.clusters.map((c) => ({
    name: c.name,
    gatewayPromise: gateway(c.name),
    legacy: c.legacyKinds,
    kueueWorkloadGraceSeconds: c.kueueWorkloadGraceSeconds,
  }));
  return Promise.all(clusters.map(async (c) => ({ ...c, gateway: await c.gatewayPromise }))).then(
    (resolved) =>
      makeReconciler({
        clusters: () =>
          resolved.map((c) => ({
            name: c.name,
            gateway: countingCalls(c.gateway, 'Kubernetes', requests),
            kueueWorkloadGraceSeconds: c.kueueWorkloadGraceSeconds,
            // One LIST per kind Gantry creates there: TrainJobs when Trainer is served, plus the
            // configured Training Operator v1 kinds that the cluster serves.
            jobApis: async (): Promise<JobApi[]> => {
              const caps = await c.gateway.capabilities();
              const apis: JobApi[] = [];
              if (caps.trainer && caps.trainer !== 'training-operator-v1') apis.push(jobApi(caps.trainer));
              for (const kind of c.legacy)
                if (caps.legacyKinds.includes(kind)) apis.push(jobApi('training-operator-v1', kind));
              return apis;
            },
          })),
        workflow: countingCalls(workflow(), 'StepFunctions', requests),
        records: makeRunRecords({ table: countingCalls(table(), 'Store', requests), clock }),
        clock,
        orphanGraceSeconds: env().GANTRY_ORPHAN_GRACE_SECONDS,
        admittedSuspendedGraceSeconds: env().GANTRY_ADMITTED_SUSPENDED_GRACE_SECONDS,
        stallTimeScale: env().GANTRY_STALL_TIME_SCALE,
        // Inside Step Functions' API quotas (lib/orchestration/pacing.ts); the embedded default
        // sets no quota of its own, but the same pacing runs there. The shards run at once on the
        // same account's quotas: each takes its share of the configured rate and burst.
        pacing: {
          answers: tokenBucket(
            shardShare(
              { capacity: env().GANTRY_SFN_ANSWERS_BURST, perSecond: env().GANTRY_SFN_ANSWERS_PER_SECOND },
              env().GANTRY_RECONCILER_SHARDS,
            ),
          ),
          describe: tokenBucket(
            shardShare(
              { capacity: env().GANTRY_SFN_DESCRIBE_BURST, perSecond: env().GANTRY_SFN_DESCRIBE_PER_SECOND },
              env().GANTRY_RECONCILER_SHARDS,
            ),
          ),
        },
        ...(heartbeatEverySeconds !== undefined ? { heartbeatEverySeconds } : {}),
        ...(sweepsEverySeconds !== undefined ? { sweepsEverySeconds } : {}),
        podHealth: podHealth(),
        ...(scope.sweeps
          ? { sweeps: { advanceActive: (opts) => sweeps().advanceActive(sweepCapabilities(), opts) } }
          : {}),
        // Any shard: the sweep of a trial it saw admitted, once none of the sweep's trials waits.
        advanceSweep: (sweepId, opts) =>
          sweeps().advance(sweepId, sweepCapabilities(), opts, { maxAttempts: 6 }),
        log: (line) => logLine({ service: 'gantry-reconciler', ...line }),
        archiveLogs: logArchiver(),
      }),
  );
}

/** Built once per shard: a warm container may serve the invocations of several shards. */
const ready = new Map<string, Promise<ReturnType<typeof makeReconciler>>>();

/**
 * Scheduled (every minute): reconciler passes over every configured cluster. With
 * GANTRY_RECONCILE_PASS_SECONDS set (serverless.yml: 10), one invocation runs a pass every that
 * many seconds while the next pass still fits in its time (room for twice the last pass's length),
 * so a job's admission or completion is answered within that period rather than up to a minute
 * late; each pass costs the clusters' LISTs and only what changed (heartbeats are paced per token,
 * records written only when they change). Unset or 0: one pass (the embedded default ticks itself).
 * With GANTRY_RECONCILE_WAKE_GAP_SECONDS set (serverless.yml: 1), the reconciler watches Gantry's
 * jobs between passes: a completed job's waits are answered from its watch event, and a change only
 * a pass can judge (a failure, an admission) starts the next pass at once (that many seconds after
 * the last pass started at the soonest), so an answer waits a second at most instead of half a
 * period (lib/orchestration/wake.ts).
 * The schedule's input names the shard (`{"shard": k}`): the invocation reconciles that shard's
 * clusters only (lib/orchestration/shards.ts), so a slow cluster delays only its own shard.
 */
export const handler = withLogKeys(
  () => ({}),
  middy({ timeoutEarlyInMillis: 2000 }).handler(async (event: unknown, context, { signal }) => {
    const key = shardKey(event);
    if (!ready.has(key)) ready.set(key, build(event));
    const reconciler = await (ready.get(key) as Promise<ReturnType<typeof makeReconciler>>);
    let tookMs = 0;
    const wakeGap = env().GANTRY_RECONCILE_WAKE_GAP_SECONDS;
    return runPasses({
      tick: async () => {
        Object.assign(requests, NO_REQUESTS);
        const started = Date.now();
        // Heartbeats stop before the invocation ends; those left stay due for the next pass.
        const report = await reconciler.tick({
          signal,
          remainingMs: () => context.getRemainingTimeInMillis(),
        });
        tookMs = Date.now() - started;
        await emitMetrics('gantry-reconciler', tickMetrics(report, tookMs, requests));
        return report;
      },
      everyMs: (env().GANTRY_RECONCILE_PASS_SECONDS ?? 0) * 1000,
      remainingMs: () => context.getRemainingTimeInMillis(),
      now: () => Date.now(),
      sleep: (ms) => sleep(ms, signal),
      aborted: () => signal.aborted,
      ...(wakeGap === undefined
        ? {}
        : {
            wake: {
              until: (ms: number) => reconciler.waitForJobChange(ms, { signal }),
              minGapMs: wakeGap * 1000,
            },
          }),
      onPass: (pass, report, woken) => {
        const { jobs: _jobs, ...changes } = report;
        if (Object.values(changes).some((n) => n > 0))
          log('info', {
            msg: 'reconciler tick',
            shard: key,
            service: 'gantry-reconciler',
            pass,
            // A job change seen between passes started this one (GANTRY_RECONCILE_WAKE_GAP_SECONDS).
            startedBy: woken ? 'job change' : 'period',
            durationMs: tookMs,
            requests: { ...requests },
            ...report,
          });
      },
    });
  }),
);

/**
 * Locally (local/stack.ts, whose loop invokes the handler for one pass at a time): the wait
 * between two passes that runPasses does with GANTRY_RECONCILE_WAKE_GAP_SECONDS — up to `ms`,
 * ended by a change of a Gantry job the next pass acts on (lib/orchestration/wake.ts), watched by
 * the reconciler the last invocation built. Before any invocation it only waits.
 */
export async function waitForJobChange(ms: number, signal: AbortSignal): Promise<'changed' | 'period'> {
  const reconciler = ready.get('all');
  if (!reconciler) {
    await sleep(ms, signal);
    return 'period';
  }
  return (await reconciler).waitForJobChange(ms, { signal });
}

/** The shard an event names, as a cache key (`all` without one). */
function shardKey(event: unknown): string {
  const shard =
    typeof event === 'object' && event !== null ? (event as { shard?: unknown }).shard : undefined;
  return shard === undefined ? 'all' : JSON.stringify(shard);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
