import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Ajv, type ErrorObject, type SchemaObject, type SchemaValidateFunction } from 'ajv';
import { parseAllDocuments } from 'yaml';
import { CRD_ROOT } from './tiers.ts';

/**
 * Validate objects against a real CustomResourceDefinition's `openAPIV3Schema`, the way a
 * kube-apiserver with strict field validation would, minus CEL.
 *
 * Kubernetes structural schemas are not plain JSON Schema; the conversion below:
 * - objects with `properties` (or with neither `properties` nor `additionalProperties`) reject
 *   unknown fields (`additionalProperties: false`) unless `x-kubernetes-preserve-unknown-fields`;
 *   the apiserver prunes or (strict) rejects them, and a silently pruned field is a bug either way;
 * - `x-kubernetes-int-or-string` → integer or string; `nullable` → also null;
 * - `x-kubernetes-embedded-resource` → apiVersion/kind/metadata allowed;
 * - `x-kubernetes-list-type: map` → entries unique by their keys; `set` → unique items;
 * - `format` int32/int64 are range-checked, date-time is checked, others are accepted unchecked;
 * - `x-kubernetes-validations` (CEL) are NOT evaluated: they are collected in `celRules` so a test
 *   can say what was left to the real-apiserver tier.
 * `metadata` is validated here independently of the CRD (the apiserver validates ObjectMeta itself):
 * name rules, namespace, label and annotation keys and values.
 */

export interface CelRule {
  /** Where the rule sits, e.g. `.spec.trainer` or `.spec.trainer.env[*]`. */
  path: string;
  rule: string;
  message: string;
  /** Uses `oldSelf`: only evaluated on update, irrelevant to a create. */
  transition: boolean;
}

/** `rfc1035`: TrainJob (CEL) and Training Operator v1 kinds (webhook); `rfc1123`: any other object. */
export type NameRule = 'rfc1035' | 'rfc1123';

export interface CrdValidator {
  (obj: unknown): string[];
  readonly crdPath: string;
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  /** CEL rules found in the schema and not evaluated. */
  readonly celRules: readonly CelRule[];
  /** Formats accepted without checking. */
  readonly uncheckedFormats: readonly string[];
}

interface Crd {
  kind: 'CustomResourceDefinition';
  spec: {
    group: string;
    names: { kind: string; plural: string };
    versions: {
      name: string;
      served: boolean;
      storage?: boolean;
      schema?: { openAPIV3Schema?: SchemaObject };
    }[];
  };
}

/** Parse a CRD YAML under `CRD_ROOT`, e.g. `trainer-v2.3.0/trainer.kubeflow.org_trainjobs.yaml`. */
export function loadCrd(crdRelPath: string): Crd {
  const text = readFileSync(resolve(CRD_ROOT, crdRelPath), 'utf8');
  const docs = parseAllDocuments(text)
    .map((d) => d.toJS() as unknown)
    .filter((d): d is Crd => (d as { kind?: unknown } | null)?.kind === 'CustomResourceDefinition');
  if (docs.length !== 1)
    throw new Error(`${crdRelPath}: expected one CustomResourceDefinition, found ${docs.length}`);
  return docs[0]!;
}

// Kubernetes' own formats (k8s.io/apimachinery/pkg/util/validation), written out here rather than
// imported from lib/ so the code under test cannot lend the checker its bugs.
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const TOTAL_ANNOTATION_BYTES = 256 * 1024;

const OBJECT_META_FIELDS = new Set([
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

/** Errors for a label/annotation key: `[prefix/]name`, prefix a DNS subdomain ≤ 253, name ≤ 63. */
export function qualifiedNameErrors(key: string): string[] {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  const errors: string[] = [];
  if (
    prefix !== undefined &&
    (prefix.length === 0 || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))
  ) {
    errors.push(`key ${JSON.stringify(key)}: prefix must be a DNS subdomain of at most 253 characters`);
  }
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME.test(name)) {
    errors.push(`key ${JSON.stringify(key)}: name part must be 1-63 alphanumerics, '-', '_' or '.'`);
  }
  return errors;
}

