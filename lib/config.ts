import { readFileSync } from 'node:fs';
import { dataTriggerRuleSchema } from './datatrigger/rules.ts';
import { ValidationError } from './errors.ts';
import { parsePrincipal } from './intake/principals.ts';
import { lazily } from './lazily.ts';
import { ALIAS_NAME, ALIAS_RULE } from './registry/layout.ts';
import {
  ENV_NAME,
  IMAGE_REF,
  QUANTITY,
  RESERVED_ENV_PREFIX,
  RFC1035_LABEL,
  RFC1123_SUBDOMAIN,
} from './run/limits.ts';
import { parseWith } from './run/validate.ts';
import { servingSchema } from './serving/kserve.ts';
import * as z from './zod.ts';

/**
 * Gantry's configuration: the clusters it drives, the teams it serves and their limits. One
 * validated document (a file deployed with the service, or inline JSON in an environment
 * variable), parsed once at first use into a typed object. A bad document fails the first call
 * loudly with every problem named; it never half-works.
 */

export const JWT_DEFAULTS = {
  principalClaim: 'sub',
  groupsClaims: ['groups', 'cognito:groups'],
  readScope: 'gantry/read',
  writeScope: 'gantry/write',
};

/**
 * The configuration's schemas, built on first use rather than at import: constructing them is a
 * large share of a function's cold start (bench/results/function-bundles.md), and a function needs
 * them only when its first invocation reads the configuration and the environment.
 */
