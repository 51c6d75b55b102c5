import {
  makeModelPublisher,
  type Notification,
  type PublishSummary,
  recordArtifacts,
} from '../../artifacts/publish.ts';
import type { CallOptions } from '../../ports.ts';
import type { EvaluationState } from '../../registry/evaluation.ts';
import { evaluationNote } from '../../registry/promote.ts';
import type { JobRef } from '../job-ref.ts';
import type { NotifyServingDeps, PublishArtifactsDeps, RunInput, StepDeps } from '../step-deps.ts';

/**
 * The state machine's publishing tasks: PublishArtifacts (the run's output as the next version of
 * its model) and NotifyServing (the hand-off to serving), both through lib/artifacts/publish.ts.
 */

function publisherOf(deps: Pick<StepDeps, 'store' | 'artifacts' | 'modelsBucket' | 'clock'>) {
  return makeModelPublisher({
    store: deps.store,
    artifacts: deps.artifacts,
    clock: deps.clock,
    bucket: deps.modelsBucket,
  });
}

export function makePublishArtifacts(deps: PublishArtifactsDeps) {
  const { records, clock } = deps;
  const publisher = publisherOf(deps);
  /**
   * Publish the run's output as the next version of its model (lib/artifacts/publish.ts):
   * server-side copies to `models/<model>/<version>/`, a manifest, the `latest` pointer.
   * Idempotent: a retry returns what the first attempt published. Returns a small summary
   * (never the file list: the execution's payload limit is 256 KiB).
   */
  async function publishArtifacts(
    input: RunInput & { job: JobRef },
    opts?: CallOptions,
  ): Promise<PublishSummary> {
    const { run, job } = input;
    if (deps.metrics) {
      await deps.metrics.drain(run.runId, opts).catch((err: unknown) => {
        deps.log?.({
          level: 'WARN',
          msg: 'metric channel not drained',
          runId: run.runId,
          error: String(err),
        });
      });
    }
    if (run.trial && !run.trial.publish) {
      // A sweep publishes its best trial once the sweep ends, not every trial: one record write,
      // which NotifyServing does not repeat.
      const summary: PublishSummary = {
        outputUri: run.outputUri,
        model: run.request.modelName,
        published: false,
        files: 0,
        bytes: 0,
        at: clock.now().toISOString(),
      };
      await records.update(run.runId, { phase: 'Publishing', artifacts: recordArtifacts(summary) }, opts);
      return summary;
    }
    const record = await records.update(run.runId, { phase: 'Publishing' }, opts);
    const artifacts = await publisher.publish({ run, job, record }, opts);
    await records.update(run.runId, { artifacts: recordArtifacts(artifacts) }, opts);
    return artifacts;
  }

  return publishArtifacts;
}

export function makeNotifyServing(deps: NotifyServingDeps) {
  const { records } = deps;
  const publisher = publisherOf(deps);
  /**
   * Hand-off to serving: an event carrying the published manifest (or a no-model event when the
   * run produced none), on the configured channel; with none configured it only records.
   */
  async function notifyServing(
    input: RunInput & { job?: JobRef; artifacts: PublishSummary; evaluation?: EvaluationState },
    opts?: CallOptions,
  ): Promise<Notification> {
    const { run, artifacts, evaluation } = input;
    if (run.trial && !run.trial.publish) {
      // PublishArtifacts recorded the trial's summary with its phase.
      return {
        notified: false,
        reason: `a trial of sweep ${run.trial.sweepId}: the sweep hands over its best trial`,
      };
    }
    await records.update(run.runId, { artifacts: recordArtifacts(artifacts) }, opts);
    const notification = await publisher.notify({ run, artifacts }, deps.serving, opts);
    if (!artifacts.published || artifacts.version === undefined) return notification;
    let out = notification;
    if (deps.promoter) {
      // After the version's own event: serving hears of a version before an alias points at it.
      const decisions = await deps.promoter.promoteVersion(
        artifacts.model,
        artifacts.version,
        deps.serving,
        opts,
        evaluation,
      );
      if (decisions.length > 0) {
        const promotions = decisions.map(({ alias, outcome, reason, comparison }) => ({
          alias,
          outcome,
          reason,
          ...(comparison ? { comparison } : {}),
          ...(evaluation && evaluation.status !== 'none' && evaluation.alias === alias
            ? { evaluation: evaluationNote(evaluation) }
            : {}),
        }));
        await records.update(run.runId, { artifacts: { ...recordArtifacts(artifacts), promotions } }, opts);
        out = { ...out, promotions };
      }
    }
    // After the promotions: a version an alias just left can go, one it just reached stays.
    const retention = deps.retention ? await sweepRetention(deps, run, artifacts.model, opts) : undefined;
    return retention ? { ...out, retention } : out;
  }

  return notifyServing;
}

/** The model's retention sweep; its failure is the sweep's (logged, retried by the next publish), never the run's. */
async function sweepRetention(
  deps: NotifyServingDeps,
  run: RunInput['run'],
  model: string,
  opts?: CallOptions,
): Promise<Notification['retention']> {
  try {
    const result = await deps.retention?.sweep(model, run.request.team, opts);
    return result ? { retired: result.retired, kept: result.kept } : undefined;
  } catch (err) {
    deps.log?.({ level: 'WARN', msg: 'retention sweep failed', runId: run.runId, model, error: String(err) });
    return { error: String(err) };
  }
}
