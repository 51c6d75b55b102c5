import { metricsUri, newMetricsToken } from '../metrics/channel.ts';
import { checkpointUri } from '../run/checkpoint.ts';
import type { RunRequest } from '../run/schema.ts';
import type { RunSpec } from '../run/spec.ts';
import { injectionOf } from './injection.ts';
import type { Parameter } from './schema.ts';
import type { Assignment, ParameterValue } from './space.ts';

/** How a value is written into an argument or an env var: numbers in their shortest exact form. */
export function formatValue(value: ParameterValue): string {
  return typeof value === 'number' ? String(value) : value;
}

/**
 * The run request of one trial: the template with each parameter injected where it says
 * (`--flag=value` appended to args, or an env var) and recorded as a hyperparameter, so the run
 * record and the published manifest show what the trial tried.
 */
export function trialRequest(
  template: RunRequest,
  parameters: readonly Parameter[],
  assignment: Assignment,
): RunRequest {
  const args = [...(template.args ?? [])];
  const env = { ...(template.env ?? {}) };
  for (const p of parameters) {
    const value = assignment[p.name];
    if (value === undefined) continue;
    const { into, as } = injectionOf(p);
    if (into === 'args') args.push(`${as}=${formatValue(value)}`);
    else env[as] = formatValue(value);
  }
  const { idempotencyKey: _key, ...rest } = template;
  return {
    ...rest,
    ...(args.length > 0 ? { args } : {}),
    ...(Object.keys(env).length > 0 ? { env } : {}),
    hyperparameters: { ...(template.hyperparameters ?? {}), ...assignment },
  };
}

/** Where a sweep's trials run: decided once, when the sweep is accepted. */
export interface SweepPlacement {
  cluster: string;
  namespace: string;
  queue?: string;
}

/** The RunSpec of a trial: the run id derives from the sweep id and the trial index. */
export function trialSpec(input: {
  runId: string;
  sweepId: string;
  trialIndex: number;
  request: RunRequest;
  placement: SweepPlacement;
  bucket: string;
  /** Whether the trial's own run publishes its model (`publish: all`). */
  publish: boolean;
}): RunSpec {
  const { runId, placement } = input;
  return {
    runId,
    cluster: placement.cluster,
    jobName: runId,
    namespace: placement.namespace,
    request: { ...input.request, ...(placement.queue !== undefined ? { queue: placement.queue } : {}) },
    outputUri: `s3://${input.bucket}/runs/${runId}/output/`,
    // A spec built again (a requeued message) gets another token: the record's spec is what runs.
    metricsUri: metricsUri(input.bucket, runId, newMetricsToken()),
    checkpointUri: checkpointUri(input.bucket, runId),
    trial: { sweepId: input.sweepId, trialIndex: input.trialIndex, publish: input.publish },
  };
}