/** Errors for a label value: ≤ 63 characters, alphanumeric at both ends, `-_.` inside. */
export function labelValueErrors(value: unknown): string[] {
  if (typeof value !== 'string') return ['must be a string'];
  if (value.length > 63) return [`value ${JSON.stringify(value)} is longer than 63 characters`];
  return LABEL_VALUE.test(value) ? [] : [`value ${JSON.stringify(value)} is not a valid label value`];
}

function stringMapErrors(path: string, map: unknown, values: 'label' | 'annotation'): string[] {
  if (map === undefined) return [];
  if (map === null || typeof map !== 'object' || Array.isArray(map)) return [`${path}: must be an object`];
  const errors: string[] = [];
  let bytes = 0;
  for (const [k, v] of Object.entries(map)) {
    errors.push(...qualifiedNameErrors(k).map((e) => `${path}: ${e}`));
    if (values === 'label')
      errors.push(...labelValueErrors(v).map((e) => `${path}[${JSON.stringify(k)}]: ${e}`));
    else if (typeof v !== 'string') errors.push(`${path}[${JSON.stringify(k)}]: must be a string`);
    else bytes += Buffer.byteLength(k) + Buffer.byteLength(v);
  }
  if (bytes > TOTAL_ANNOTATION_BYTES)
    errors.push(`${path}: total size ${bytes} exceeds ${TOTAL_ANNOTATION_BYTES} bytes`);
  return errors;
}

/** ObjectMeta checks the apiserver makes for every object, whatever its CRD says. */
export function objectMetaErrors(meta: unknown, nameRule: NameRule): string[] {
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta))
    return ['metadata: must be an object'];
  const m = meta as Record<string, unknown>;
  const errors: string[] = [];
  for (const k of Object.keys(m)) if (!OBJECT_META_FIELDS.has(k)) errors.push(`metadata: unknown field ${k}`);
  const name = m.name;
  if (typeof name !== 'string' || name.length === 0) {
    errors.push('metadata.name: is required');
  } else if (nameRule === 'rfc1035') {
    if (name.length > 63) errors.push(`metadata.name: ${JSON.stringify(name)} is longer than 63 characters`);
    if (!DNS1035_LABEL.test(name))
      errors.push(`metadata.name: ${JSON.stringify(name)} is not an RFC 1035 label`);
  } else {
    if (name.length > 253)
      errors.push(`metadata.name: ${JSON.stringify(name)} is longer than 253 characters`);
    if (!DNS1123_SUBDOMAIN.test(name))
      errors.push(`metadata.name: ${JSON.stringify(name)} is not a DNS subdomain`);
  }
  if (m.namespace !== undefined) {
    const ns = m.namespace;
    if (typeof ns !== 'string' || ns.length > 63 || !DNS1123_LABEL.test(ns)) {
      errors.push(`metadata.namespace: ${JSON.stringify(ns)} is not a DNS label`);
    }
  }
  errors.push(...stringMapErrors('metadata.labels', m.labels, 'label'));
  errors.push(...stringMapErrors('metadata.annotations', m.annotations, 'annotation'));
  return errors;
}

// ---------------------------------------------------------------------------------------------
// structural schema → JSON Schema

const KNOWN_FORMATS = new Set(['int32', 'int64', 'date-time']);

interface ConvertState {
  celRules: CelRule[];
  formats: Set<string>;
}

const isIntOrStringAnyOf = (anyOf: unknown): boolean =>
  Array.isArray(anyOf) &&
  anyOf.length === 2 &&
  anyOf.some((s) => (s as SchemaObject).type === 'integer') &&
  anyOf.some((s) => (s as SchemaObject).type === 'string');

/**
 * Convert one schema node. `structural` is false inside anyOf/allOf/oneOf/not, where Kubernetes
 * allows only value validations: closing objects there would reject valid input.
 */
