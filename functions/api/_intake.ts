import type { GantryConfig } from '../../lib/config.ts';
import { makeGetRunLogs } from '../../lib/intake/logs.ts';
import {
  makeCancelRun,
  makeGetRun,
  makeGetRunEvents,
  makeGetRunMetrics,
  makeListRuns,
} from '../../lib/intake/runs.ts';
import { makeListRuntimes } from '../../lib/intake/runtimes.ts';
import { historyKey, type MetricHistory } from '../../lib/metrics/channel.ts';
import { runEndMetrics } from '../../lib/observability/metrics.ts';
import type { RunRecord } from '../../lib/run/record.ts';
import { config, deleteJob, env, gateway, logArchiver, records, store, table, workflow } from '../_deps.ts';
import { emitMetrics } from '../_metrics.ts';

/** A run the API ended (cancelled): its outcome metrics, as RecordOutcome emits them for the others. */
export const runEnded = (record: RunRecord) => emitMetrics('gantry-api', runEndMetrics(record));

/**
 * The intake use cases, wired once per container on first use (submit and validate wire
 * themselves in their handler files: only they parse run requests, so only their bundles build the
 * run request schema). A bad environment or config
 * document becomes a plain Error here, so the API answers 500 (and logs why) instead of
 * reporting the deployment's own problems to the caller as a 400.
 */
export function settings(): { config: GantryConfig; bucket: string } {
  try {
    return { config: config(), bucket: env().GANTRY_BUCKET };
  } catch (err) {
    throw new Error('Gantry is misconfigured (environment or GANTRY_CONFIG)', { cause: err });
  }
}

export function lazy<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => {
    value ??= make();
    return value;
  };
}

export const getRun = /* @__PURE__ */ lazy(() => makeGetRun({ ...settings(), records: records() }));
export const getRunEvents = /* @__PURE__ */ lazy(() =>
  makeGetRunEvents({ ...settings(), records: records() }),
);
export const getRunMetrics = /* @__PURE__ */ lazy(() =>
  makeGetRunMetrics({
    ...settings(),
    records: records(),
    history: async (runId, opts) => (await store().getJson<MetricHistory>(historyKey(runId), opts))?.value,
  }),
);
export const listRuns = /* @__PURE__ */ lazy(() => makeListRuns({ ...settings(), table: table() }));
export const cancelRun = /* @__PURE__ */ lazy(() =>
  makeCancelRun({
    ...settings(),
    records: records(),
    workflow: workflow(),
    deleteJob,
    onEnded: runEnded,
    archiveLogs: logArchiver(),
  }),
);
export const listRuntimes = /* @__PURE__ */ lazy(() => makeListRuntimes({ ...settings(), gateway }));
export const getRunLogs = /* @__PURE__ */ lazy(() =>
  makeGetRunLogs({ ...settings(), records: records(), gateway, store: store() }),
);
