import { isObj, type Json } from '../../lib/json.ts';
import { CelUnsupported, evalRule, isTransitionRule } from './cel.ts';
import { type CauseType, type FieldError, OMIT } from './errors.ts';

/**
 * What kube-apiserver does with a custom resource's body, driven by the CRD's structural schema:
 * prune unknown fields (reporting them for `fieldValidation=Strict|Warn`), drop nulls of
 * non-nullable fields, apply `default`s, validate (OpenAPI v3 value validations with the real
 * server's messages) and run `x-kubernetes-validations` rules through the CEL subset in cel.ts.
 */

export interface Schema {
  type?: string;
  format?: string;
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
  items?: Schema;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  nullable?: boolean;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  multipleOf?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
  minProperties?: number;
  maxProperties?: number;
  anyOf?: Schema[];
  allOf?: Schema[];
  oneOf?: Schema[];
  not?: Schema;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: Array<{
    rule: string;
    message?: string;
    messageExpression?: string;
    reason?: string;
    fieldPath?: string;
  }>;
}

/** ObjectMeta's JSON fields: anything else under `metadata` is an unknown field. */
export const OBJECT_META_FIELDS: ReadonlySet<string> = new Set([
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
]);

const child = (path: string, key: string): string => (path ? `${path}.${key}` : key);
const item = (path: string, i: number): string => `${path}[${i}]`;

// ---------------------------------------------------------------------------------------------
// pruning

function pruneMeta(meta: unknown, path: string, unknown: string[]): void {
  if (!isObj(meta)) return;
  for (const k of Object.keys(meta)) {
    if (!OBJECT_META_FIELDS.has(k)) {
      unknown.push(child(path, k));
      delete meta[k];
    }
  }
}

function pruneValue(
  value: unknown,
  s: Schema | undefined,
  path: string,
  unknown: string[],
  embedded: boolean,
): void {
  if (!s) return;
  if (isObj(value)) {
    const props = s.properties;
    const addl = typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined;
    const preserve = s['x-kubernetes-preserve-unknown-fields'] === true || s.additionalProperties === true;
    const isEmbedded = embedded || s['x-kubernetes-embedded-resource'] === true;
    for (const k of Object.keys(value)) {
      const v = value[k];
      if (isEmbedded && (k === 'apiVersion' || k === 'kind')) continue;
      if (isEmbedded && k === 'metadata') {
        pruneMeta(v, child(path, k), unknown);
        continue;
      }
      const ps = props?.[k] ?? addl;
      if (!ps) {
        if (!preserve) {
          unknown.push(child(path, k));
          delete value[k];
        }
        continue;
      }
      if (v === null && !ps.nullable) {
        // Nulls of non-nullable fields are dropped (and may then be defaulted).
        delete value[k];
        continue;
      }
      pruneValue(v, ps, child(path, k), unknown, false);
    }
    return;
  }
  if (Array.isArray(value) && s.items) {
    value.forEach((v, i) => {
      pruneValue(v, s.items, item(path, i), unknown, false);
    });
  }
}

/**
 * Remove unknown fields in place (root: apiVersion, kind and ObjectMeta's fields are always
 * known) and return their paths, sorted as the real strict-decoding error lists them.
 */
export function prune(obj: Json, root: Schema | undefined): string[] {
  const unknown: string[] = [];
  if (!root) return unknown;
  pruneValue(obj, root, '', unknown, true);
  return unknown.sort();
}

// ---------------------------------------------------------------------------------------------
// defaulting

function defaultValue(value: unknown, s: Schema | undefined): void {
  if (!s) return;
  if (isObj(value)) {
    if (s.properties) {
      for (const [k, ps] of Object.entries(s.properties)) {
        if (!Object.hasOwn(value, k) && ps.default !== undefined) value[k] = structuredClone(ps.default);
        if (Object.hasOwn(value, k)) defaultValue(value[k], ps);
      }
    }
    if (typeof s.additionalProperties === 'object') {
      for (const k of Object.keys(value)) {
        if (!s.properties || !Object.hasOwn(s.properties, k)) defaultValue(value[k], s.additionalProperties);
      }
    }
    return;
  }
  if (Array.isArray(value) && s.items) for (const v of value) defaultValue(v, s.items);
}

/** Apply `default`s in place (all of `obj`, or only its `only` subtree), as the apiserver does on decode. */
export function applyDefaults(obj: Json, root: Schema | undefined, only?: string): void {
  if (!root) return;
  if (only) {
    const s = root.properties?.[only];
    if (s && Object.hasOwn(obj, only)) defaultValue(obj[only], s);
    return;
  }
  const { metadata: _m, ...rest } = root.properties ?? {};
  defaultValue(obj, { ...root, properties: rest });
}

