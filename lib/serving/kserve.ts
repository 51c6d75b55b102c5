import { ALIAS_NAME, ALIAS_RULE, aliasesPrefix } from '../registry/layout.ts';
import { RFC1035_LABEL } from '../run/limits.ts';
import * as z from '../zod.ts';

/**
 * The KServe hand-off (pure): which InferenceService follows which alias of a team's model, the
 * merge patch Gantry sends when the alias moves, and how an InferenceService's status reads as
 * the alias's serving state. KServe's API (serving.kserve.io/v1beta1, v0.15/v0.16):
 * `spec.predictor.model.storageUri` (PredictorExtensionSpec) and `spec.predictor.canaryTrafficPercent`
 * (ComponentExtensionSpec, an int64: the share of traffic the new revision gets, the rest staying on
 * the last ready one; honoured in KServe's Serverless mode), and the knative-style `status.conditions`
 * with the aggregated `Ready` and `status.observedGeneration`.
 */

export const KSERVE = {
  group: 'serving.kserve.io',
  version: 'v1beta1',
  plural: 'inferenceservices',
} as const;

/** `teams[].serving.kserve[]`: the configuration schema (built inside lib/config.ts's lazy schemas). */
export function kserveBindingSchema() {
  return z.strictObject({
    /** The model (`modelName`) whose alias this InferenceService serves. */
    model: z
      .string()
      .check(z.regex(RFC1035_LABEL, 'must be a model name (an RFC 1035 label)'), z.maxLength(63)),
    alias: z.string().check(z.regex(ALIAS_NAME, ALIAS_RULE)),
    /** The InferenceService's name (KServe: `[a-z]([-a-z0-9]*[a-z0-9])?`). */
    inferenceService: z
      .string()
      .check(z.regex(RFC1035_LABEL, 'must be an InferenceService name (an RFC 1035 label)'), z.maxLength(63)),
    /** One of the team's namespaces; default its first. */
    namespace: z.optional(z.string().check(z.regex(RFC1035_LABEL, 'must be an RFC 1035 label'))),
    /** Percent of traffic the new revision gets after a move (KServe Serverless mode); unset: not patched. */
    canaryTrafficPercent: z.optional(
      z
        .number()
        .check(z.int('must be an integer'), z.gte(0, 'must be 0 to 100'), z.lte(100, 'must be 0 to 100')),
    ),
  });
}

export type KServeBinding = z.output<ReturnType<typeof kserveBindingSchema>>;

/** `teams[].serving`: where the team's aliases are served. */
export function servingSchema() {
  return z.strictObject({
    kserve: z._default(
      z.array(kserveBindingSchema()).check(
        z.maxLength(50),
        z.refine(
          (bs) => new Set(bs.map((b) => `${b.namespace ?? ''}/${b.inferenceService}`)).size === bs.length,
          'an InferenceService may follow only one alias',
        ),
      ),
      [],
    ),
  });
}

/** The InferenceService a binding names, its namespace resolved against the team's. */
export interface IsvcTarget {
  cluster: string;
  namespace: string;
  name: string;
  canaryTrafficPercent?: number;
}

/** The bindings of one alias of a team's model, with their namespaces and cluster. */
export function targetsFor(
  team: {
    namespaces: readonly string[];
    cluster?: string | undefined;
    serving?: { kserve: readonly KServeBinding[] } | undefined;
  },
  cluster: string,
  model: string,
  alias: string,
): IsvcTarget[] {
  return (team.serving?.kserve ?? [])
    .filter((b) => b.model === model && b.alias === alias)
    .map((b) => ({
      cluster,
      namespace: b.namespace ?? (team.namespaces[0] as string),
      name: b.inferenceService,
      ...(b.canaryTrafficPercent !== undefined ? { canaryTrafficPercent: b.canaryTrafficPercent } : {}),
    }));
}

/** The merge patch for a move: the version's storage URI, and the canary percent when configured. */
export function kservePatch(target: IsvcTarget, storageUri: string) {
  return {
    spec: {
      predictor: {
        model: { storageUri },
        ...(target.canaryTrafficPercent !== undefined
          ? { canaryTrafficPercent: target.canaryTrafficPercent }
          : {}),
      },
    },
  };
}

export type ReadyStatus = 'True' | 'False' | 'Unknown';

/** What an InferenceService's status says about the generation Gantry patched. */
export interface Readiness {
  ready: ReadyStatus;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
}

/**
 * `Ready` of the patched generation: Unknown until the controller has observed it
 * (`status.observedGeneration` below the patched one: the condition still describes the old spec),
 * else the condition as written, its reason taken from `modelStatus.lastFailureInfo` when the
 * condition gives none.
 */
export function readinessOf(isvc: unknown, patchedGeneration: number): Readiness {
  const o = (isvc ?? {}) as {
    status?: {
      observedGeneration?: number;
      conditions?: Condition[];
      modelStatus?: { lastFailureInfo?: { reason?: string; message?: string } };
    };
  };
  const st = o.status ?? {};
  const observed = typeof st.observedGeneration === 'number' ? st.observedGeneration : undefined;
  const seen = observed !== undefined ? { observedGeneration: observed } : {};
  if (observed === undefined || observed < patchedGeneration) {
    return {
      ready: 'Unknown',
      reason: 'NotObservedYet',
      message: `the KServe controller has not observed generation ${patchedGeneration} yet`,
      ...seen,
    };
  }
  const ready = (st.conditions ?? []).find((c) => c.type === 'Ready');
  if (!ready) return { ready: 'Unknown', reason: 'NoReadyCondition', ...seen };
  const status: ReadyStatus = ready.status === 'True' || ready.status === 'False' ? ready.status : 'Unknown';
  const failure = status === 'False' ? st.modelStatus?.lastFailureInfo : undefined;
  const reason = ready.reason || failure?.reason;
  const message = ready.message || failure?.message;
  return { ready: status, ...(reason ? { reason } : {}), ...(message ? { message } : {}), ...seen };
}

/**
 * Done watching: Ready True for the patched generation. A False is watched on (a model that failed
 * to load may load on the kubelet's next restart) until the watch's deadline.
 */
export function settled(r: Readiness): boolean {
  return r.ready === 'True';
}

/** `models/<model>/aliases/<alias>/serving/<namespace>.<name>.json`: one InferenceService's state. */
export const servingPrefix = (model: string, alias: string) => `${aliasesPrefix(model)}${alias}/serving/`;
export const servingKey = (model: string, alias: string, t: Pick<IsvcTarget, 'namespace' | 'name'>) =>
  `${servingPrefix(model, alias)}${t.namespace}.${t.name}.json`;

/** The serving state of an alias on one InferenceService, as the alias view shows it. */
export interface ServingState {
  kind: 'kserve';
  cluster: string;
  namespace: string;
  inferenceService: string;
  /** The alias move (its `seq`) and version this state is for. */
  seq: number;
  version: number;
  storageUri: string;
  canaryTrafficPercent?: number;
  /** `metadata.generation` after Gantry's patch; absent when the patch failed. */
  patchedGeneration?: number;
  patchedAt?: string;
  ready: ReadyStatus;
  reason?: string;
  message?: string;
  observedGeneration?: number;
  checkedAt: string;
}
