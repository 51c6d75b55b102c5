import * as z from '../zod.ts';
import {
  DEFAULTS,
  ENV_NAME,
  IMAGE_REF,
  isReservedLabelKey,
  LABEL_VALUE,
  LIMITS,
  parseQuantity,
  QUANTITY,
  RESERVED_ENV_PREFIX,
  RESERVED_LABEL_PREFIXES,
  RFC1035_LABEL,
  RFC1123_SUBDOMAIN,
  STORAGE_URI,
  TARGETS,
} from './limits.ts';
import { parseWith } from './validate.ts';

/**
 * What a user submits to start a training run. Every field is checked here, once, at the edge:
 * everything after this point trusts a `RunRequest`. Unknown fields are rejected (a typo must not
 * silently become a default).
 */

/** The limits and formats too, for the code that parses run requests (the rest imports limits.ts). */
export * from './limits.ts';

const dnsLabel = (what: string, max: number) =>
  z
    .string()
    .check(
      z.minLength(1, `${what} must not be empty`),
      z.maxLength(max, `${what} must be at most ${max} characters`),
      z.regex(
        RFC1035_LABEL,
        `${what} must be lowercase letters, digits and '-', start with a letter (RFC 1035)`,
      ),
    );

/**
 * Where a dataset or base model comes from: object stores and the Hugging Face hub only. Other
 * schemes (`file://` reads the node's disk, `http://` reaches link-local metadata services) are
 * refused: the URI is handed to initializers and training code running inside the cluster.
 */
export const DATA_URI_SCHEMES = ['s3', 'gs', 'hf'] as const;

const storageUri = z.string().check(
  z.maxLength(LIMITS.uriLength, `must be at most ${LIMITS.uriLength} characters`),
  z.regex(STORAGE_URI, 'must be a URI with a scheme, e.g. s3://bucket/path or hf://org/name'),
  z.refine(
    (u) => (DATA_URI_SCHEMES as readonly string[]).includes(u.slice(0, u.indexOf(':')).toLowerCase()),
    `the scheme must be one of ${DATA_URI_SCHEMES.map((s) => `${s}://`).join(', ')}`,
  ),
  z.refine(
    (u) => ![...u].some((c) => c.charCodeAt(0) <= 0x20 || c.charCodeAt(0) === 0x7f),
    'must not contain whitespace or control characters',
  ),
);

const quantity = z.union([
  z.string().check(z.regex(QUANTITY, "must be a Kubernetes quantity such as '4', '500m' or '16Gi'")),
  z.number().check(z.positive('must be positive')),
]);

const labelKey = z.string().check(
  z.maxLength(317, 'label keys are at most 253 + 1 + 63 characters'),
  z.refine((k) => {
    const slash = k.lastIndexOf('/');
    const prefix = slash >= 0 ? k.slice(0, slash) : '';
    const name = slash >= 0 ? k.slice(slash + 1) : k;
    if (slash >= 0 && (prefix.length === 0 || prefix.length > 253 || !RFC1123_SUBDOMAIN.test(prefix)))
      return false;
    return name.length > 0 && name.length <= 63 && LABEL_VALUE.test(name);
  }, 'must be a Kubernetes label key ([prefix/]name, name ≤ 63 alphanumerics, -, _, .)'),
  z.refine(
    (k) => !isReservedLabelKey(k),
    `must not use a reserved prefix (${RESERVED_LABEL_PREFIXES.join(', ')}, *.kubernetes.io/, *.k8s.io/)`,
  ),
);

const stringList = (what: string, maxItems: number) =>
  z
    .array(
      z.string().check(
        z.maxLength(LIMITS.argLength, `each ${what} item must be at most ${LIMITS.argLength} characters`),
        z.refine((s) => !s.includes('\u0000'), `${what} items must not contain NUL characters`),
      ),
    )
    .check(
      z.maxLength(maxItems, `at most ${maxItems} ${what} items`),
      z.refine(
        (items) => items.reduce((n, s) => n + Buffer.byteLength(s), 0) <= LIMITS.argsTotalBytes,
        `${what} must total at most ${LIMITS.argsTotalBytes} bytes`,
      ),
    );

