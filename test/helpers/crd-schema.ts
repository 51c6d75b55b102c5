import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseYamlStream } from '../../local/simulator/crds.ts';
import { errorString } from '../../local/simulator/errors.ts';
import { OBJECT_META_FIELDS, prune, type Schema, validateSchema } from '../../local/simulator/schema.ts';
import { CRD_ROOT } from './tiers.ts';

/**
 * Validate objects against a real CustomResourceDefinition's `openAPIV3Schema`, the way a
 * kube-apiserver with strict field validation would, minus CEL — with the cluster simulator's own
 * structural-schema code (local/simulator/schema.ts), so the builder's unit tests and the simulator
 * the integration and contract tiers run against accept and reject the same objects, with the
 * apiserver's messages:
 * - unknown fields (pruned by the apiserver, rejected under strict field validation) →
 *   `unknown field "spec.x"`, unless `x-kubernetes-preserve-unknown-fields`;
 * - value validations (type, int-or-string, nullable, enum, pattern, bounds, required,
 *   `x-kubernetes-list-type` set/map uniqueness) → `field: Invalid value: …` as the apiserver says it;
 * - on top, what the Go types behind the CRD would fail to decode: `format` int32/int64 out of range
 *   and a malformed date-time; other formats are accepted unchecked;
 * - `x-kubernetes-validations` (CEL) are NOT evaluated: they are collected in `celRules` so a test
 *   can say what was left to the simulator and real-apiserver tiers.
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
      schema?: { openAPIV3Schema?: Schema };
    }[];
  };
}

/** Parse a CRD YAML under `CRD_ROOT`, e.g. `trainer-v2.3.0/trainer.kubeflow.org_trainjobs.yaml`. */
export function loadCrd(crdRelPath: string): Crd {
  const text = readFileSync(resolve(CRD_ROOT, crdRelPath), 'utf8');
  const docs = parseYamlStream(text).filter(
    (d): d is Crd => (d as { kind?: unknown } | null)?.kind === 'CustomResourceDefinition',
  );
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
// the CRD's schema, through the simulator's validator

const KNOWN_FORMATS = new Set(['int32', 'int64', 'date-time']);

/** The CEL rules and formats a schema holds (paths as `.spec.trainer.env[*]`). */
function collect(node: Schema, path: string, celRules: CelRule[], formats: Set<string>): void {
  for (const r of node['x-kubernetes-validations'] ?? []) {
    celRules.push({
      path: path || '.',
      rule: r.rule,
      message: r.message ?? r.messageExpression ?? '',
      transition: /\boldSelf\b/.test(r.rule),
    });
  }
  if (node.format) formats.add(node.format);
  for (const [k, v] of Object.entries(node.properties ?? {})) collect(v, `${path}.${k}`, celRules, formats);
  if (typeof node.additionalProperties === 'object')
    collect(node.additionalProperties, `${path}{*}`, celRules, formats);
  if (node.items) collect(node.items, `${path}[*]`, celRules, formats);
  for (const sub of [...(node.anyOf ?? []), ...(node.allOf ?? []), ...(node.oneOf ?? [])])
    collect(sub, path, celRules, formats);
  if (node.not) collect(node.not, path, celRules, formats);
}

function formatOk(format: string, v: unknown): boolean {
  if (format === 'int32')
    return typeof v !== 'number' || (Number.isInteger(v) && v >= -(2 ** 31) && v <= 2 ** 31 - 1);
  if (format === 'int64') return typeof v !== 'number' || Number.isSafeInteger(v);
  if (format === 'date-time') return typeof v !== 'string' || RFC3339.test(v);
  return true;
}

/** Values the Go types behind the CRD could not hold (the formats the apiserver leaves unchecked). */
function formatErrors(v: unknown, s: Schema, path: string, out: string[]): void {
  if (v === null || v === undefined) return;
  if (s.format && !formatOk(s.format, v))
    out.push(`${path}: Invalid value: ${JSON.stringify(v)}: must be of format ${s.format}`);
  if (Array.isArray(v)) {
    if (s.items) for (const [i, x] of v.entries()) formatErrors(x, s.items, `${path}[${i}]`, out);
  } else if (typeof v === 'object') {
    for (const [k, x] of Object.entries(v)) {
      const ps =
        s.properties?.[k] ??
        (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined);
      if (ps) formatErrors(x, ps, path ? `${path}.${k}` : k, out);
    }
  }
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

  const celRules: CelRule[] = [];
  const formats = new Set<string>();
  collect(root, '', celRules, formats);
  const uncheckedFormats = [...formats].filter((f) => !KNOWN_FORMATS.has(f));

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
    // ObjectMeta is checked above; the schema's `metadata` stub is left out of both passes.
    const { metadata: _m, ...body } = structuredClone(o);
    errors.push(...prune(body, root).map((f) => `unknown field ${JSON.stringify(f)}`));
    errors.push(...validateSchema(body, root).map(errorString));
    formatErrors(body, root, '', errors);
    return errors;
  };
  const validator: CrdValidator = Object.assign(validate, {
    crdPath: crdRelPath,
    group,
    version: version.name,
    kind,
    plural,
    celRules,
    uncheckedFormats,
  });
  cache.set(cacheKey, validator);
  return validator;
}
