import fc from 'fast-check';
import { type RunRequestInput, RunRequestSchema } from '../../lib/run/schema.ts';
import type { RunSpec } from '../../lib/run/spec.ts';

/**
 * fast-check arbitraries of valid run requests and specs: every value they produce is one the
 * API accepts (a rejection throws, as a bug in the arbitrary). Shared by the CRD-schema property
 * test and the real-apiserver property test.
 */

const dnsLabel = (max: number) => fc.stringMatching(new RegExp(`^[a-z]([-a-z0-9]{0,${max - 2}}[a-z0-9])?$`));
const dnsSubdomain = fc
  .array(fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?$/), { minLength: 1, maxLength: 4 })
  .map((parts) => parts.join('.'));
const text = (maxLength: number) =>
  fc.string({ unit: 'grapheme', maxLength }).filter((s) => !s.includes('\u0000'));

const image = fc
  .record({
    registry: fc.option(
      fc.tuple(dnsSubdomain, fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined })),
      { nil: undefined },
    ),
    path: fc.array(fc.stringMatching(/^[a-z0-9]{1,10}([._-][a-z0-9]{1,10}){0,2}$/), {
      minLength: 1,
      maxLength: 3,
    }),
    tag: fc.option(fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}$/), { nil: undefined }),
    digest: fc.option(fc.stringMatching(/^[a-f0-9]{64}$/), { nil: undefined }),
  })
  .map(({ registry, path, tag, digest }) => {
    const reg = registry ? `${registry[0]}${registry[1] === undefined ? '' : `:${registry[1]}`}/` : '';
    return `${reg}${path.join('/')}${tag ? `:${tag}` : ''}${digest ? `@sha256:${digest}` : ''}`;
  });

const cpu = fc.oneof(
  fc.integer({ min: 1, max: 1024 }),
  fc.integer({ min: 1, max: 1024 }).map(String),
  fc.integer({ min: 1, max: 1_024_000 }).map((n) => `${n}m`),
  fc.double({ min: 0.001, max: 1024, noNaN: true, noDefaultInfinity: true }),
);
const memory = fc.oneof(
  fc.integer({ min: 1, max: 2 ** 31 - 1 }).map((n) => n * 4096),
  fc.integer({ min: 1, max: 16384 }).map((n) => `${n}Gi`),
  fc.integer({ min: 1, max: 9999 }).map((n) => `${n}.5Mi`),
);

const isAcceptedLabel = (k: string) => RunRequestSchema.shape.labels.safeParse({ [k]: 'x' }).success;
const labelName = fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?$/);
const labelKey = fc
  .oneof(
    labelName,
    fc.tuple(dnsSubdomain, labelName).map(([p, n]) => `${p}/${n}`),
  )
  .filter(isAcceptedLabel);
const labelValue = fc.oneof(
  fc.constant(''),
  fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,40}[A-Za-z0-9])?$/),
);

// The schemes the schema allows (DATA_URI_SCHEMES, any case); no whitespace or control characters.
const storageUri = fc
  .tuple(
    fc.constantFrom('s3', 'gs', 'hf', 'S3', 'Hf'),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 60 }),
  )
  .filter(
    ([, rest]) =>
      ![...rest].some((c) => (c.codePointAt(0) as number) <= 0x20 || c.codePointAt(0) === 0x7f) &&
      !/[\u2028\u2029]/.test(rest),
  )
  .map(([scheme, rest]) => `${scheme}://${rest}`);

const noProto = (k: string) => k !== '__proto__';

export function requestArb(opts: {
  targets: readonly RunRequestInput['target'][];
  minNodes: number;
  initializers: boolean;
}) {
  return fc.record(
    {
      modelName: dnsLabel(40),
      team: dnsLabel(40),
      namespace: dnsLabel(63),
      runtime: fc.record(
        {
          name: dnsSubdomain,
          kind: fc.constantFrom('ClusterTrainingRuntime' as const, 'TrainingRuntime' as const),
        },
        { requiredKeys: ['name'] },
      ),
      image,
      command: fc.array(text(40), { maxLength: 8 }),
      args: fc.array(text(40), { maxLength: 16 }),
      env: fc.dictionary(
        fc
          .stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,20}$/)
          .filter((n) => !n.startsWith('GANTRY_') && noProto(n)),
        text(60),
        { maxKeys: 24, noNullPrototype: true },
      ),
      numNodes: fc.integer({ min: opts.minNodes, max: 1024 }),
      resourcesPerNode: fc.record(
        { cpu, memory, gpu: fc.integer({ min: 0, max: 64 }) },
        { requiredKeys: [] },
      ),
      numProcPerNode: fc.oneof(fc.integer({ min: 1, max: 128 }), fc.constant('auto' as const)),
      ...(opts.initializers && { datasetUri: storageUri, modelUri: storageUri }),
      queue: dnsLabel(63),
      priorityClass: dnsSubdomain,
      output: fc
        .tuple(
          fc.stringMatching(/^[a-z0-9][a-z0-9.-]{1,20}[a-z0-9]$/),
          fc.array(fc.stringMatching(/^[A-Za-z0-9_=+-]{1,12}$/), { maxLength: 4 }),
        )
        .map(([bucket, segments]) => ({ uri: `s3://${bucket}/${segments.map((s) => `${s}/`).join('')}` })),
      producesArtifacts: fc.boolean(),
      admissionDeadlineSeconds: fc.integer({ min: 60, max: 7 * 24 * 3600 }),
      runDeadlineSeconds: fc.integer({ min: 60, max: 30 * 24 * 3600 }),
      labels: fc.dictionary(labelKey, labelValue, { maxKeys: 10, noNullPrototype: true }),
      hyperparameters: fc.dictionary(
        fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_.-]{0,10}$/).filter(noProto),
        fc.oneof(text(30), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean()),
        { maxKeys: 8, noNullPrototype: true },
      ),
      idempotencyKey: fc.stringMatching(/^[\x21-\x7e]{1,128}$/),
      target: fc.constantFrom(...opts.targets),
    },
    {
      requiredKeys: [
        'modelName',
        'team',
        'runtime',
        'image',
        // An MPIJob needs numNodes ≥ 2, so it may not fall back to the default of 1.
        ...(opts.minNodes > 1 ? (['numNodes'] as const) : []),
        // A legacy kind is reached by naming it; `auto` would pick a TrainJob or a PyTorchJob.
        ...(opts.initializers ? [] : (['target'] as const)),
      ],
    },
  );
}

export const specArb = (request: fc.Arbitrary<RunRequestInput>) =>
  fc
    .record({
      request,
      runId: fc.stringMatching(/^run-[a-z2-7]{20}$/),
      trial: fc.option(
        fc.record({
          sweepId: fc.stringMatching(/^swp-[a-z2-7]{20}$/),
          trialIndex: fc.integer({ min: 0, max: 100_000 }),
        }),
        { nil: undefined },
      ),
    })
    .map(({ request: input, runId, trial }): RunSpec => {
      const parsed = RunRequestSchema.safeParse(input);
      // The arbitrary must only produce requests the API accepts; a rejection is a bug in the arbitrary.
      if (!parsed.success) throw new Error(`arbitrary produced an invalid request: ${parsed.error.message}`);
      const r = parsed.data;
      return {
        runId,
        cluster: 'local',
        jobName: runId,
        namespace: r.namespace ?? `team-${r.team}`,
        outputUri: r.output?.uri ?? `s3://gantry-runs/runs/${runId}/output/`,
        request: r,
        ...(trial && { trial }),
      };
    });