// ---------------------------------------------------------------------------------------------
// value validation (kube-openapi messages, converted to field errors like apiextensions does)

function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  if (typeof v === 'object') return 'object';
  return typeof v;
}

function typeMatches(v: unknown, s: Schema): boolean {
  if (s['x-kubernetes-int-or-string'])
    return (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'string';
  switch (s.type) {
    case undefined:
    case '':
      return true;
    case 'object':
      return isObj(v);
    case 'array':
      return Array.isArray(v);
    case 'string':
      return typeof v === 'string';
    case 'integer':
      return typeof v === 'number' && Number.isInteger(v);
    case 'number':
      return typeof v === 'number';
    case 'boolean':
      return typeof v === 'boolean';
    default:
      return true;
  }
}

const err = (type: CauseType, field: string, value: unknown, detail?: string): FieldError => {
  const e: FieldError = { type, field, value };
  if (detail !== undefined) e.detail = detail;
  return e;
};

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (isObj(v)) {
    const out: Json = {};
    for (const k of Object.keys(v).sort()) out[k] = canonical(v[k]);
    return out;
  }
  return v;
}

function quoteEnum(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

/**
 * A CRD `pattern` (Go RE2) as a JavaScript RegExp. The one RE2-only construct in the CRDs is a
 * leading `(?i)` (Kueue's AdmissionCheck `parameters.kind`): a case-insensitive match.
 */
export function goRegExp(pattern: string): RegExp {
  const caseless = /^(\^?)\(\?i\)/.exec(pattern);
  return caseless
    ? new RegExp(caseless[1] + pattern.slice(caseless[0].length), 'iu')
    : new RegExp(pattern, 'u');
}

function validateValue(v: unknown, s: Schema, path: string, out: FieldError[], strip = 0): void {
  // The message names the path relative to the validated root (status updates validate `status` alone).
  const mp = path.slice(strip);
  if (v === null) {
    if (s.nullable) return;
    if (s.type || s['x-kubernetes-int-or-string']) {
      out.push(
        err(
          'FieldValueTypeInvalid',
          path,
          'null',
          `${mp} in body must be of type ${s.type ?? 'string'}: "null"`,
        ),
      );
    }
    return;
  }
  if (!typeMatches(v, s)) {
    const t = jsonType(v);
    const want = s['x-kubernetes-int-or-string'] ? 'integer,string' : s.type;
    out.push(
      err('FieldValueTypeInvalid', path, t, `${mp} in body must be of type ${want}: ${JSON.stringify(t)}`),
    );
    validateCombinators(v, s, path, out, strip);
    return;
  }
  if (s.enum && !s.enum.some((e) => deepEqual(e, v))) {
    out.push(err('FieldValueNotSupported', path, v, `supported values: ${s.enum.map(quoteEnum).join(', ')}`));
  }
  if (typeof v === 'string') validateString(v, s, path, mp, out);
  if (typeof v === 'number') validateNumber(v, s, path, mp, out);
  if (Array.isArray(v)) validateArray(v, s, path, out, strip);
  if (isObj(v)) validateObject(v, s, path, out, strip);
  validateCombinators(v, s, path, out, strip);
}

function validateString(v: string, s: Schema, path: string, mp: string, out: FieldError[]): void {
  const len = [...v].length;
  if (s.maxLength !== undefined && len > s.maxLength) {
    out.push(
      err(
        'FieldValueTooLong',
        path,
        v,
        `may not be more than ${s.maxLength} ${s.maxLength === 1 ? 'byte' : 'bytes'}`,
      ),
    );
  }
  if (s.minLength !== undefined && len < s.minLength) {
    out.push(err('FieldValueInvalid', path, v, `${mp} in body should be at least ${s.minLength} chars long`));
  }
  if (s.pattern !== undefined) {
    let ok = true;
    try {
      ok = goRegExp(s.pattern).test(v);
    } catch {
      ok = true; // an RE2 construct JavaScript lacks: do not guess
    }
    if (!ok) out.push(err('FieldValueInvalid', path, v, `${mp} in body should match '${s.pattern}'`));
  }
}

function validateNumber(v: number, s: Schema, path: string, mp: string, out: FieldError[]): void {
  if (s.minimum !== undefined) {
    if (s.exclusiveMinimum ? v <= s.minimum : v < s.minimum) {
      out.push(
        err(
          'FieldValueInvalid',
          path,
          v,
          `${mp} in body should be greater than ${s.exclusiveMinimum ? '' : 'or equal to '}${s.minimum}`,
        ),
      );
    }
  }
  if (s.maximum !== undefined) {
    if (s.exclusiveMaximum ? v >= s.maximum : v > s.maximum) {
      out.push(
        err(
          'FieldValueInvalid',
          path,
          v,
          `${mp} in body should be less than ${s.exclusiveMaximum ? '' : 'or equal to '}${s.maximum}`,
        ),
      );
    }
  }
  if (
    s.multipleOf !== undefined &&
    s.multipleOf > 0 &&
    Math.abs(v / s.multipleOf - Math.round(v / s.multipleOf)) > 1e-9
  ) {
    out.push(err('FieldValueInvalid', path, v, `${mp} in body should be a multiple of ${s.multipleOf}`));
  }
}

function validateArray(v: unknown[], s: Schema, path: string, out: FieldError[], strip: number): void {
  const mp = path.slice(strip);
  if (s.maxItems !== undefined && v.length > s.maxItems) {
    out.push(err('FieldValueTooMany', path, v.length, `must have at most ${s.maxItems} items`));
  }
  if (s.minItems !== undefined && v.length < s.minItems) {
    out.push(
      err('FieldValueInvalid', path, v.length, `${mp} in body should have at least ${s.minItems} items`),
    );
  }
  if (s.uniqueItems) {
    const seen = new Set<string>();
    for (const x of v) {
      const k = JSON.stringify(canonical(x));
      if (seen.has(k)) {
        out.push(err('FieldValueInvalid', path, v, `${mp} in body shouldn't contain duplicates`));
        break;
      }
      seen.add(k);
    }
  }
  if (s.items) {
    const items = s.items;
    v.forEach((x, i) => {
      validateValue(x, items, item(path, i), out, strip);
    });
  }
  validateListType(v, s, path, out);
}

function validateObject(
  v: Record<string, unknown>,
  s: Schema,
  path: string,
  out: FieldError[],
  strip: number,
): void {
  const mp = path.slice(strip);
  for (const r of s.required ?? []) {
    if (!Object.hasOwn(v, r)) out.push(err('FieldValueRequired', child(path, r), '', ''));
  }
  const n = Object.keys(v).length;
  if (s.maxProperties !== undefined && n > s.maxProperties) {
    out.push(err('FieldValueTooMany', path, n, `must have at most ${s.maxProperties} items`));
  }
  if (s.minProperties !== undefined && n < s.minProperties) {
    out.push(
      err('FieldValueInvalid', path, n, `${mp} in body should have at least ${s.minProperties} properties`),
    );
  }
  // Body order, as the real server reports them.
  for (const k of Object.keys(v)) {
    const ps =
      s.properties?.[k] ?? (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined);
    if (ps) validateValue(v[k], ps, child(path, k), out, strip);
  }
}

function validateCombinators(v: unknown, s: Schema, path: string, out: FieldError[], strip: number): void {
  const mp = path.slice(strip);
  const passes = (sub: Schema) => {
    const tmp: FieldError[] = [];
    validateValue(v, sub, path, tmp, strip);
    return tmp.length === 0;
  };
  if (s.allOf) for (const sub of s.allOf) validateValue(v, sub, path, out, strip);
  if (s.anyOf && !s.anyOf.some(passes)) {
    // As kube-openapi reports it: a root-level error naming the path, then the first branch's errors.
    out.push(
      err(
        'FieldValueInvalid',
        '<nil>',
        '',
        `${JSON.stringify(mp)} must validate at least one schema (anyOf)`,
      ),
    );
    const first = s.anyOf[0];
    if (first) validateValue(v, first, path, out, strip);
  }
  if (s.oneOf && s.oneOf.filter(passes).length !== 1) {
    out.push(
      err('FieldValueInvalid', path, v, `${mp} in body must validate one and only one schema (oneOf)`),
    );
  }
  if (s.not && passes(s.not)) {
    out.push(err('FieldValueInvalid', path, v, `${mp} in body must not validate the schema (not)`));
  }
}

function validateListType(v: unknown[], s: Schema, path: string, out: FieldError[]): void {
  const type = s['x-kubernetes-list-type'];
  if (type === 'set') {
    const seen = new Set<string>();
    v.forEach((x, i) => {
      const k = JSON.stringify(canonical(x));
      if (seen.has(k)) out.push(err('FieldValueDuplicate', item(path, i), x));
      seen.add(k);
    });
  } else if (type === 'map') {
    const keys = s['x-kubernetes-list-map-keys'] ?? [];
    const seen = new Set<string>();
    v.forEach((x, i) => {
      if (!isObj(x)) return;
      const keyObj: Json = {};
      for (const k of keys) if (Object.hasOwn(x, k)) keyObj[k] = x[k];
      const k = JSON.stringify(canonical(keyObj));
      if (seen.has(k)) out.push(err('FieldValueDuplicate', item(path, i), keyObj));
      seen.add(k);
    });
  }
}

/** Validate `obj` (or one of its subtrees, e.g. `status`) against the schema. */
export function validateSchema(obj: Json, root: Schema | undefined, only?: string): FieldError[] {
  const out: FieldError[] = [];
  if (!root) return out;
  const props = { ...(root.properties ?? {}) };
  delete props.metadata;
  delete props.apiVersion;
  delete props.kind;
  if (only) {
    const s = props[only];
    if (s && Object.hasOwn(obj, only)) validateValue(obj[only], s, only, out, only.length + 1);
    return out;
  }
  validateValue(obj, { ...root, properties: props }, '', out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// x-kubernetes-validations

/** Errors that stop CEL rules from running (the real server's hasBlockingErr). */
export function hasBlockingErr(errs: FieldError[]): boolean {
  return errs.some((e) =>
    [
      'FieldValueNotSupported',
      'FieldValueRequired',
      'FieldValueTooLong',
      'FieldValueTooMany',
      'FieldValueTypeInvalid',
    ].includes(e.type),
  );
}

export const CEL_BLOCKED: FieldError = {
  type: 'FieldValueInvalid',
  field: '<nil>',
  value: null,
  detail:
    'some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
};

type Old = { value: unknown } | undefined;

function celAt(v: unknown, old: Old, s: Schema, path: string, out: FieldError[]): void {
  if (v === undefined || v === null) return;
  for (const rule of s['x-kubernetes-validations'] ?? []) {
    const transition = isTransitionRule(rule.rule);
    if (transition && !old) continue;
    let ok: boolean;
    try {
      ok = evalRule(rule.rule, v, transition ? old : undefined);
    } catch (e) {
      if (e instanceof CelUnsupported) continue;
      throw e;
    }
    if (ok) continue;
    const type = (rule.reason as CauseType | undefined) ?? 'FieldValueInvalid';
    let field = path || '<nil>';
    if (rule.fieldPath)
      field =
        `${path}${rule.fieldPath.startsWith('.') || rule.fieldPath.startsWith('[') ? '' : '.'}${rule.fieldPath}`.replace(
          /^\./,
          '',
        );
    const scalar = typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
    out.push({ type, field, value: scalar ? v : OMIT, detail: rule.message ?? `failed rule: ${rule.rule}` });
  }
  if (isObj(v)) {
    const oldObj = old && isObj(old.value) ? old.value : undefined;
    for (const k of Object.keys(v).sort()) {
      const ps =
        s.properties?.[k] ??
        (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined);
      if (!ps) continue;
      const o = oldObj && Object.hasOwn(oldObj, k) ? { value: oldObj[k] } : undefined;
      celAt(v[k], o, ps, child(path, k), out);
    }
  } else if (Array.isArray(v) && s.items) {
    const items = s.items;
    const type = s['x-kubernetes-list-type'];
    const oldArr = old && Array.isArray(old.value) ? old.value : undefined;
    v.forEach((x, i) => {
      let o: Old;
      if (oldArr && type === 'map') {
        const keys = s['x-kubernetes-list-map-keys'] ?? [];
        const match = oldArr.find((y) => isObj(y) && isObj(x) && keys.every((k) => deepEqual(y[k], x[k])));
        if (match !== undefined) o = { value: match };
      } else if (oldArr && type === 'set') {
        if (oldArr.some((y) => deepEqual(y, x))) o = { value: x };
      }
      celAt(x, o, items, item(path, i), out);
    });
  }
}

/** Run CEL rules over `obj` (or only its `only` subtree); `old` enables transition rules. */
export function validateCel(
  obj: Json,
  old: Json | undefined,
  root: Schema | undefined,
  only?: string,
): FieldError[] {
  const out: FieldError[] = [];
  if (!root) return out;
  if (only) {
    const s = root.properties?.[only];
    if (s && Object.hasOwn(obj, only)) {
      celAt(obj[only], old && Object.hasOwn(old, only) ? { value: old[only] } : undefined, s, only, out);
    }
    return out;
  }
  celAt(obj, old ? { value: old } : undefined, root, '', out);
  return out;
}
