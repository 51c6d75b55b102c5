import { isObj, type Json } from '../../lib/json.ts';
import { badRequest, goQuote, invalid, sortKeys } from './errors.ts';
import { apiVersionOf, type ResourceDef } from './registry.ts';
import { prune } from './schema.ts';
import { meta } from './store.ts';
import { schemaOf } from './strategy.ts';

/**
 * Decoding a request object as the real server does before any other check: the body must be an
 * object of the path's kind and version (typed kinds take a missing apiVersion/kind from the
 * path), and unknown fields are pruned per `fieldValidation`.
 */

export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

export interface DecodeOptions {
  fieldValidation?: FieldValidation;
  /** Warnings for the response's `Warning` headers. */
  warnings?: string[];
  /** The raw request text, for decode error messages. */
  raw?: string;
  /** The body is a fresh object the server may keep (a parsed request body): no defensive copy. */
  owned?: boolean;
}

/** `summarizeData`: the first 30 bytes, ` ...` when longer. */
export function summarize(raw: string): string {
  return raw.length > 30 ? `${raw.slice(0, 30)} ...` : raw;
}

export function decode(def: ResourceDef, version: string, input: unknown, opts: DecodeOptions): Json {
  const raw = opts.raw ?? JSON.stringify(input);
  if (!isObj(input)) {
    const body = input;
    const what = Array.isArray(body) ? 'array' : body === null ? 'null' : typeof body;
    throw badRequest(
      `the object provided is unrecognized (must be of type ${def.kind}): couldn't get version/kind; json parse error: json: cannot unmarshal ${what} into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" } (${Buffer.from(summarize(raw)).toString('hex')})`,
    );
  }
  let body: Json = input;
  if (def.builtin && def.builtin !== 'customresourcedefinitions') {
    // Typed (built-in) kinds take a missing apiVersion/kind from the request path.
    if (body.kind === undefined || body.kind === '') body = { ...body, kind: def.kind };
    if (body.apiVersion === undefined || body.apiVersion === '')
      body = { ...body, apiVersion: apiVersionOf(def.group, version) };
  }
  if (typeof body.kind !== 'string' || body.kind === '') {
    throw badRequest(
      `the object provided is unrecognized (must be of type ${def.kind}): Object 'Kind' is missing in '${raw}' (${summarize(raw)})`,
    );
  }
  const expected = apiVersionOf(def.group, version);
  if (body.apiVersion !== expected) {
    throw badRequest(
      `the API version in the data (${typeof body.apiVersion === 'string' ? body.apiVersion : ''}) does not match the expected API version (${expected})`,
    );
  }
  // HTTP bodies are ours already; anything else may share structure with stored objects.
  const obj = opts.owned ? body : structuredClone(body);
  if (!isObj(obj.metadata)) obj.metadata = {};
  else if (opts.owned) obj.metadata = { ...obj.metadata };
  tidyMeta(meta(obj));
  return obj;
}

/** Prune unknown fields per `fieldValidation` (Strict → 400, Warn → warnings, Ignore → silent). */
export function pruneFields(
  def: ResourceDef,
  version: string,
  obj: Json,
  opts: DecodeOptions,
  patched?: Json,
): void {
  const schema = schemaOf(def, version);
  if (!schema) return;
  const unknown = prune(obj, schema);
  if (unknown.length === 0) return;
  const mode = opts.fieldValidation ?? 'Warn';
  const strictError = `strict decoding error: ${unknown.map((u) => `unknown field ${goQuote(u)}`).join(', ')}`;
  if (mode === 'Strict' && patched) {
    throw invalid('', '', '', [
      {
        type: 'FieldValueInvalid',
        field: 'patch',
        value: JSON.stringify(sortKeys(patched)),
        detail: strictError,
      },
    ]);
  }
  if (mode === 'Strict') {
    throw badRequest(
      `${def.kind} in version ${goQuote(version)} cannot be handled as a ${def.kind}: strict decoding error: ${unknown
        .map((u) => `unknown field ${goQuote(u)}`)
        .join(', ')}`,
    );
  }
  if (mode === 'Warn') for (const u of unknown) opts.warnings?.push(`unknown field ${goQuote(u)}`);
}

/** Empty maps and lists in ObjectMeta vanish (they are `omitempty` in the real server's types). */
function tidyMeta(m: Json): void {
  for (const k of ['labels', 'annotations'])
    if (isObj(m[k]) && Object.keys(m[k] as Json).length === 0) delete m[k];
  for (const k of ['finalizers', 'ownerReferences', 'managedFields'])
    if (Array.isArray(m[k]) && (m[k] as unknown[]).length === 0) delete m[k];
}
