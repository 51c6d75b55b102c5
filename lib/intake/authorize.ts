import type { GantryConfig } from '../config.ts';
import { ForbiddenError } from '../errors.ts';
import { metricsTokenOf, metricsUri } from '../metrics/channel.ts';
import { checkpointUri } from '../run/checkpoint.ts';
import type { RunSpec } from '../run/spec.ts';
import { checkTenancy, outputLocations, type Placement } from './tenancy.ts';

/**
 * Every run is authorized again where it is consumed (the runs-queue consumer and CreateJob), not
 * only at intake: a message on the queue, or an execution's input, is trusted only as far as the
 * configuration allows it now. The run's team must exist and its placement — cluster, namespace,
 * Kueue queue, runtime, image, size, priority class, output and metrics locations, job name — must
 * be what that team's rules allow and what intake would have decided. Every broken rule is named
 * in one ForbiddenError.
 */
export function authorizeRun(run: RunSpec, config: GantryConfig, bucket: string): Placement {
  const teamName = run.request.team;
  const team = config.teams.find((t) => t.name === teamName);
  if (!team) throw new ForbiddenError(`team ${teamName} is not configured`);
  const broken: string[] = [];
  let placement: Placement | undefined;
  try {
    placement = checkTenancy(run.request, team, config, { bucket, runId: run.runId });
  } catch (err) {
    if (!(err instanceof ForbiddenError)) throw err;
    broken.push(err.rule);
  }
  if (!team.namespaces.includes(run.namespace)) {
    broken.push(
      `namespace ${run.namespace} is not allowed for team ${team.name} (allowed: ${team.namespaces.join(', ')})`,
    );
  }
  if (placement && run.cluster !== placement.cluster) {
    broken.push(`cluster ${run.cluster} is not team ${team.name}'s cluster (${placement.cluster})`);
  }
  if (team.queues.length > 0 && run.request.queue === undefined) {
    // Intake always names one of the team's queues: a run without one would bypass Kueue.
    broken.push(`a run of team ${team.name} must name one of its queues (${team.queues.join(', ')})`);
  }
  if (run.jobName !== run.runId) broken.push(`jobName ${run.jobName} must be the run id ${run.runId}`);
  const locations = outputLocations(team, { bucket, runId: run.runId });
  if (!locations.some((prefix) => run.outputUri.startsWith(prefix))) {
    broken.push(
      `outputUri ${run.outputUri} is outside team ${team.name}'s output locations (${locations.join(', ')})`,
    );
  }
  if (run.metricsUri !== undefined && metricsTokenOf(run.metricsUri, bucket, run.runId) === undefined) {
    broken.push(`metricsUri ${run.metricsUri} must be ${metricsUri(bucket, run.runId)}<32 hex token>/`);
  }
  if (run.checkpointUri !== undefined && run.checkpointUri !== checkpointUri(bucket, run.runId)) {
    broken.push(`checkpointUri ${run.checkpointUri} must be ${checkpointUri(bucket, run.runId)}`);
  }
  if (broken.length > 0 || !placement) throw new ForbiddenError(broken.join('; '));
  return placement;
}
