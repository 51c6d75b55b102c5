import { compact } from '../compact.ts';
import { attemptsOf } from '../run/attempts.ts';
import { openStall, type RunRecord } from '../run/record.ts';
import { frontOf } from '../sweep/multi.ts';
import { quotaPressure, type SweepRecord, sweepUsage, trialBudget } from '../sweep/record.ts';
import type { RunSummary, RunView, SubmitResponse, SweepSummary, SweepView } from './view-schemas.ts';

/**
 * The views the API returns, built from records; a view leaves out internals (the request
 * fingerprint). Their schemas are in view-schemas.ts, imported here for types only.
 */

export function runLinks(runId: string, rerunOf?: string) {
  return {
    self: `/v1/runs/${runId}`,
    cancel: `/v1/runs/${runId}/cancel`,
    rerun: `/v1/runs/${runId}/rerun`,
    ...(rerunOf !== undefined ? { rerunOf: `/v1/runs/${rerunOf}` } : {}),
  };
}

export function toSubmitResponse(record: RunRecord): SubmitResponse {
  return {
    runId: record.runId,
    phase: record.phase,
    ...(record.rerunOf !== undefined ? { rerunOf: record.rerunOf } : {}),
    links: runLinks(record.runId, record.rerunOf),
  };
}

/** When the run first went Running, and when it ended (its last transition, once terminal). */
function runTimes(record: RunRecord): { startedAt?: string; endedAt?: string } {
  const started = record.transitions.find((t) => t.phase === 'Running')?.at;
  const last = record.transitions.at(-1);
  const ended = last && ['Succeeded', 'Failed', 'Cancelled'].includes(last.phase) ? last.at : undefined;
  return { ...(started ? { startedAt: started } : {}), ...(ended ? { endedAt: ended } : {}) };
}

export function toRunSummary(record: RunRecord): RunSummary {
  const r = record.spec.request;
  return {
    runId: record.runId,
    phase: record.phase,
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
    team: r.team,
    modelName: r.modelName,
    ...(record.spec.trial ? { sweepId: record.spec.trial.sweepId } : {}),
    ...((record.attempts?.length ?? 0) > 1 ? { attempt: record.attempts?.length } : {}),
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    ...runTimes(record),
    ...(record.progress ? { progress: record.progress } : {}),
    ...(record.metrics ? { metrics: record.metrics } : {}),
    ...(record.spec.trial && r.hyperparameters ? { parameters: r.hyperparameters } : {}),
    ...(record.rerunOf !== undefined ? { rerunOf: record.rerunOf } : {}),
    links: runLinks(record.runId, record.rerunOf),
  };
}

/**
 * The run as `GET /v1/runs/{id}` shows it; `now` counts the GPU-hours of an attempt still running
 * and an open stall's seconds.
 */
export function toRunView(record: RunRecord, now: Date = new Date()): RunView {
  const { spec } = record;
  const { attempts, gpuHours } = attemptsOf(record, now);
  const stall = record.phase === 'Running' ? openStall(record) : undefined;
  const stalledFrom = stall ? Date.parse(stall.lastProgressAt) : 0;
  return {
    ...toRunSummary(record),
    ...(record.message !== undefined ? { message: record.message } : {}),
    cluster: spec.cluster,
    namespace: spec.namespace,
    outputUri: spec.outputUri,
    ...(spec.checkpointUri ? { checkpointUri: spec.checkpointUri } : {}),
    attempts,
    gpuHours,
    ...(spec.trial ? { trial: spec.trial } : {}),
    ...(spec.trigger ? { trigger: spec.trigger } : {}),
    ...(record.job ? { job: record.job } : {}),
    ...(record.admission ? { admission: record.admission } : {}),
    ...(record.metrics ? { metrics: record.metrics } : {}),
    ...(record.lastProgressAt ? { lastProgressAt: record.lastProgressAt } : {}),
    ...(stall
      ? {
          stalled: {
            since: stall.since,
            lastProgressAt: stall.lastProgressAt,
            seconds: Math.max(0, Math.floor((now.getTime() - stalledFrom) / 1000)),
          },
        }
      : {}),
    ...(record.artifacts ? { artifacts: record.artifacts } : {}),
    transitions: record.transitions,
    request: spec.request,
  };
}

