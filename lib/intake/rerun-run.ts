import { ValidationError } from '../errors.ts';
import { isObj, type Json } from '../json.ts';
import { lazily } from '../lazily.ts';
import type { CallOptions } from '../ports.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import type { RunRequest } from '../run/schema.ts';
import { parseWith } from '../run/validate.ts';
import * as z from '../zod.ts';
import { makeGetRun } from './runs.ts';
import type { SubmitRun } from './submit-run.ts';
import type { Caller } from './tenancy.ts';

/**
 * Start a run again (`POST /v1/runs/{id}/rerun`, Argo's `resubmit`, SageMaker's clone): the
 * request the run was accepted with, read from its record, with the caller's overrides merged in,
 * submitted as a new run exactly as `POST /v1/runs` submits one (schema, tenancy, caps, model
 * ownership, idempotency). The new record names the run it came from (`rerunOf`).
 */

/** The body: optional, and strict (a misspelt `overrides` is a 400, not a silent plain rerun). */
export const rerunBodySchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    overrides: z.described(
      z.optional(z.record(z.string(), z.unknown())),
      'Fields of the run request to change, merged as a JSON merge patch (RFC 7386): objects merge key by key (`{"env": {"LR": "0.1"}}` changes one variable), anything else replaces, `null` removes the field. The result is validated as a submitted request is.',
    ),
  }),
);
export type RerunBody = z.input<ReturnType<typeof rerunBodySchema>>;

/**
 * The request to submit again: the record's, less what belongs to that one submission — its
 * idempotency key (reusing it would replay the old run). The queue Gantry chose stays: the rerun
 * asks where the run ran.
 */
export function rerunRequest(record: RunRecord): Json {
  const { idempotencyKey: _key, ...rest } = record.spec.request as RunRequest;
  return rest as unknown as Json;
}

/** RFC 7386 JSON merge patch: objects merge recursively, `null` deletes, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObj(patch)) return patch;
  const out: Record<string, unknown> = isObj(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    // defineProperty: a key such as `constructor` becomes an own field like any other.
    else
      Object.defineProperty(out, key, {
        value: mergePatch(out[key], value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return out;
}

/** The fields the overrides touch, as validation issues name them (`env.LR`, `numNodes`). */
function patchedPaths(patch: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(patch).flatMap(([k, v]) => {
    const path = prefix ? `${prefix}.${k}` : k;
    return isObj(v) && Object.keys(v).length > 0 ? patchedPaths(v, path) : [path];
  });
}

export interface RerunRunInput {
  caller: Caller;
  runId: unknown;
  /** The parsed JSON body, when one was sent (untrusted). */
  body?: unknown;
  /** The `Idempotency-Key` header: the same key and overrides replay the rerun instead of starting another. */
  idempotencyKey?: string | undefined;
}

export function makeRerunRun(deps: {
  records: RunRecords;
  config: Parameters<typeof makeGetRun>[0]['config'];
  submit: SubmitRun;
}) {
  const getRun = makeGetRun(deps);
  return async function rerunRun(input: RerunRunInput, opts?: CallOptions) {
    // The run first: another team's (or an unknown) run is a 404 whatever the body says.
    const original = await getRun({ caller: input.caller, runId: input.runId }, opts);
    const body = parseWith(rerunBodySchema(), input.body ?? {});
    const overrides = body.overrides ?? {};
    const request = mergePatch(rerunRequest(original), overrides);
    try {
      return await deps.submit(
        {
          caller: input.caller,
          body: request,
          idempotencyKey: input.idempotencyKey,
          rerunOf: original.runId,
        },
        opts,
      );
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      // A field the caller overrode is named as they sent it: `overrides.numNodes`.
      const touched = patchedPaths(overrides);
      const named = (field: string) =>
        touched.some((p) => field === p || field.startsWith(`${p}.`) || p.startsWith(`${field}.`))
          ? `overrides.${field}`
          : field;
      throw new ValidationError(
        err.issues.map((i) => ({ ...i, field: named(i.field) })),
        { cause: err },
      );
    }
  };
}

export type RerunRun = ReturnType<typeof makeRerunRun>;
