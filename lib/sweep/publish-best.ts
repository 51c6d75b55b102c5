import type { ServingEvents } from '../artifacts/ports.ts';
import type { makeModelPublisher } from '../artifacts/publish.ts';
import type { CallOptions } from '../ports.ts';
import type { Promoter } from '../registry/promote.ts';
import type { RunRecord } from '../run/record.ts';
import type { PublishedModel } from './record.ts';

/**
 * Publish a sweep's best trial as its model's next version and hand it to serving, exactly as a
 * single run's PublishArtifacts and NotifyServing steps would (idempotent: the publisher's
 * claim per run id means a retry returns the version the first attempt published).
 */
export function makeBestPublisher(deps: {
  publisher: ReturnType<typeof makeModelPublisher>;
  serving?: ServingEvents;
  /** The team's promotion policies, applied to the published version as NotifyServing does. */
  promoter?: Promoter;
}) {
  return async function publishBest(run: RunRecord, opts?: CallOptions): Promise<PublishedModel> {
    const spec = { ...run.spec, ...(run.spec.trial ? { trial: { ...run.spec.trial, publish: true } } : {}) };
    const summary = await deps.publisher.publish(
      {
        run: spec,
        record: { createdAt: run.createdAt, ...(run.metrics ? { metrics: run.metrics } : {}) },
        ...(run.job ? { job: { ...run.job, ...(run.metrics ? { metrics: run.metrics } : {}) } } : {}),
      },
      opts,
    );
    const notification = await deps.publisher.notify({ run: spec, artifacts: summary }, deps.serving, opts);
    const promotions =
      deps.promoter && summary.published && summary.version !== undefined
        ? await deps.promoter.promoteVersion(summary.model, summary.version, deps.serving, opts)
        : [];
    return {
      runId: run.runId,
      model: summary.model,
      published: summary.published,
      ...(summary.version !== undefined ? { version: summary.version } : {}),
      ...(summary.modelUri !== undefined ? { modelUri: summary.modelUri } : {}),
      ...(summary.manifestUri !== undefined ? { manifestUri: summary.manifestUri } : {}),
      notified: notification.notified,
      ...(promotions.length > 0
        ? { promotions: promotions.map(({ alias, outcome, reason }) => ({ alias, outcome, reason })) }
        : {}),
    };
  };
}
