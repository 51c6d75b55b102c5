import { randomBytes } from 'node:crypto';
import { isObj, type Json } from '../../lib/json.ts';
import { type FieldError, invalid } from './errors.ts';
import { objectMetaErrors } from './meta.ts';
import type { ResourceDef } from './registry.ts';
import { CEL_BLOCKED, hasBlockingErr, type Schema, validateCel, validateSchema } from './schema.ts';
import { meta } from './store.ts';

/**
 * What differs by kind, as the real server's registry strategies hold it: selectable fields,
 * generated names, PrepareForCreate of the built-in kinds, what bumps `generation`, and
 * validation (metadata, the built-in kinds' rules, the schema and its CEL rules).
 */

export function schemaOf(def: ResourceDef, version: string): Schema | undefined {
  return def.versions.find((v) => v.name === version)?.schema;
}

/** Whether `status` is a subresource at `version`. */
export function statusSub(def: ResourceDef, version: string): boolean {
  return def.versions.find((v) => v.name === version)?.status ?? false;
}

/** Field selectors each kind supports (metadata.name / metadata.namespace everywhere, like the real server). */
export function selectableFields(def: ResourceDef): string[] {
  const base = ['metadata.name', 'metadata.namespace'];
  if (def.builtin === 'events') {
    return [
      ...base,
      'involvedObject.kind',
      'involvedObject.namespace',
      'involvedObject.name',
      'involvedObject.uid',
      'involvedObject.apiVersion',
      'involvedObject.resourceVersion',
      'involvedObject.fieldPath',
      'reason',
      'reportingComponent',
      'source',
      'type',
    ];
  }
  if (def.builtin === 'namespaces') return [...base, 'status.phase'];
  if (def.builtin === 'pods') return [...base, 'spec.nodeName', 'spec.restartPolicy', 'status.phase'];
  return base;
}

const GENERATE_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

export function generateSuffix(): string {
  const bytes = randomBytes(5);
  let s = '';
  for (const b of bytes) s += GENERATE_ALPHABET[b % GENERATE_ALPHABET.length];
  return s;
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObj(a) && isObj(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

/** Everything but metadata (and status, when it is a subresource): what bumps `generation`. */
export function specPart(obj: Json, statusSub: boolean): Json {
  const { metadata: _m, apiVersion: _a, kind: _k, ...rest } = obj;
  if (statusSub) delete rest.status;
  return rest;
}

/** Schema + CEL + metadata + kind validation (the strategy's Validate / ValidateUpdate). */
export function validate(
  def: ResourceDef,
  version: string,
  obj: Json,
  old: Json | undefined,
  only?: 'status',
): void {
  const errs: FieldError[] = [];
  const m = meta(obj);
  if (!only) {
    if (obj.kind !== def.kind) {
      errs.push({
        type: 'FieldValueInvalid',
        field: 'kind',
        value: obj.kind,
        detail: `must be ${def.kind}`,
      });
    }
    errs.push(...objectMetaErrors(m, def.builtin === 'namespaces' ? 'label' : 'subdomain'));
    if (old) {
      const om = meta(old);
      if (m.namespace !== om.namespace) {
        errs.push({
          type: 'FieldValueInvalid',
          field: 'metadata.namespace',
          value: m.namespace ?? '',
          detail: 'field is immutable',
        });
      }
    }
  }
  if (def.builtin) errs.push(...builtinErrors(def, obj));
  const schema = schemaOf(def, version);
  if (schema) {
    errs.push(...validateSchema(obj, schema, only));
    if (hasBlockingErr(errs)) errs.push(CEL_BLOCKED);
    else errs.push(...validateCel(obj, old, schema, only));
  }
  if (errs.length > 0) {
    const kind = obj.kind === def.kind || typeof obj.kind !== 'string' ? def.kind : obj.kind;
    throw invalid(def.group, kind, String(m.name ?? ''), errs);
  }
}

export function prepareBuiltinCreate(def: ResourceDef, obj: Json, now: string): void {
  const m = meta(obj);
  if (def.builtin === 'namespaces') {
    m.labels = { ...((m.labels as Json | undefined) ?? {}), 'kubernetes.io/metadata.name': m.name };
    obj.spec = { finalizers: ['kubernetes'] };
    obj.status = { phase: 'Active' };
  } else if (def.builtin === 'pods') {
    // The pod strategy's PrepareForCreate: a new pod is Pending (the simulated controllers create
    // theirs with the status they need, see pods.ts).
    if (!isObj(obj.status)) obj.status = { phase: 'Pending', qosClass: 'BestEffort' };
  } else if (def.builtin === 'events') {
    obj.source ??= {};
    obj.firstTimestamp ??= null;
    obj.lastTimestamp ??= null;
    obj.eventTime ??= null;
    obj.reportingComponent ??= '';
    obj.reportingInstance ??= '';
    if (!isObj(obj.involvedObject)) obj.involvedObject = {};
  } else if (def.builtin === 'customresourcedefinitions') {
    const spec = obj.spec as Json;
    const names = isObj(spec?.names) ? spec.names : {};
    const versions = Array.isArray(spec?.versions) ? (spec.versions as Json[]) : [];
    obj.status = {
      acceptedNames: names,
      conditions: [
        {
          type: 'NamesAccepted',
          status: 'True',
          lastTransitionTime: now,
          reason: 'NoConflicts',
          message: 'no conflicts found',
        },
        {
          type: 'Established',
          status: 'True',
          lastTransitionTime: now,
          reason: 'InitialNamesAccepted',
          message: 'the initial names have been accepted',
        },
      ],
      storedVersions: versions.filter((v) => v.storage === true).map((v) => String(v.name)),
    };
  }
}

function builtinErrors(def: ResourceDef, obj: Json): FieldError[] {
  const errs: FieldError[] = [];
  if (def.builtin === 'events') {
    const io = obj.involvedObject as Json;
    const ns = meta(obj).namespace;
    if (io.namespace !== undefined && io.namespace !== ns) {
      errs.push({
        type: 'FieldValueInvalid',
        field: 'involvedObject.namespace',
        value: io.namespace,
        detail: 'does not match event.namespace',
      });
    }
  }
  if (def.builtin === 'customresourcedefinitions') {
    const spec = obj.spec;
    if (
      !isObj(spec) ||
      typeof spec.group !== 'string' ||
      !isObj(spec.names) ||
      !Array.isArray(spec.versions)
    ) {
      errs.push({ type: 'FieldValueRequired', field: 'spec', value: '', detail: '' });
    } else if (meta(obj).name !== `${String(spec.names.plural)}.${spec.group}`) {
      errs.push({
        type: 'FieldValueInvalid',
        field: 'metadata.name',
        value: meta(obj).name,
        detail: `must be spec.names.plural+"."+spec.group`,
      });
    }
  }
  return errs;
}