function convert(node: SchemaObject, path: string, structural: boolean, st: ConvertState): SchemaObject {
  const out: SchemaObject = {};
  const preserve = node['x-kubernetes-preserve-unknown-fields'] === true;
  for (const [key, value] of Object.entries(node)) {
    switch (key) {
      case 'x-kubernetes-validations':
        for (const r of value as { rule: string; message?: string; messageExpression?: string }[]) {
          st.celRules.push({
            path: path || '.',
            rule: r.rule,
            message: r.message ?? r.messageExpression ?? '',
            transition: /\boldSelf\b/.test(r.rule),
          });
        }
        break;
      case 'x-kubernetes-preserve-unknown-fields':
      case 'x-kubernetes-map-type':
      case 'x-kubernetes-list-map-keys':
      case 'x-kubernetes-embedded-resource':
      case 'x-kubernetes-int-or-string':
      case 'nullable':
        break; // handled below
      case 'x-kubernetes-list-type':
        if (value === 'set') out.uniqueItems = true;
        if (value === 'map' && Array.isArray(node['x-kubernetes-list-map-keys'])) {
          out.k8sListMapKeys = node['x-kubernetes-list-map-keys'];
        }
        break;
      case 'properties':
        out.properties = Object.fromEntries(
          Object.entries(value as Record<string, SchemaObject>).map(([k, v]) => [
            k,
            convert(v, `${path}.${k}`, true, st),
          ]),
        );
        break;
      case 'additionalProperties':
        out.additionalProperties =
          typeof value === 'boolean' ? value : convert(value as SchemaObject, `${path}{*}`, true, st);
        break;
      case 'items':
        out.items = convert(value as SchemaObject, `${path}[*]`, true, st);
        break;
      case 'anyOf':
      case 'allOf':
      case 'oneOf':
        if (key === 'anyOf' && node['x-kubernetes-int-or-string'] === true && isIntOrStringAnyOf(value))
          break;
        out[key] = (value as SchemaObject[]).map((s) => convert(s, path, false, st));
        break;
      case 'not':
        out.not = convert(value as SchemaObject, path, false, st);
        break;
      case 'format':
        st.formats.add(value as string);
        out.format = value;
        break;
      default:
        if (key.startsWith('x-kubernetes-')) throw new Error(`${path}: unhandled schema extension ${key}`);
        out[key] = value;
    }
  }
  if (node['x-kubernetes-int-or-string'] === true) out.type = ['integer', 'string'];
  if (node['x-kubernetes-embedded-resource'] === true) {
    out.type = 'object';
    out.properties = {
      apiVersion: { type: 'string' },
      kind: { type: 'string' },
      metadata: { type: 'object' },
      ...(out.properties as Record<string, SchemaObject> | undefined),
    };
  }
  if (node.nullable === true && out.type !== undefined) {
    out.type = [...(Array.isArray(out.type) ? out.type : [out.type]), 'null'];
  }
  if (structural && out.type === 'object' && !preserve && out.additionalProperties === undefined) {
    // An object with no properties and no additionalProperties keeps no fields at all.
    out.additionalProperties = false;
  }
  return out;
}

/** CRD patterns are Go RE2; the one RE2-only construct in the CRDs is a leading `(?i)` (Kueue). */
const goRegExp = Object.assign(
  (pattern: string, flags: string): RegExp => {
    const caseless = /^(\^?)\(\?i\)/.exec(pattern);
    return caseless
      ? new RegExp(caseless[1] + pattern.slice(caseless[0].length), `${flags}i`)
      : new RegExp(pattern, flags);
  },
  { code: 'goRegExp' },
);

let sharedAjv: Ajv | undefined;