export function sweepLinks(sweepId: string) {
  return {
    self: `/v1/sweeps/${sweepId}`,
    cancel: `/v1/sweeps/${sweepId}/cancel`,
    trials: `/v1/runs?sweepId=${sweepId}`,
  };
}

/** The sweep as the API shows it: each trial's parameters, phase and objective, and the best so far. */
export function toSweepView(record: SweepRecord): SweepView {
  const counts: Record<string, number> = {};
  for (const t of record.trials) counts[t.phase] = (counts[t.phase] ?? 0) + 1;
  const quota = record.phase === 'Running' ? quotaPressure(record) : undefined;
  const front = frontOf(record.request, record.trials);
  return {
    ...sweepView(record, counts),
    ...(front ? { paretoFront: front } : {}),
    ...(quota ? { quota } : {}),
    usage: sweepUsage(record.trials),
  };
}

function sweepView(record: SweepRecord, counts: Record<string, number>): SweepView {
  return {
    sweepId: record.sweepId,
    team: record.team,
    phase: record.phase,
    ...(record.reason !== undefined ? { reason: record.reason } : {}),
    ...(record.message !== undefined ? { message: record.message } : {}),
    ...(record.outcome && record.phase === 'Completing' ? { outcome: record.outcome } : {}),
    modelName: record.request.template.modelName,
    objective: record.request.objective,
    ...(record.request.objectives ? { objectives: record.request.objectives } : {}),
    ...(record.request.select ? { select: record.request.select } : {}),
    algorithm: compact(record.request.algorithm),
    ...(record.algorithmChoice ? { algorithmChoice: record.algorithmChoice } : {}),
    maxTrials: record.request.maxTrials,
    plannedTrials: trialBudget(record.request),
    parallelTrials: record.request.parallelTrials,
    maxFailedTrials: record.request.maxFailedTrials,
    ...(record.request.earlyStopping ? { earlyStopping: record.request.earlyStopping } : {}),
    publish: record.request.publish,
    counts,
    ...(record.best ? { best: record.best } : {}),
    ...(record.published ? { published: record.published } : {}),
    // `then` (the API's name, as in the request) holds a plain object, never a function: not thenable.
    // biome-ignore lint/suspicious/noThenProperty: the chained run's field, named as the request's
    ...(record.chained ? { then: record.chained } : {}),
    ...(record.warmStart
      ? { warmStartedFrom: record.warmStart.from, seededTrials: record.warmStart.history.length }
      : {}),
    trials: record.trials.map((t) => ({
      index: t.index,
      runId: t.runId,
      parameters: t.parameters,
      phase: t.phase,
      ...(t.objective !== undefined ? { objective: t.objective } : {}),
      ...(t.objectives !== undefined ? { objectives: t.objectives } : {}),
      ...(t.reason !== undefined ? { reason: t.reason } : {}),
      ...(t.message !== undefined ? { message: t.message } : {}),
      releasedAt: t.releasedAt,
      ...(t.endedAt !== undefined ? { endedAt: t.endedAt } : {}),
      ...(t.gpuHours !== undefined ? { gpuHours: t.gpuHours } : {}),
      ...(t.retryOf !== undefined
        ? { attempt: t.attempt, retryOf: t.retryOf, retryReason: t.retryReason }
        : {}),
      ...(t.waitingForQuota ? { waitingForQuota: true as const } : {}),
    })),
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    ...(record.endedAt !== undefined ? { endedAt: record.endedAt } : {}),
    links: sweepLinks(record.sweepId),
  };
}

/**
 * A sweep in a list: counts, best and outcome, without the trials. A listed sweep carries no
 * trials, only its item's counters (`counts`): the count per phase, phases at zero left out.
 */
export function toSweepSummary(record: SweepRecord): SweepSummary {
  const counts: Record<string, number> = {};
  if (record.counts) {
    for (const [phase, n] of Object.entries(record.counts)) if (n > 0) counts[phase] = n;
  } else {
    for (const t of record.trials ?? []) counts[t.phase] = (counts[t.phase] ?? 0) + 1;
  }
  const { trials: _trials, ...summary } = sweepView({ ...record, trials: [] }, counts);
  return summary;
}
