import * as z from '../zod.ts';

/** The model registry's answers (lib/intake/models.ts), for the OpenAPI document. */

const Value = z.union([z.number(), z.string()]);

const AliasPointerSchema = z.strictObject({
  model: z.string(),
  alias: z.string(),
  version: z.number(),
  seq: z.described(z.number(), "The move's number for this alias: 1, 2, 3, …"),
  previousVersion: z.optional(z.number()),
  storageUri: z.described(z.string(), "The version's directory (KServe storageUri)"),
  manifestUri: z.string(),
  movedAt: z.string(),
  movedBy: z.described(z.string(), 'The caller who moved it, or `policy:<kind>` when a publish did'),
  reason: z.string(),
});

const PendingSchema = z.strictObject({
  model: z.string(),
  alias: z.string(),
  version: z.number(),
  runId: z.string(),
  requestedAt: z.string(),
  reason: z.string(),
});

/** lib/serving/kserve.ts `ServingState`. */
const ServingStateSchema = z.strictObject({
  kind: z.literal('kserve'),
  cluster: z.string(),
  namespace: z.string(),
  inferenceService: z.string(),
  seq: z.described(z.number(), 'The alias move this state is for'),
  version: z.described(z.number(), 'The version the InferenceService was patched to'),
  storageUri: z.string(),
  canaryTrafficPercent: z.optional(z.number()),
  patchedGeneration: z.described(z.optional(z.number()), "metadata.generation after Gantry's patch"),
  patchedAt: z.optional(z.string()),
  ready: z.described(z.enum(['True', 'False', 'Unknown']), 'Its Ready condition for the patched generation'),
  reason: z.optional(z.string()),
  message: z.optional(z.string()),
  observedGeneration: z.optional(z.number()),
  checkedAt: z.string(),
});

const AliasViewSchema = z.extend(z.partial(AliasPointerSchema), {
  alias: z.string(),
  history: z.described(z.array(AliasPointerSchema), 'Its moves, newest first'),
  pending: z.described(z.optional(PendingSchema), 'A version waiting for approval (policy manual)'),
  serving: z.described(
    z.optional(z.array(ServingStateSchema)),
    'The KServe InferenceServices that follow the alias (teams[].serving.kserve): patched generation, Ready, version',
  ),
});

const RetiredSchema = z.described(
  z.optional(z.strictObject({ at: z.string(), reason: z.string() })),
  "Retention deleted the version's files (docs/model-registry.md#retention); its manifest is kept",
);

const VersionEvaluationSchema = z.described(
  z.optional(
    z.looseObject({
      status: z.enum(['done', 'timed-out', 'failed', 'waiting', 'none']),
      dataset: z.optional(z.string()),
      image: z.optional(z.string()),
      deadlineSeconds: z.optional(z.number()),
      reason: z.optional(z.string()),
      versions: z.optional(
        z.array(
          z.looseObject({
            role: z.enum(['candidate', 'champion']),
            version: z.number(),
            state: z.string(),
            metrics: z.optional(z.record(z.string(), z.number())),
          }),
        ),
      ),
      decision: z.optional(z.strictObject({ alias: z.string(), outcome: z.string(), reason: z.string() })),
    }),
  ),
  "The evaluation step before the version's promotion (docs/model-registry.md#evaluation): the holdout metrics of the candidate and the champion, and the decision",
);

const VersionSummarySchema = z.strictObject({
  version: z.number(),
  runId: z.string(),
  publishedAt: z.string(),
  storageUri: z.string(),
  metrics: z.record(z.string(), Value),
  lineage: z.described(
    z.record(z.string(), z.unknown()),
    'Run, sweep and trial, dataset, image, hyperparameters',
  ),
  totals: z.strictObject({ files: z.number(), bytes: z.number() }),
  aliases: z.array(z.string()),
  retired: RetiredSchema,
  evaluation: VersionEvaluationSchema,
});

export const ModelListSchema = z.strictObject({
  models: z.array(
    z.strictObject({
      name: z.string(),
      team: z.string(),
      latestVersion: z.optional(z.number()),
      updatedAt: z.optional(z.string()),
      aliases: z.described(z.record(z.string(), z.number()), 'Alias → version'),
    }),
  ),
});

export const ModelViewSchema = z.strictObject({
  name: z.string(),
  team: z.string(),
  latestVersion: z.optional(z.number()),
  aliases: z.array(AliasViewSchema),
  versions: z.described(z.array(VersionSummarySchema), 'Newest first (`limit`, default 20, at most 100)'),
});

export const ModelVersionSchema = z.looseObject({
  model: z.string(),
  version: z.number(),
  runId: z.string(),
  storageUri: z.string(),
  manifestUri: z.string(),
  metrics: z.record(z.string(), Value),
  aliases: z.array(z.string()),
  retired: RetiredSchema,
  evaluation: VersionEvaluationSchema,
});

export const AliasMovedSchema = z.strictObject({ alias: AliasPointerSchema });

export const AliasConflictBodySchema = z.strictObject({
  error: z.literal('AliasConflictError'),
  message: z.string(),
  currentVersion: z.described(z.nullable(z.number()), 'Where the alias points now (null: nowhere)'),
});
