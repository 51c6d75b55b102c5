import { runMessage, runMessageAttributes } from '../intake/message.ts';
import { metricsUri, newMetricsToken } from '../metrics/channel.ts';
import type { CallOptions, Clock, RunQueue } from '../ports.ts';
import { chainedRunId } from '../run/ids.ts';
import { isTerminal as isRunTerminal } from '../run/phases.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunRequest } from '../run/schema.ts';
import type { RunSpec } from '../run/spec.ts';
import { chainedRequest } from './chain.ts';
import { needsChain, observeChained, type StopReason, type SweepRecord } from './record.ts';
import { REQUEUE_AFTER_MS, type SweepStore } from './store.ts';

export interface ChainingDeps {
  store: Pick<SweepStore, 'settle'>;
  records: RunRecords;
  clock: Clock;
  /** Gantry's bucket: the chained run writes to `s3://<bucket>/runs/<runId>/output/`. */
  bucket: string;
  log: (line: Record<string, unknown>) => void;
}

export interface ChainingCapabilities {
  queue?: RunQueue;
  stopRun?: (spec: RunSpec, reason: StopReason, opts?: CallOptions, message?: string) => Promise<void>;
}

/** The sweep's chained full run (`then`): submit it once every trial ended, then follow it. */
export function makeChaining(deps: ChainingDeps) {
  const { store, records, clock, log } = deps;
  const { settle } = store;

  /**
   * The chained full run's spec (`then`): the best parameters with the overrides, placed where the
   * trials run, publishing its model as any run does (it is not a trial). Its request was checked
   * at submit (lib/intake/submit-sweep.ts), with the template's defaults already filled.
   */
  function chainedSpec(record: SweepRecord): RunSpec {
    const runId = chainedRunId(record.sweepId);
    const { template, parameters, then } = record.request;
    const request = chainedRequest(template, parameters, record.best?.parameters ?? {}, then ?? {});
    const { placement } = record;
    return {
      runId,
      cluster: placement.cluster,
      jobName: runId,
      namespace: placement.namespace,
      request: {
        ...(request as RunRequest),
        ...(placement.queue !== undefined ? { queue: placement.queue } : {}),
      },
      outputUri: `s3://${deps.bucket}/runs/${runId}/output/`,
      metricsUri: metricsUri(deps.bucket, runId, newMetricsToken()),
    };
  }

  /**
   * Chaining (`then`), once every trial ended: submit the full run once — the sweep item records
   * it first, at the version read (a conditional write: of two advancers only the one that
   * recorded it enqueues; the run id is derived from the sweep, so even a repeated message starts
   * one run) — then follow its record until it ends. A message lost after the write is sent
   * again once REQUEUE_AFTER_MS passed without a run record. A cancelled sweep stops it.
   */
  async function chain(record: SweepRecord, caps: ChainingCapabilities, opts?: CallOptions) {
    const { sweepId } = record;
    if (!record.request.then) return;
    const now = clock.now();
    if (record.chained && !isRunTerminal(record.chained.phase) && record.outcome?.phase === 'Cancelled') {
      await caps.stopRun?.(chainedSpec(record), 'Cancelled', opts);
    } else if (!needsChain(record)) return;
    if (!record.chained) {
      if (!caps.queue) return;
      let claimed = false;
      const at = now.toISOString();
      const after = await settle(
        sweepId,
        (r) => {
          claimed = false;
          if (r.chained || !needsChain(r)) return undefined;
          claimed = true;
          return { ...r, chained: { runId: chainedRunId(sweepId), phase: 'Accepted', submittedAt: at } };
        },
        opts,
      );
      if (!claimed || !after) return;
      const spec = chainedSpec(after);
      await caps.queue.enqueue(runMessage(spec), runMessageAttributes(spec), opts);
      log({ level: 'INFO', msg: 'chained run submitted', sweepId, runId: spec.runId });
      return;
    }
    const then = record.chained;
    const run = await records.get(then.runId, opts);
    if (!run) {
      if (caps.queue && now.getTime() - Date.parse(then.submittedAt) > REQUEUE_AFTER_MS) {
        const spec = chainedSpec(record);
        await caps.queue.enqueue(runMessage(spec), runMessageAttributes(spec), opts);
        await settle(
          sweepId,
          (r) =>
            r.chained && r.chained.submittedAt === then.submittedAt
              ? { ...r, chained: { ...r.chained, submittedAt: now.toISOString() } }
              : undefined,
          opts,
        );
      }
      return;
    }
    const seen = {
      phase: run.phase,
      ...(run.reason !== undefined ? { reason: run.reason } : {}),
      ...(run.phase === 'Succeeded' && run.artifacts?.modelUri
        ? {
            model: {
              name: run.spec.request.modelName,
              modelUri: run.artifacts.modelUri,
              ...(run.artifacts.version !== undefined ? { version: run.artifacts.version } : {}),
            },
          }
        : {}),
    };
    if (observeChained(record, seen)) {
      await settle(sweepId, (r) => observeChained(r, seen), opts);
      if (isRunTerminal(run.phase)) {
        log({ level: 'INFO', msg: 'chained run ended', sweepId, runId: run.runId, phase: run.phase });
      }
    }
  }

  return { chain, chainedSpec };
}
