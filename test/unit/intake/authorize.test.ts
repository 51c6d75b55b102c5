import { describe, expect, it } from 'vitest';
import { ForbiddenError } from '../../../lib/errors.ts';
import { authorizeRun } from '../../../lib/intake/authorize.ts';
import type { RunSpec } from '../../../lib/run/spec.ts';
import { aRunSpec } from '../../helpers/builders.ts';
import { BUCKET, intakeConfig } from '../../helpers/intake-fakes.ts';

const config = intakeConfig();
const RUN = 'run-abcdefghijklmnopqrst';
/** A run as intake places it for vision: its first namespace and queue, its cluster, its run prefix. */
const placed = (request: Record<string, unknown> = {}): RunSpec =>
  aRunSpec({ runId: RUN, request: { queue: 'vision-queue', ...request } });

describe('authorizeRun (the consumer and CreateJob re-check)', () => {
  it('allows what intake would have placed, and returns the placement', () => {
    expect(authorizeRun(placed(), config, BUCKET)).toMatchObject({
      cluster: 'local',
      namespace: 'team-vision',
      queue: 'vision-queue',
    });
    expect(() =>
      authorizeRun({ ...placed(), metricsUri: `s3://${BUCKET}/runs/${RUN}/metrics/` }, config, BUCKET),
    ).not.toThrow();
  });

  it.each<[string, RunSpec, RegExp]>([
    ['an unconfigured team', placed({ team: 'ghost' }), /^team ghost is not configured$/],
    [
      'a namespace of no team',
      { ...placed(), namespace: 'kube-system' },
      /namespace kube-system is not allowed/,
    ],
    [
      "another team's namespace",
      { ...placed(), namespace: 'team-nlp' },
      /namespace team-nlp is not allowed for team vision/,
    ],
    ['no queue for a team with queues', placed({ queue: undefined }), /must name one of its queues/],
    ["another team's queue", placed({ queue: 'nlp-queue' }), /queue nlp-queue is not allowed/],
    [
      'another cluster',
      { ...placed(), cluster: 'gpu' },
      /cluster gpu is not team vision's cluster \(local\)/,
    ],
    ['a foreign image', placed({ image: 'docker.io/x/y:1' }), /image docker.io\/x\/y:1 is not allowed/],
    [
      'too many GPUs',
      placed({ numNodes: 4, resourcesPerNode: { gpu: 8 } }),
      /exceed team vision's maxGpusPerRun 16/,
    ],
    [
      'a system priority class',
      placed({ priorityClass: 'system-node-critical' }),
      /reserved for the cluster/,
    ],
    [
      'a job name that is not the run id',
      { ...placed(), jobName: 'coredns' },
      /jobName coredns must be the run id/,
    ],
    [
      'output in another bucket',
      { ...placed(), outputUri: 's3://elsewhere/x/' },
      /outputUri s3:\/\/elsewhere\/x\/ is outside/,
    ],
    [
      "output into another run's prefix",
      { ...placed(), outputUri: `s3://${BUCKET}/runs/run-zzzzzzzzzzzzzzzzzzzz/output/` },
      /outputUri .* is outside team vision's output locations/,
    ],
    [
      'metrics elsewhere',
      { ...placed(), metricsUri: 's3://elsewhere/runs/run-abcdefghijklmnopqrst/metrics/' },
      /metricsUri/,
    ],
  ])('refuses %s', (_name, run, rule) => {
    let err: unknown;
    try {
      authorizeRun(run, config, BUCKET);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ForbiddenError);
    expect((err as ForbiddenError).rule).toMatch(rule);
  });
});
