import { lazily } from '../lazily.ts';
import { ENV_NAME, RFC1035_LABEL } from '../run/limits.ts';
import type { DataTriggerRef } from '../run/spec.ts';
import * as z from '../zod.ts';

/**
 * Data-trigger rules: new data under a watched S3 prefix starts a retraining run from a template.
 * A rule says which objects count (bucket, prefix, suffix), when a partition is complete (a marker
 * object such as `_SUCCESS`, or a quiet period with no new objects), how the partition is derived
 * from a key, how the data reaches the job (dataset initializer, env, args) and what happens when
 * new data arrives while the rule's previous retraining is still running (`concurrency`).
 */

/** The longest SQS DelaySeconds: quiet periods and queue rechecks longer than this are re-sent. */
export const MAX_DELAY_SECONDS = 900;

/** What a rule's args template may name; replaced by the partition's values. */
export const PLACEHOLDERS = ['{dataUri}', '{dataVersion}', '{partition}', '{bucket}'] as const;

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** A data-trigger rule's schema, built on first use (not when a function's bundle loads). */
export const dataTriggerRuleSchema = /* @__PURE__ */ lazily(() =>
  z
    .strictObject({
      /** The rule's name: part of run ids, logs and `triggers/<name>/` in the Gantry bucket. */
      name: z.string().check(z.regex(RFC1035_LABEL, 'must be an RFC 1035 label'), z.maxLength(63)),
      /** The team the runs belong to (one of `teams`): its namespaces, images and caps apply. */
      team: z.string().check(z.regex(RFC1035_LABEL, 'must be an RFC 1035 label'), z.maxLength(63)),
      /** The bucket the data lands in; default the Gantry bucket (whose `data/` prefix notifies the data-events queue). */
      bucket: z.optional(z.string().check(z.regex(BUCKET_NAME, 'must be an S3 bucket name'))),
      /** Keys under this prefix (no leading '/'; '' = the whole bucket; a trailing '/' is usual). */
      prefix: z.string().check(
        z.maxLength(1024),
        z.refine((p) => !p.startsWith('/'), 'must not start with /'),
      ),
      /** Only keys ending with this count as data (e.g. `.parquet`); the marker always counts. */
      suffix: z.optional(z.string().check(z.minLength(1), z.maxLength(256))),
      /** The completion marker's file name (e.g. `_SUCCESS`, `manifest.json`): its arrival starts the run. */
      marker: z.optional(
        z.string().check(
          z.minLength(1),
          z.maxLength(255),
          z.refine((m) => !m.includes('/'), 'must be a file name without /'),
        ),
      ),
      /** Without a marker: start once the partition has had no new object for this long. */
      quietPeriodSeconds: z.optional(z.number().check(z.int(), z.gte(1), z.lte(86_400))),
      /**
       * How a key maps to its partition: `depth` = the first N path segments below the prefix
       * (`dt=2026-01-02/` for depth 1); without it, the key's directory below the prefix.
       */
      partitionDepth: z.optional(z.number().check(z.int(), z.gte(1), z.lte(32))),
      /** The run to start: a run request (lib/run/schema.ts) without `team` and `idempotencyKey`. */
      run: z.record(z.string(), z.unknown()),
      /** How the partition's URI and version reach the job. */
      inject: z._default(
        z.strictObject({
          /** Set the request's `datasetUri` (the runtime's dataset initializer, else `DATASET_URI`) to the partition's URI. */
          datasetUri: z._default(z.boolean(), true),
          /** An env var that receives the partition's URI. */
          env: z.optional(z.string().check(z.regex(ENV_NAME, 'must be an env var name'))),
          /** An env var that receives the data version (the marker's version id or ETag). */
          versionEnv: z.optional(z.string().check(z.regex(ENV_NAME, 'must be an env var name'))),
          /** Appended to the template's args, with {dataUri} {dataVersion} {partition} {bucket} replaced. */
          args: z.optional(z.array(z.string().check(z.maxLength(4096))).check(z.maxLength(32))),
        }),
        { datasetUri: true },
      ),
      /** New data while the rule's retraining runs: `queue` after it, `replace` it, or `skip` the new data. */
      concurrency: z._default(z.enum(['queue', 'replace', 'skip']), 'queue'),
      /** How often a queued retraining checks whether the current one has ended. */
      recheckSeconds: z._default(z.number().check(z.int(), z.gte(1), z.lte(MAX_DELAY_SECONDS)), 60),
    })
    .check(
      z.superRefine((r, ctx) => {
        if ((r.marker === undefined) === (r.quietPeriodSeconds === undefined)) {
          ctx.addIssue({
            code: 'custom',
            path: ['marker'],
            message: 'give exactly one of marker (a completion file) or quietPeriodSeconds',
          });
        }
        for (const field of ['team', 'idempotencyKey'] as const) {
          if (field in r.run) {
            ctx.addIssue({
              code: 'custom',
              path: ['run', field],
              message:
                field === 'team'
                  ? "set the rule's team, not the template's"
                  : 'data runs get their identity from the data event',
            });
          }
        }
      }),
    ),
);

