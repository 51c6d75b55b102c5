import { type RunRequest, type RunRequestInput, RunRequestSchema } from '../../lib/run/schema.ts';
import type { RunSpec } from '../../lib/run/spec.ts';

/**
 * Fixture builders: a valid object by default, overridden field by field. Requests go through
 * RunRequestSchema.parse, so a fixture is always something the API would have accepted (an
 * override the schema rejects throws here, at the fixture, not somewhere downstream).
 */

export const A_RUN_ID = 'run-abcdefghijklmnopqrst';

/** The smallest request the schema accepts, with plausible values. */
export const MINIMAL_REQUEST = {
  modelName: 'resnet',
  team: 'vision',
  runtime: { name: 'torch-distributed' },
  image: 'ghcr.io/acme/train:1.0',
} as const satisfies RunRequestInput;

/** A parsed RunRequest: MINIMAL_REQUEST with `overrides` on top (an `undefined` value removes a field). */
export function aRunRequest(overrides: Partial<RunRequestInput> = {}): RunRequest {
  const input: Record<string, unknown> = { ...MINIMAL_REQUEST, ...overrides };
  for (const [k, v] of Object.entries(input)) if (v === undefined) delete input[k];
  return RunRequestSchema.parse(input);
}

export type RunSpecOverrides = Partial<Omit<RunSpec, 'request'>> & { request?: Partial<RunRequestInput> };

/**
 * A RunSpec as Gantry would derive it: job name = run id, namespace = the request's or
 * `team-<team>`, output under a per-run prefix unless the request names one.
 */
export function aRunSpec(overrides: RunSpecOverrides = {}): RunSpec {
  const { request: requestOverrides, ...rest } = overrides;
  const request = aRunRequest(requestOverrides);
  const runId = rest.runId ?? A_RUN_ID;
  return {
    runId,
    cluster: 'local',
    jobName: runId,
    namespace: request.namespace ?? `team-${request.team}`,
    outputUri: request.output?.uri ?? `s3://gantry-runs/runs/${runId}/output/`,
    request,
    ...rest,
  };
}