export const configSchemas = /* @__PURE__ */ lazily(() => {
  const name = z.string().check(z.regex(RFC1035_LABEL, 'must be an RFC 1035 label'), z.maxLength(63));

  const ClusterConfigSchema = z
    .strictObject({
      name,
      /** An EKS cluster: endpoint and CA from DescribeCluster, a bearer token from STS. */
      eks: z.optional(
        z
          .strictObject({
            clusterName: z.string().check(z.minLength(1), z.maxLength(100)),
            region: z.string().check(z.minLength(1)),
            /**
             * Endpoint and CA (DescribeCluster's `endpoint` and `certificateAuthority.data`), resolved at
             * deploy time: with both, functions connect without the EKS SDK (a smaller, faster cold start).
             */
            endpoint: z.optional(z.string().check(z.startsWith('https://'))),
            caData: z.optional(z.string().check(z.minLength(1))),
          })
          .check(
            z.refine(
              (e) => Boolean(e.endpoint) === Boolean(e.caData),
              'give both endpoint and caData, or neither',
            ),
          ),
      ),
      /** A kubeconfig (path or inline YAML) for local use and non-EKS clusters. */
      kubeconfig: z.optional(z.string().check(z.minLength(1))),
      /** Training Operator v1 kinds the reconciler lists on this cluster, besides TrainJobs. */
      legacyKinds: z._default(z.array(z.enum(['PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'JAXJob'])), []),
      /**
       * The job kinds this cluster's Kueue manages (the kinds of its enabled `integrations.frameworks`).
       * Default: Kueue v0.19's default configuration, TrainJob only. A queued run of another kind is
       * refused (lib/trainjob/kueue-kinds.ts). Never MPIJob: Kueue has no integration for the v1 MPIJob.
       */
      kueueManagedKinds: z._default(
        z
          .array(z.enum(['TrainJob', 'PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'JAXJob']))
          .check(
            z.refine(
              (kinds) => !kinds.includes('MPIJob'),
              "must not list MPIJob: Kueue's kubeflow.org/mpijob integration manages MPI Operator v2beta1 MPIJobs, not the Training Operator v1 MPIJob Gantry creates",
            ),
          ),
        ['TrainJob'],
      ),
      /**
       * Seconds a queued job may go without its Kueue Workload before its run fails as not managed by
       * Kueue (Kueue creates the Workload within seconds of the job).
       */
      kueueWorkloadGraceSeconds: z._default(z.number().check(z.int(), z.gte(10), z.lte(3600)), 120),
      /**
       * Seconds of the cluster's clock per wall second: the cluster simulator's speed, which the
       * embedded default sets (its trainings report ETAs in those seconds; start estimates divide by
       * it). Unset on a real cluster: 1.
       */
      clockScale: z.optional(z.number().check(z.gt(0))),
    })
    .check(
      z.refine(
        (c) => Boolean(c.eks) !== Boolean(c.kubeconfig),
        'a cluster needs exactly one of eks or kubeconfig',
      ),
    );

  /**
   * A team's webhook (lib/events): every lifecycle event of the team's runs is POSTed to `url`,
   * signed with the secret named here (never the secret itself: an environment variable of the
   * events function, or an SSM SecureString parameter).
   */
  const WebhookConfigSchema = z
    .strictObject({
      name,
      url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
      /** The environment variable holding the signing secret (locally, or set by your deploy). */
      secretEnv: z.optional(
        z.string().check(z.regex(/^[A-Z_][A-Z0-9_]{0,127}$/, 'must be an environment variable name')),
      ),
      /** An SSM parameter (SecureString) holding the signing secret, e.g. `/gantry/webhooks/vision`. */
      secretParameter: z.optional(
        z
          .string()
          .check(z.regex(/^\/[A-Za-z0-9_.\-/]{1,1010}$/, 'must be an SSM parameter name starting with /')),
      ),
    })
    .check(
      z.refine(
        (w) => Boolean(w.secretEnv) !== Boolean(w.secretParameter),
        'give exactly one of secretEnv or secretParameter',
      ),
    );

  /**
   * A promotion's evaluation step (lib/registry/evaluation.ts): a job of `image` per version scored
   * (the candidate, and the alias's current version), given the holdout `dataset`, reporting its
   * metrics on the metric channel, all ended within `deadlineSeconds` or the promotion is refused.
   */
  const evalQuantity = z.union([
    z.string().check(z.regex(QUANTITY, "must be a Kubernetes quantity such as '4', '500m' or '16Gi'")),
    z.number().check(z.gt(0)),
  ]);
  const EvaluationSchema = z.strictObject({
    /** The team's evaluation image (under one of its `imagePrefixes`). */
    image: z
      .string()
      .check(z.regex(IMAGE_REF, 'must be a container image reference such as registry/repo/name:tag')),
    /** The holdout dataset, `s3://bucket/prefix/` (the job's GANTRY_DATASET_URI). */
    dataset: z
      .string()
      .check(z.regex(/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\/.*$/, 'must be an s3://bucket/prefix URI')),
    /** The metrics kept from the job's reports; default: every metric it reports. */
    metrics: z.optional(
      z.array(z.string().check(z.minLength(1), z.maxLength(128))).check(z.minLength(1), z.maxLength(16)),
    ),
    /** How long the evaluation may take, admission included (60 s to 24 h; default 1800). */
    deadlineSeconds: z._default(
      z.number().check(z.int('must be a whole number'), z.gte(60), z.lte(86_400)),
      1800,
    ),
    /** The runtime of the evaluation job; default: the candidate run's. */
    runtime: z.optional(
      z.strictObject({
        kind: z._default(z.enum(['ClusterTrainingRuntime', 'TrainingRuntime']), 'ClusterTrainingRuntime'),
        name: z.string().check(z.minLength(1), z.maxLength(253)),
      }),
    ),
    /** The Kueue LocalQueue of the evaluation job; default: the candidate run's. */
    queue: z.optional(name),
    /** Per node (one node): CPU and memory as Kubernetes quantities, whole GPUs. Default: the candidate run's. */
    resourcesPerNode: z.optional(
      z.strictObject({
        cpu: z.optional(evalQuantity),
        memory: z.optional(evalQuantity),
        gpu: z.optional(z.number().check(z.int('must be a whole number of GPUs'), z.gte(0), z.lte(16))),
      }),
    ),
    command: z.optional(z.array(z.string()).check(z.maxLength(32))),
    args: z.optional(z.array(z.string()).check(z.maxLength(64))),
    env: z.optional(
      z
        .record(
          z.string().check(
            z.regex(ENV_NAME, 'env names must be letters, digits and _, not starting with a digit'),
            z.refine(
              (n) => !n.startsWith(RESERVED_ENV_PREFIX),
              `names starting with ${RESERVED_ENV_PREFIX} are reserved`,
            ),
          ),
          z.string().check(z.maxLength(4096)),
        )
        .check(z.refine((e) => Object.keys(e).length <= 32, 'at most 32 env entries')),
    ),
  });

  const PromotionPolicySchema = z
    .strictObject({
      /** The model (`modelName`) the policy is for; `*` = every model of the team without its own. */
      model: z._default(
        z.string().check(z.refine((m) => m === '*' || RFC1035_LABEL.test(m), 'must be * or a model name')),
        '*',
      ),
      alias: z.string().check(z.regex(ALIAS_NAME, ALIAS_RULE)),
      policy: z.enum(['auto', 'if-better', 'manual']),
      /** `if-better`: the manifest metric compared (e.g. `accuracy`, `eval.loss`). */
      metric: z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
      direction: z.optional(z.enum(['maximize', 'minimize'])),
      /** `if-better`: how much better the candidate must be (in the metric's units). */
      minMargin: z._default(z.number().check(z.gte(0)), 0),
      /**
       * `if-better`: score the candidate (and the champion) with the team's evaluation image on a
       * holdout dataset before deciding (docs/model-registry.md#evaluation). Absent: the metrics the
       * training reported are compared.
       */
      evaluation: z.optional(EvaluationSchema),
    })
    .check(
      z.refine(
        (p) => p.policy !== 'if-better' || (p.metric !== undefined && p.direction !== undefined),
        'policy if-better needs metric and direction',
      ),
      z.refine((p) => p.evaluation === undefined || p.policy === 'if-better', {
        message: 'evaluation needs policy if-better',
        path: ['evaluation'],
      }),
    );

  const keepLastVersions = z
    .number()
    .check(z.int('must be an integer'), z.gte(1, 'must be 1 or more: the newest version is always kept'));
  /**
   * Retention (lib/registry/retention.ts): how many of a model's newest versions keep their files;
   * older ones no alias (nor `latest`) points at are retired — files deleted, manifest kept.
   */
  const RetentionSchema = z
    .strictObject({
      /** Every model of the team; absent → keep every version of models not named in `models`. */
      keepLastVersions: z.optional(keepLastVersions),
      /** Per model (`modelName` → its own count), winning over the team's. */
      models: z.optional(
        z.record(
          z.string().check(z.regex(RFC1035_LABEL, 'must be a model name (an RFC 1035 label)')),
          z.strictObject({ keepLastVersions }),
        ),
      ),
    })
    .check(
      z.refine(
        (r) => r.keepLastVersions !== undefined || Object.keys(r.models ?? {}).length > 0,
        'retention needs keepLastVersions or at least one entry in models',
      ),
    );

  const TeamConfigSchema = z.strictObject({
    name,
    /**
     * Who belongs to the team (lib/intake/principals.ts): IAM users, roles (matching their sessions),
     * `sso:<account>:<PermissionSetName>`, role sessions, federated users, `local:NAME` (the embedded
     * default only) or JWT principal/group values; a trailing * matches a prefix.
     */
    principals: z
      .array(
        z.string().check(
          z.superRefine((p, ctx) => {
            const parsed = parsePrincipal(p);
            if ('error' in parsed) ctx.addIssue({ code: 'custom', input: p, message: parsed.error });
          }),
        ),
      )
      .check(z.minLength(1, 'a team needs at least one principal')),
    namespaces: z.array(name).check(z.minLength(1, 'a team needs at least one namespace')),
    queues: z._default(z.array(name), []),
    /** Allowed runtimes; empty means any runtime the cluster has. */
    runtimes: z._default(z.array(z.string().check(z.minLength(1))), []),
    /** Allowed image prefixes, e.g. `123456789012.dkr.ecr.us-east-1.amazonaws.com/vision/`. */
    imagePrefixes: z
      .array(z.string().check(z.minLength(1)))
      .check(z.minLength(1, 'a team needs at least one allowed image prefix')),
    maxNodes: z._default(z.number().check(z.int(), z.gte(1)), 16),
    maxGpusPerRun: z._default(z.number().check(z.int(), z.gte(0)), 64),
    /**
     * GPUs the team's runs in flight (Accepted to Publishing) may request together: a new run past
     * it is refused at intake (429, Retry-After), and a sweep's parallelTrials × GPUs per trial must fit.
     */
    maxGpusInFlight: z._default(z.number().check(z.int(), z.gte(0)), 128),
    /** Runs the team may have in flight (Accepted to Publishing); a new run past it is a 429. */
    maxRunsInFlight: z._default(z.number().check(z.int(), z.gte(1)), 100),
    /**
     * GPU-hours the team's runs may use per calendar month (UTC), from its usage ledger
     * (docs/usage-and-budgets.md): past `soft` a submit is accepted with a warning (a response header
     * and a `gantry.run.budget-warning` event); once `hard` is used up a submit is refused (429 until
     * the month resets). Runs in flight are never stopped.
     */
    gpuHourBudget: z.optional(
      z
        .strictObject({
          soft: z.optional(z.number().check(z.gt(0, 'must be more than 0 GPU-hours'))),
          hard: z.optional(z.number().check(z.gt(0, 'must be more than 0 GPU-hours'))),
        })
        .check(
          z.superRefine((b, ctx) => {
            if (b.soft === undefined && b.hard === undefined)
              ctx.addIssue({
                code: 'custom',
                input: b,
                message: 'give soft, hard or both (GPU-hours a month)',
              });
            if (b.soft !== undefined && b.hard !== undefined && b.soft > b.hard)
              ctx.addIssue({ code: 'custom', input: b, path: ['soft'], message: 'must be at most hard' });
          }),
        ),
    ),
    cluster: z.optional(name),
    /**
     * Kueue WorkloadPriorityClasses the team's runs may name (`priorityClass`). Default: none, so a
     * team cannot preempt another team's jobs by naming a high priority. Never `system-*`.
     */
    priorityClasses: z._default(
      z.array(
        z.string().check(
          z.regex(RFC1123_SUBDOMAIN, 'must be a DNS subdomain'),
          z.refine((p) => !p.startsWith('system-'), 'must not be a system-* priority class'),
        ),
      ),
      [],
    ),
    /** Where the team's runs' lifecycle events are POSTed (HMAC-signed, retried, dead-lettered). */
    webhooks: z.optional(
      z.array(WebhookConfigSchema).check(
        z.maxLength(10),
        z.refine((ws) => new Set(ws.map((w) => w.name)).size === ws.length, 'webhook names must be unique'),
      ),
    ),
    /**
     * Where the team's runs may write (`output.uri`) besides their own run prefix in Gantry's bucket:
     * `s3://bucket/prefix/` URIs, each ending in `/`. Default: none.
     */
    outputPrefixes: z._default(
      z.array(
        z.string().check(
          z.regex(
            /^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\/([^/]+\/)*$/,
            'must be an s3://bucket/prefix/ URI ending in /',
          ),
          z.refine((u) => !u.split('/').includes('..'), "must not contain '..' segments"),
        ),
      ),
      [],
    ),
    /**
     * Promotion policies (lib/registry/policy.ts): which aliases of the team's models a new version
     * moves, and on what condition. Default: none (versions publish; only `latest` moves).
     */
    promotion: z.optional(
      z.array(PromotionPolicySchema).check(
        z.maxLength(50),
        z.refine(
          (ps) => new Set(ps.map((p) => `${p.model} ${p.alias}`)).size === ps.length,
          'one policy per model and alias',
        ),
      ),
    ),
    /**
     * Retention of published versions (docs/model-registry.md#retention). Default: none (every
     * version keeps its files).
     */
    retention: z.optional(RetentionSchema),
    /**
     * Serving hand-off per alias (docs/model-registry.md#kserve): KServe InferenceServices in the
     * team's namespaces that Gantry patches when the alias moves. Default: none.
     */
    serving: z.optional(servingSchema()),
  });

  /** A JWT claim name: `sub`, `email`, `cognito:groups`, `https://example.com/roles`… */
  const claimName = z.string().check(z.minLength(1), z.maxLength(256));
  /** An OAuth scope: no whitespace (a token's `scope` claim is space-separated). */
  const scopeName = z
    .string()
    .check(z.regex(/^[\x21-\x7e]{1,256}$/, 'must be a non-empty scope name without spaces'));

  /**
   * How JWT callers (auth=jwt) are read (lib/intake/jwt.ts): which claim names the principal, which
   * claims carry groups (both matched against teams' `principals`), the issuer every token must come
   * from, and the scopes of the read (GET) and write (POST) routes. The write scope grants read too.
   */
  const JwtConfigSchema = z
    .strictObject({
      /**
       * The token issuer (`iss`) every JWT caller must have. On AWS the stack's `jwtIssuerUrl` param
       * (GANTRY_JWT_ISSUER) sets it; if both are given they must be equal.
       */
      issuer: z.optional(z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' })),
      principalClaim: z._default(claimName, JWT_DEFAULTS.principalClaim),
      groupsClaims: z._default(z.array(claimName).check(z.maxLength(10)), JWT_DEFAULTS.groupsClaims),
      readScope: z._default(scopeName, JWT_DEFAULTS.readScope),
      writeScope: z._default(scopeName, JWT_DEFAULTS.writeScope),
    })
    .check(
      z.superRefine((j, ctx) => {
        if (j.readScope === j.writeScope) {
          ctx.addIssue({ code: 'custom', path: ['writeScope'], message: 'must differ from readScope' });
        }
        if (j.groupsClaims.includes(j.principalClaim)) {
          ctx.addIssue({
            code: 'custom',
            path: ['groupsClaims'],
            message: `must not include the principalClaim (${j.principalClaim})`,
          });
        }
      }),
    );

  const AuthConfigSchema = z.strictObject({
    jwt: z._default(JwtConfigSchema, { ...JWT_DEFAULTS }),
  });

  const GantryConfigSchema = z
    .strictObject({
      clusters: z.array(ClusterConfigSchema).check(z.minLength(1, 'at least one cluster')),
      teams: z._default(z.array(TeamConfigSchema), []),
      defaultCluster: z.optional(name),
      /** Retraining on new data (lib/datatrigger/rules.ts): S3 objects under a prefix → runs. */
      dataTriggers: z._default(z.array(dataTriggerRuleSchema()), []),
      /** How API callers are authenticated beyond what API Gateway checks (JWT claims, issuer, scopes). */
      auth: z._default(AuthConfigSchema, { jwt: { ...JWT_DEFAULTS } }),
    })
    .check(
      z.superRefine((c, ctx) => {
        const clusters = new Set(c.clusters.map((x) => x.name));
        if (clusters.size !== c.clusters.length)
          ctx.addIssue({ code: 'custom', path: ['clusters'], message: 'duplicate cluster names' });
        if (c.defaultCluster && !clusters.has(c.defaultCluster)) {
          ctx.addIssue({
            code: 'custom',
            path: ['defaultCluster'],
            message: `no cluster named ${c.defaultCluster}`,
          });
        }
        c.teams.forEach((t, i) => {
          (t.serving?.kserve ?? []).forEach((b, j) => {
            if (b.namespace !== undefined && !t.namespaces.includes(b.namespace))
              ctx.addIssue({
                code: 'custom',
                path: ['teams', i, 'serving', 'kserve', j, 'namespace'],
                message: `must be one of the team's namespaces (${t.namespaces.join(', ')})`,
              });
          });
          if (t.cluster && !clusters.has(t.cluster)) {
            ctx.addIssue({
              code: 'custom',
              path: ['teams', i, 'cluster'],
              message: `no cluster named ${t.cluster}`,
            });
          }
          // An evaluation job runs the team's image like any run: under one of its prefixes.
          (t.promotion ?? []).forEach((p, j) => {
            const image = p.evaluation?.image;
            if (image !== undefined && !t.imagePrefixes.some((prefix) => image.startsWith(prefix))) {
              ctx.addIssue({
                code: 'custom',
                path: ['teams', i, 'promotion', j, 'evaluation', 'image'],
                message: `must start with one of the team's imagePrefixes (${t.imagePrefixes.join(', ')})`,
              });
            }
          });
        });
      }),
    );

  /** Where the service's AWS resources are, from the Lambda environment (serverless.yml sets it). */
  const RuntimeEnvSchema = z.object({
    GANTRY_BUCKET: z.string().check(z.minLength(3)),
    /** The state table (runs, sweeps, data-trigger state): DynamoDB, serverless.yml StateTable. */
    GANTRY_STATE_TABLE: z.optional(z.string().check(z.minLength(3))),
    GANTRY_STATE_MACHINE_ARN: z.string().check(z.startsWith('arn:')),
    GANTRY_RUNS_QUEUE_URL: z.optional(z.string().check(z.startsWith('http'))),
    GANTRY_SERVING_QUEUE_URL: z.optional(z.string().check(z.startsWith('http'))),
    /** The runs DLQ: the consumer moves refused (unauthorized) run messages there, with the reason. */
    GANTRY_RUNS_DLQ_URL: z.optional(z.string().check(z.startsWith('http'))),
    /** The data-events queue: S3 notifications in, the data trigger's delayed checks out and in. */
    GANTRY_DATA_EVENTS_QUEUE_URL: z.optional(z.string().check(z.startsWith('http'))),
    /** The lifecycle events queue (FIFO): the change stream's outbox in, deliveries out (lib/events). */
    GANTRY_EVENTS_QUEUE_URL: z.optional(z.string().check(z.startsWith('http'))),
    /** The EventBridge bus lifecycle events are put on; unset or empty = no EventBridge delivery. */
    GANTRY_EVENT_BUS_NAME: z.optional(z.string()),
    /** Delivery retries: the first wait and the cap of the exponential backoff (lib/events/backoff.ts). */
    GANTRY_EVENTS_RETRY_BASE_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(0)), 5),
    GANTRY_EVENTS_RETRY_MAX_SECONDS: z._default(
      z.coerce.number().check(z.int(), z.gte(0), z.lte(43200)),
      900,
    ),
    /** The alias-moves queue: every alias move in, its lifecycle event and the KServe hand-off out (lib/serving). */
    GANTRY_ALIAS_MOVES_QUEUE_URL: z.optional(z.string().check(z.startsWith('http'))),
    /** After an alias move, an InferenceService's Ready is read again this often (seconds, at most 900)… */
    GANTRY_KSERVE_WATCH_EVERY_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(0), z.lte(900)), 30),
    /** …until it is Ready, or this long after the move (seconds). */
    GANTRY_KSERVE_WATCH_FOR_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(0)), 1800),
    /** Locally: a JSON-lines file every lifecycle event is appended to (the embedded default's sink). */
    GANTRY_EVENTS_SINK_FILE: z.optional(z.string().check(z.minLength(1))),
    GANTRY_CONFIG: z.optional(z.string()),
    /** The JWT issuer API Gateway's authorizer trusts (serverless param jwtIssuerUrl); empty with IAM auth. */
    GANTRY_JWT_ISSUER: z.optional(z.string()),
    GANTRY_CONFIG_FILE: z.optional(z.string()),
    AWS_REGION: z._default(z.string(), 'us-east-1'),
    /** A job with no waiting task token is an orphan only after this long (covers the gap between steps). */
    GANTRY_ORPHAN_GRACE_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(0)), 300),
    /** Reconciler shards: the scheduled invocations a minute, each over its share of the clusters (lib/orchestration/shards.ts). */
    GANTRY_RECONCILER_SHARDS: z._default(z.coerce.number().check(z.int(), z.gte(1)), 1),
    /** The reconciler's passes within one scheduled invocation are this many seconds apart (0/unset: one pass). */
    GANTRY_RECONCILE_PASS_SECONDS: z.optional(z.coerce.number().check(z.gte(0))),
    /**
     * Between passes the reconciler watches Gantry's jobs and starts the next pass as soon as one is
     * admitted, ends or gets a waiting token — no sooner than this many seconds after the last pass
     * started (lib/orchestration/wake.ts). Unset: passes only every GANTRY_RECONCILE_PASS_SECONDS.
     */
    GANTRY_RECONCILE_WAKE_GAP_SECONDS: z.optional(z.coerce.number().check(z.gte(0))),
    /**
     * A reconciler pass advances the active sweeps only this many seconds after the last pass that
     * did (unset/0: every pass); each trial's RecordOutcome advances its sweep as it ends.
     */
    GANTRY_RECONCILE_SWEEPS_EVERY_SECONDS: z.optional(z.coerce.number().check(z.gte(0))),
    /**
     * The reconciler's Step Functions calls: SendTask* at most this many a second after a burst of
     * GANTRY_SFN_ANSWERS_BURST, DescribeExecution likewise (about half of Step Functions' quotas in
     * the smaller regions: SendTask* 1,500 burst / 300 per s, DescribeExecution 250 / 10 per s).
     */
    GANTRY_SFN_ANSWERS_PER_SECOND: z._default(z.coerce.number().check(z.gt(0)), 150),
    GANTRY_SFN_ANSWERS_BURST: z._default(z.coerce.number().check(z.int(), z.gte(1)), 750),
    GANTRY_SFN_DESCRIBE_PER_SECOND: z._default(z.coerce.number().check(z.gt(0)), 5),
    GANTRY_SFN_DESCRIBE_BURST: z._default(z.coerce.number().check(z.int(), z.gte(1)), 120),
    /** The reconciler heartbeats a waiting task token at most this often (default: half the ASL's HeartbeatSeconds). */
    GANTRY_HEARTBEAT_EVERY_SECONDS: z.optional(z.coerce.number().check(z.gt(0))),
    /**
     * Divides every run's `stallAfterSeconds`, and its `runDeadlineSeconds` in queue estimates (the
     * embedded default's state-machine time compression; 1 on AWS).
     */
    GANTRY_STALL_TIME_SCALE: z._default(z.coerce.number().check(z.gt(0)), 1),
    /** A job still suspended this long after Kueue admitted it fails the run (AdmissionStalled; Kueue/Trainer mismatch). */
    GANTRY_ADMITTED_SUSPENDED_GRACE_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(1)), 120),
    /** An admitted job whose pods stay unschedulable this long fails `Unschedulable` (and frees its quota). */
    GANTRY_UNSCHEDULABLE_GRACE_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(0)), 300),
    /** A job whose container restarted (CrashLoopBackOff) this many times fails `CrashLoopBackOff`. */
    GANTRY_CRASHLOOP_RESTART_LIMIT: z._default(z.coerce.number().check(z.int(), z.gte(1)), 5),
    /**
     * A start error the kubelet retries (ErrImagePull / ImagePullBackOff, CreateContainerConfigError, …)
     * that lasts this long since Gantry first saw it fails the run (lib/trainjob/pod-health.ts).
     */
    GANTRY_CONTAINER_START_GRACE_SECONDS: z._default(z.coerce.number().check(z.int(), z.gte(0)), 600),
    /** A job Kueue evicted this many times for PodsReadyTimeout fails `PodsReadyTimeout`. */
    GANTRY_PODS_READY_TIMEOUT_LIMIT: z._default(z.coerce.number().check(z.int(), z.gte(1)), 3),
    /** Local endpoints for the embedded default; unset on AWS. */
    GANTRY_S3_ENDPOINT: z.optional(z.string().check(z.url())),
    GANTRY_SQS_ENDPOINT: z.optional(z.string().check(z.url())),
    GANTRY_SFN_ENDPOINT: z.optional(z.string().check(z.url())),
    GANTRY_DYNAMODB_ENDPOINT: z.optional(z.string().check(z.url())),
  });

  return {
    ClusterConfigSchema,
    WebhookConfigSchema,
    TeamConfigSchema,
    JwtConfigSchema,
    AuthConfigSchema,
    GantryConfigSchema,
    RuntimeEnvSchema,
  };
});