/** A rule as the trigger uses it: its bucket resolved (the Gantry bucket when the rule names none). */
export type DataTriggerRule = z.output<ReturnType<typeof dataTriggerRuleSchema>> & { bucket: string };

/** The rules with their buckets resolved against the Gantry bucket. */
export function bindRules(
  rules: ReadonlyArray<z.output<ReturnType<typeof dataTriggerRuleSchema>>>,
  gantryBucket: string,
): DataTriggerRule[] {
  return rules.map((r) => ({ ...r, bucket: r.bucket ?? gantryBucket }));
}
export type Concurrency = DataTriggerRule['concurrency'];

/** The data a run trains on: one partition at one version. Carried on the run as `spec.trigger`. */
export type DataRef = DataTriggerRef;

/** Does this object belong to the rule, and is it the rule's marker? */
export function matchKey(
  rule: DataTriggerRule,
  bucket: string,
  key: string,
): { partition: string; isMarker: boolean } | undefined {
  if (bucket !== rule.bucket || !key.startsWith(rule.prefix) || key.endsWith('/')) return undefined;
  const rest = key.slice(rule.prefix.length);
  const segments = rest.split('/');
  const file = segments.at(-1) as string;
  const isMarker = rule.marker !== undefined && file === rule.marker;
  if (!isMarker && rule.suffix !== undefined && !key.endsWith(rule.suffix)) return undefined;
  const dirs = segments.slice(0, -1);
  let partition: string;
  if (rule.partitionDepth !== undefined) {
    // A key that does not reach the partition's depth is not inside a partition.
    if (dirs.length < rule.partitionDepth) return undefined;
    partition = dirs.slice(0, rule.partitionDepth).join('/');
  } else {
    partition = dirs.join('/');
  }
  return { partition, isMarker };
}

/** The rules an object matches (an object may feed several rules). */
export function rulesFor(
  rules: readonly DataTriggerRule[],
  bucket: string,
  key: string,
): Array<{ rule: DataTriggerRule; partition: string; isMarker: boolean }> {
  const out = [];
  for (const rule of rules) {
    const m = matchKey(rule, bucket, key);
    if (m) out.push({ rule, ...m });
  }
  return out;
}

/** `s3://bucket/<prefix><partition>/`: the directory the run reads. */
export function partitionUri(rule: DataTriggerRule, partition: string): string {
  const dir = `${rule.prefix}${partition}`;
  return `s3://${rule.bucket}/${dir}${dir === '' || dir.endsWith('/') ? '' : '/'}`;
}

function fill(template: string, data: DataRef): string {
  return template
    .replaceAll('{dataUri}', data.dataUri)
    .replaceAll('{dataVersion}', data.dataVersion)
    .replaceAll('{partition}', data.partition)
    .replaceAll('{bucket}', data.bucket);
}

/** The run request (unparsed) for one partition at one version: the template plus the injection. */
export function requestFor(rule: DataTriggerRule, data: DataRef): Record<string, unknown> {
  const template = rule.run;
  const env = { ...((template.env as Record<string, string> | undefined) ?? {}) };
  if (rule.inject.env) env[rule.inject.env] = data.dataUri;
  if (rule.inject.versionEnv) env[rule.inject.versionEnv] = data.dataVersion;
  const extraArgs = (rule.inject.args ?? []).map((a) => fill(a, data));
  const args = [...((template.args as string[] | undefined) ?? []), ...extraArgs];
  return {
    ...template,
    team: rule.team,
    ...(rule.inject.datasetUri ? { datasetUri: data.dataUri } : {}),
    ...(Object.keys(env).length > 0 ? { env } : {}),
    ...(args.length > 0 ? { args } : {}),
  };
}