export const ResourcesSchema = z.described(
  z.strictObject({
    cpu: z.described(
      z
        .optional(quantity)
        .check(
          z.refine(
            (q) => q === undefined || toNumber(q) <= LIMITS.maxCpuPerNode,
            `must be at most ${LIMITS.maxCpuPerNode} cores`,
          ),
        ),
      "CPU cores per node: a Kubernetes quantity ('8', '500m') or a number",
    ),
    memory: z.described(
      z
        .optional(quantity)
        .check(
          z.refine(
            (q) => q === undefined || toNumber(q) <= LIMITS.maxMemoryPerNodeBytes,
            'must be at most 16Ti per node',
          ),
        ),
      "Memory per node: a Kubernetes quantity ('32Gi') or a number of bytes",
    ),
    gpu: z.described(
      z.optional(
        z
          .number()
          .check(
            z.int('must be a whole number of GPUs'),
            z.gte(0, 'must not be negative'),
            z.lte(LIMITS.maxGpuPerNode, `must be at most ${LIMITS.maxGpuPerNode} per node`),
          ),
      ),
      'NVIDIA GPUs per node (nvidia.com/gpu)',
    ),
  }),
  'Resources for each node (CPU cores, memory bytes, nvidia.com/gpu)',
);

function toNumber(q: string | number): number {
  return typeof q === 'number' ? q : parseQuantity(q);
}

export const OutputSchema = z.strictObject({
  uri: z.described(
    z.string().check(
      z.maxLength(LIMITS.uriLength, `must be at most ${LIMITS.uriLength} characters`),
      z.regex(/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\/.*$/, 'must be an s3://bucket/prefix/ URI'),
      z.refine((u) => !u.slice(5).split('/').slice(1).includes('..'), "must not contain '..' path segments"),
      z.refine((u) => !u.slice(5).includes('//'), "must not contain empty path segments ('//')"),
      z.refine(
        (u) => ![...u].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f || c === '\\'),
        'must not contain control characters or backslashes',
      ),
    ),
    "An s3://bucket/prefix/ URI in the run's own prefix or one of the team's outputPrefixes",
  ),
});