function ajv(): Ajv {
  if (sharedAjv) return sharedAjv;
  const a = new Ajv({
    allErrors: true,
    strict: true,
    strictTypes: false,
    strictTuples: false,
    strictRequired: false,
    allowUnionTypes: true,
    code: { regExp: goRegExp },
  });
  a.addFormat('int32', {
    type: 'number',
    validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n <= 2 ** 31 - 1,
  });
  a.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  a.addFormat('date-time', RFC3339);
  const listMapKeys: SchemaValidateFunction = (keys: string[], data: unknown[]) => {
    const seen = new Set<string>();
    for (const item of data) {
      const tuple = JSON.stringify(keys.map((k) => (item as Record<string, unknown> | null)?.[k]));
      if (seen.has(tuple)) {
        listMapKeys.errors = [
          {
            keyword: 'k8sListMapKeys',
            message: `has a duplicate entry for key (${keys.join(', ')}) = ${tuple}`,
          },
        ];
        return false;
      }
      seen.add(tuple);
    }
    return true;
  };
  a.addKeyword({
    keyword: 'k8sListMapKeys',
    type: 'array',
    schemaType: 'array',
    errors: true,
    validate: listMapKeys,
  });
  sharedAjv = a;
  return a;
}

function formatError(e: ErrorObject): string {
  const where = e.instancePath ? e.instancePath.slice(1).replaceAll('/', '.') : '(root)';
  const p = e.params as Record<string, unknown>;
  let detail = '';
  if (e.keyword === 'additionalProperties') detail = `: ${String(p.additionalProperty)}`;
  if (e.keyword === 'enum') detail = `: ${JSON.stringify(p.allowedValues)}`;
  return `${where}: ${e.message ?? e.keyword}${detail}`;
}

const cache = new Map<string, CrdValidator>();

/**
 * A validator for the served version (`v1alpha1`, `v1`, … — the storage version when several are
 * served, or `version` when given) of the CRD at `crdRelPath` under `CRD_ROOT`.
 * Returns the errors, empty when the object would be accepted (CEL aside).
 */
export function validatorFor(
  crdRelPath: string,
  opts: { version?: string; nameRule?: NameRule } = {},
): CrdValidator {
  const cacheKey = `${crdRelPath}@${opts.version ?? ''}@${opts.nameRule ?? ''}`;
  const cached = cache.get(cacheKey);
  if (cached) return cached;

  const crd = loadCrd(crdRelPath);
  const served = crd.spec.versions.filter((v) => v.served);
  const version = opts.version
    ? served.find((v) => v.name === opts.version)
    : (served.find((v) => v.storage) ?? served[0]);
  const root = version?.schema?.openAPIV3Schema;
  if (!version || !root)
    throw new Error(`${crdRelPath}: no served version ${opts.version ?? ''} with a schema`);

  const st: ConvertState = { celRules: [], formats: new Set() };
  const converted = convert(root, '', true, st);
  // ObjectMeta is validated by objectMetaErrors below, not by the CRD's `{type: object}` stub.
  (converted.properties as Record<string, SchemaObject>).metadata = { type: 'object' };
  const a = ajv();
  const uncheckedFormats = [...st.formats].filter((f) => !KNOWN_FORMATS.has(f));
  for (const f of uncheckedFormats) if (!a.formats[f]) a.addFormat(f, true);
  const check = a.compile(converted);

  const { group } = crd.spec;
  const { kind, plural } = crd.spec.names;
  const nameRule: NameRule =
    opts.nameRule ?? (group === 'trainer.kubeflow.org' || group === 'kubeflow.org' ? 'rfc1035' : 'rfc1123');
  const apiVersion = `${group}/${version.name}`;

  const validate = (obj: unknown): string[] => {
    const errors: string[] = [];
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return ['(root): must be an object'];
    const o = obj as Record<string, unknown>;
    if (o.apiVersion !== apiVersion)
      errors.push(`apiVersion: must be ${apiVersion}, got ${JSON.stringify(o.apiVersion)}`);
    if (o.kind !== kind) errors.push(`kind: must be ${kind}, got ${JSON.stringify(o.kind)}`);
    errors.push(...objectMetaErrors(o.metadata, nameRule));
    if (!check(obj)) errors.push(...(check.errors ?? []).map(formatError));
    return errors;
  };
  const validator: CrdValidator = Object.assign(validate, {
    crdPath: crdRelPath,
    group,
    version: version.name,
    kind,
    plural,
    celRules: st.celRules,
    uncheckedFormats,
  });
  cache.set(cacheKey, validator);
  return validator;
}
