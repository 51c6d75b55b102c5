import { describe, expect, it } from 'vitest';
import { authorizeRun } from '../../../lib/intake/authorize.ts';
import { RunSpecSchema } from '../../../lib/intake/message-schema.ts';
import { metricsUri, newMetricsToken } from '../../../lib/metrics/channel.ts';
import type { RunSpec } from '../../../lib/run/spec.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { BUCKET, intakeConfig } from '../../helpers/intake-fakes.ts';

// The run's metrics URI carries its write token (lib/metrics/channel.ts): the consumer and
// CreateJob accept the run's own prefix with a token, or without one (runs from before tokens).

const config = intakeConfig();
const RUN = 'run-abcdefghijklmnopqrst';
const placed = (metrics: string): RunSpec => ({
  ...aRunSpec({ runId: RUN, request: { queue: 'vision-queue' } }),
  metricsUri: metrics,
});

describe("a run's metrics URI", () => {
  it.each([
    ['with a token', metricsUri(BUCKET, RUN, newMetricsToken())],
    ['without one', metricsUri(BUCKET, RUN)],
  ])('is allowed %s', (_name, uri) => {
    expect(() => authorizeRun(placed(uri), config, BUCKET)).not.toThrow();
    expect(RunSpecSchema.safeParse({ ...placed(uri), request: placed(uri).request }).success).toBe(true);
  });

  it.each([
    ["another run's prefix", metricsUri(BUCKET, 'run-zzzzzzzzzzzzzzzzzzzz', newMetricsToken())],
    ['a token that is not one', `${metricsUri(BUCKET, RUN)}not-a-token/`],
    ['two segments', `${metricsUri(BUCKET, RUN, newMetricsToken())}more/`],
    ['another bucket', metricsUri('elsewhere', RUN, newMetricsToken())],
  ])('is refused as %s', (_name, uri) => {
    expect(() => authorizeRun(placed(uri), config, BUCKET)).toThrow(/metricsUri/);
  });
});