export const RunRequestSchema = z
  .strictObject({
    modelName: z.described(dnsLabel('modelName', LIMITS.modelName), 'Name of the model this run trains'),
    team: z.described(dnsLabel('team', LIMITS.teamName), 'The team the run belongs to (tenancy)'),
    namespace: z.described(
      z.optional(dnsLabel('namespace', LIMITS.namespace)),
      "Kubernetes namespace for the job; defaults to the team's first namespace",
    ),
    runtime: z.described(
      z.strictObject({
        name: z.described(
          z
            .string()
            .check(
              z.minLength(1, 'runtime.name must not be empty'),
              z.maxLength(
                LIMITS.runtimeName,
                `runtime.name must be at most ${LIMITS.runtimeName} characters`,
              ),
              z.regex(RFC1123_SUBDOMAIN, 'runtime.name must be a DNS subdomain (lowercase, digits, - and .)'),
            ),
          'Runtime name, e.g. torch-distributed (GET /v1/runtimes lists them)',
        ),
        kind: z.described(
          z._default(z.enum(['ClusterTrainingRuntime', 'TrainingRuntime']), DEFAULTS.runtimeKind),
          "ClusterTrainingRuntime (default, cluster-wide) or TrainingRuntime (in the run's namespace)",
        ),
      }),
      'The Trainer runtime the job is built from',
    ),
    image: z.described(
      z
        .string()
        .check(
          z.minLength(1, 'image must not be empty'),
          z.maxLength(LIMITS.image, `image must be at most ${LIMITS.image} characters`),
          z.regex(IMAGE_REF, 'image must be a container image reference such as registry/repo/name:tag'),
        ),
      "Container image of the trainer, under one of the team's imagePrefixes",
    ),
    command: z.described(
      z.optional(stringList('command', LIMITS.commandItems)),
      "Overrides the runtime's trainer command",
    ),
    args: z.described(z.optional(stringList('args', LIMITS.argItems)), 'Arguments to the trainer command'),
    env: z.described(
      z.optional(
        z
          .record(
            z.string().check(
              z.maxLength(256, 'env names must be at most 256 characters'),
              z.regex(ENV_NAME, 'env names must be letters, digits and _, not starting with a digit'),
              z.refine((n) => n !== '__proto__', 'env name __proto__ is not allowed'),
              z.refine(
                (n) => !n.startsWith(RESERVED_ENV_PREFIX),
                `env names starting with ${RESERVED_ENV_PREFIX} are reserved`,
              ),
            ),
            z.string().check(
              z.maxLength(
                LIMITS.envValueLength,
                `env values must be at most ${LIMITS.envValueLength} characters`,
              ),
              z.refine((s) => !s.includes('\u0000'), 'env values must not contain NUL characters'),
            ),
          )
          .check(
            z.refine(
              (e) => Object.keys(e).length <= LIMITS.envEntries,
              `at most ${LIMITS.envEntries} env entries`,
            ),
          ),
      ),
      'Environment variables of the trainer container (names starting with GANTRY_ are reserved)',
    ),
    numNodes: z.described(
      z._default(
        z
          .number()
          .check(
            z.int('numNodes must be a whole number'),
            z.gte(1, 'numNodes must be at least 1'),
            z.lte(LIMITS.maxNodes, `numNodes must be at most ${LIMITS.maxNodes}`),
          ),
        DEFAULTS.numNodes,
      ),
      'Nodes (pods) the job runs on (default 1)',
    ),
    resourcesPerNode: z.optional(ResourcesSchema),
    numProcPerNode: z.described(
      z.optional(
        z.union([
          z
            .number()
            .check(
              z.int('numProcPerNode must be a whole number'),
              z.gte(1, 'numProcPerNode must be at least 1'),
              z.lte(LIMITS.maxProcPerNode, `numProcPerNode must be at most ${LIMITS.maxProcPerNode}`),
            ),
          z.literal('auto'),
        ]),
      ),
      'Processes per node (e.g. one per GPU), or auto',
    ),
    datasetUri: z.described(
      z.optional(storageUri),
      "Dataset for the runtime's dataset initializer: s3://, gs:// or hf://",
    ),
    modelUri: z.described(
      z.optional(storageUri),
      "Base model for the runtime's model initializer: s3://, gs:// or hf://",
    ),
    queue: z.described(z.optional(dnsLabel('queue', 63)), 'Kueue LocalQueue name'),
    priorityClass: z.described(
      z.optional(
        z
          .string()
          .check(
            z.minLength(1),
            z.maxLength(253),
            z.regex(RFC1123_SUBDOMAIN, 'priorityClass must be a DNS subdomain'),
          ),
      ),
      'Kueue WorkloadPriorityClass name',
    ),
    output: z.described(
      z.optional(OutputSchema),
      'Where training writes its output; defaults to the run prefix',
    ),
    producesArtifacts: z.described(z._default(z.boolean(), true), 'false when the run publishes no model'),
    admissionDeadlineSeconds: z.described(
      z._default(
        z
          .number()
          .check(
            z.int(),
            z.gte(
              LIMITS.minDeadlineSeconds,
              `admissionDeadlineSeconds must be at least ${LIMITS.minDeadlineSeconds}`,
            ),
            z.lte(
              LIMITS.maxAdmissionDeadlineSeconds,
              `admissionDeadlineSeconds must be at most ${LIMITS.maxAdmissionDeadlineSeconds} (7 days)`,
            ),
          ),
        DEFAULTS.admissionDeadlineSeconds,
      ),
      'Seconds the job may wait for admission (quota, gang) before the run fails AdmissionTimeout (default 3600)',
    ),
    runDeadlineSeconds: z.described(
      z._default(
        z
          .number()
          .check(
            z.int(),
            z.gte(
              LIMITS.minDeadlineSeconds,
              `runDeadlineSeconds must be at least ${LIMITS.minDeadlineSeconds}`,
            ),
            z.lte(
              LIMITS.maxRunDeadlineSeconds,
              `runDeadlineSeconds must be at most ${LIMITS.maxRunDeadlineSeconds} (30 days)`,
            ),
          ),
        DEFAULTS.runDeadlineSeconds,
      ),
      'Seconds the job may run once admitted before the run fails DeadlineExceeded (default 86400)',
    ),
    minNodes: z.described(
      z.optional(
        z
          .number()
          .check(
            z.int('minNodes must be a whole number'),
            z.gte(1, 'minNodes must be at least 1'),
            z.lte(LIMITS.maxNodes, `minNodes must be at most ${LIMITS.maxNodes}`),
          ),
      ),
      'Elastic fallback: when admission times out, the next attempt asks for half the nodes, down to minNodes (≤ numNodes); the training code must accept a smaller world size',
    ),
    fallbackQueues: z.described(
      z.optional(
        z.array(dnsLabel('fallbackQueues item', 63)).check(
          z.minLength(1, 'fallbackQueues must not be empty when given'),
          z.maxLength(LIMITS.maxFallbackQueues, `at most ${LIMITS.maxFallbackQueues} fallbackQueues`),
          z.refine((q) => new Set(q).size === q.length, 'fallbackQueues must not repeat a queue'),
        ),
      ),
      "Elastic fallback: Kueue LocalQueues to try in order when admission times out on `queue` (e.g. spot, then on-demand); each must be one of the team's queues",
    ),
    retry: z.described(
      z.optional(
        z.strictObject({
          infrastructure: z.described(
            z._default(
              z
                .number()
                .check(
                  z.int('retry.infrastructure must be a whole number'),
                  z.gte(0, 'retry.infrastructure must not be negative'),
                  z.lte(
                    LIMITS.maxInfrastructureRetries,
                    `retry.infrastructure must be at most ${LIMITS.maxInfrastructureRetries}`,
                  ),
                ),
              DEFAULTS.infrastructureRetries,
            ),
            `New attempts after infrastructure failures (node lost, eviction, preemption without requeue, unschedulable): 0..${LIMITS.maxInfrastructureRetries}, default ${DEFAULTS.infrastructureRetries}`,
          ),
          onTrainingFailure: z.described(
            z._default(
              z
                .number()
                .check(
                  z.int('retry.onTrainingFailure must be a whole number'),
                  z.gte(0, 'retry.onTrainingFailure must not be negative'),
                  z.lte(
                    LIMITS.maxTrainingFailureRetries,
                    `retry.onTrainingFailure must be at most ${LIMITS.maxTrainingFailureRetries}`,
                  ),
                ),
              DEFAULTS.trainingFailureRetries,
            ),
            `New attempts after the training code failed (a non-zero exit): 0..${LIMITS.maxTrainingFailureRetries}, default ${DEFAULTS.trainingFailureRetries}`,
          ),
        }),
      ),
      `Attempt budgets: each new attempt is a new job of the same run, with the same GANTRY_CHECKPOINT_URI (default: ${DEFAULTS.infrastructureRetries} after infrastructure failures, none after code failures)`,
    ),
    stallAfterSeconds: z.described(
      z.optional(
        z
          .number()
          .check(
            z.int('stallAfterSeconds must be a whole number'),
            z.gte(
              LIMITS.minStallAfterSeconds,
              `stallAfterSeconds must be at least ${LIMITS.minStallAfterSeconds}`,
            ),
            z.lte(
              LIMITS.maxStallAfterSeconds,
              `stallAfterSeconds must be at most ${LIMITS.maxStallAfterSeconds} (7 days)`,
            ),
          ),
      ),
      'Seconds a running job may go without a new progress or metric report (metric channel) before the run is shown stalled; absent: never',
    ),
    // Optional, not defaulted: a default would change every parsed request, and with it the
    // fingerprint of requests accepted before this field existed (a replayed key would conflict).
    restartOnStall: z.described(
      z.optional(z.boolean()),
      '(default false) true: a stalled run is failed as an infrastructure failure (reason Stalled) instead of only shown stalled; needs stallAfterSeconds',
    ),
    labels: z.described(
      z.optional(
        z
          .record(
            labelKey,
            z
              .string()
              .check(
                z.maxLength(63, 'label values are at most 63 characters'),
                z.regex(LABEL_VALUE, 'must be a Kubernetes label value'),
              ),
          )
          .check(z.refine((l) => Object.keys(l).length <= LIMITS.labels, `at most ${LIMITS.labels} labels`)),
      ),
      'Kubernetes labels added to the job (reserved prefixes are refused)',
    ),
    hyperparameters: z.described(
      z.optional(
        z
          .record(
            z
              .string()
              .check(
                z.minLength(1),
                z.maxLength(64),
                z.regex(/^[A-Za-z_][A-Za-z0-9_.-]*$/, 'hyperparameter names are identifiers'),
              ),
            z.union([
              z.string().check(z.maxLength(256)),
              z.number().check(z.refine(Number.isFinite, 'must be finite')),
              z.boolean(),
            ]),
          )
          .check(
            z.refine(
              (h) => Object.keys(h).length <= LIMITS.hyperparameters,
              `at most ${LIMITS.hyperparameters} hyperparameters`,
            ),
          ),
      ),
      'Recorded in the run and the published manifest',
    ),
    idempotencyKey: z.described(
      z.optional(
        z
          .string()
          .check(
            z.minLength(1),
            z.maxLength(
              LIMITS.idempotencyKeyLength,
              `idempotencyKey must be at most ${LIMITS.idempotencyKeyLength} characters`,
            ),
            z.regex(/^[\x21-\x7e]+$/, 'idempotencyKey must be printable ASCII without spaces'),
          ),
      ),
      'Idempotency key (printable ASCII, ≤ 128); the Idempotency-Key header, when given, must equal it',
    ),
    target: z.described(
      z._default(z.enum(TARGETS), DEFAULTS.target),
      'Which job API: auto (default: TrainJob when the cluster serves Trainer v2) or a Training Operator v1 kind',
    ),
  })
  .check(
    z.superRefine((r, ctx) => {
      if (r.restartOnStall && r.stallAfterSeconds === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['restartOnStall'],
          message: 'restartOnStall needs stallAfterSeconds',
        });
      }
      if (r.minNodes !== undefined && r.minNodes > r.numNodes) {
        ctx.addIssue({ code: 'custom', path: ['minNodes'], message: 'minNodes must be at most numNodes' });
      }
      if (r.target === 'MPIJob' && r.minNodes !== undefined && r.minNodes < 2) {
        ctx.addIssue({
          code: 'custom',
          path: ['minNodes'],
          message: 'an MPIJob needs minNodes ≥ 2 (launcher + workers)',
        });
      }
      if (r.fallbackQueues !== undefined && r.queue === undefined) {
        ctx.addIssue({ code: 'custom', path: ['fallbackQueues'], message: 'fallbackQueues needs queue' });
      }
      if (r.fallbackQueues?.includes(r.queue ?? '')) {
        ctx.addIssue({
          code: 'custom',
          path: ['fallbackQueues'],
          message: 'fallbackQueues must not repeat queue',
        });
      }
      if (r.target === 'MPIJob' && r.numNodes < 2) {
        // An MPIJob needs a launcher and at least one worker.
        ctx.addIssue({
          code: 'custom',
          path: ['numNodes'],
          message: 'an MPIJob needs numNodes ≥ 2 (launcher + workers)',
        });
      }
    }),
  );

export type RunRequestInput = z.input<typeof RunRequestSchema>;
export type RunRequest = z.output<typeof RunRequestSchema>;
export type Resources = z.output<typeof ResourcesSchema>;

/** Parse an untrusted value into a `RunRequest`, or throw a `ValidationError` naming every bad field. */
export function parseRunRequest(input: unknown): RunRequest {
  return parseWith(RunRequestSchema, input);
}