type Schemas = ReturnType<typeof configSchemas>;
export type GantryConfig = z.output<Schemas['GantryConfigSchema']>;
export type TeamConfig = z.output<Schemas['TeamConfigSchema']>;
export type ClusterConfig = z.output<Schemas['ClusterConfigSchema']>;
export type JwtConfig = z.output<Schemas['JwtConfigSchema']>;
export type WebhookConfig = z.output<Schemas['WebhookConfigSchema']>;
export type RuntimeEnv = z.output<Schemas['RuntimeEnvSchema']>;

export function parseConfig(document: unknown): GantryConfig {
  return parseWith(configSchemas().GantryConfigSchema, document);
}

/** Read and validate the configuration named by the environment. Throws with every problem named. */
export function loadConfig(env: RuntimeEnv): GantryConfig {
  let text: string;
  if (env.GANTRY_CONFIG) text = env.GANTRY_CONFIG;
  else if (env.GANTRY_CONFIG_FILE) text = readFileSync(env.GANTRY_CONFIG_FILE, 'utf8');
  else
    throw new ValidationError([{ field: 'GANTRY_CONFIG', rule: 'set GANTRY_CONFIG or GANTRY_CONFIG_FILE' }]);
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (err) {
    throw new ValidationError([{ field: 'GANTRY_CONFIG', rule: `must be JSON: ${(err as Error).message}` }]);
  }
  return parseConfig(document);
}

export function loadRuntimeEnv(env: NodeJS.ProcessEnv = process.env): RuntimeEnv {
  return parseWith(configSchemas().RuntimeEnvSchema, env);
}
