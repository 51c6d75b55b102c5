import type { FieldError } from './errors.ts';

/**
 * ObjectMeta validation as kube-apiserver's apimachinery does it (names, labels, annotations),
 * with its messages.
 */

const DNS1123_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_SUBDOMAIN = `${DNS1123_LABEL}(\\.${DNS1123_LABEL})*`;
const LABEL_VALUE = '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?';
const QUALIFIED_NAME_PART = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';

const reSubdomain = new RegExp(`^${DNS1123_SUBDOMAIN}$`);
const reLabel = new RegExp(`^${DNS1123_LABEL}$`);
const reLabelValue = new RegExp(`^${LABEL_VALUE}$`);
const reNamePart = new RegExp(`^${QUALIFIED_NAME_PART}$`);

const SUBDOMAIN_MSG = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '${DNS1123_SUBDOMAIN}')`;
const LABEL_MSG = `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '${DNS1123_LABEL}')`;
const LABEL_VALUE_MSG = `a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '${LABEL_VALUE}')`;
const NAME_PART_MSG = `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '${QUALIFIED_NAME_PART}')`;

/** DNS-1123 subdomain errors (names of custom resources and most objects). */
export function subdomainErrors(value: string): string[] {
  const out: string[] = [];
  if (value.length > 253) out.push('must be no more than 253 bytes');
  if (!reSubdomain.test(value)) out.push(SUBDOMAIN_MSG);
  return out;
}

/** DNS-1123 label errors (namespace names). */
export function labelNameErrors(value: string): string[] {
  const out: string[] = [];
  if (value.length > 63) out.push('must be no more than 63 bytes');
  if (!reLabel.test(value)) out.push(LABEL_MSG);
  return out;
}

function qualifiedNameErrors(key: string): string[] {
  const parts = key.split('/');
  let name = key;
  const out: string[] = [];
  if (parts.length === 2) {
    const [prefix, n] = parts as [string, string];
    name = n;
    if (prefix.length === 0) out.push('prefix part must be non-empty');
    else for (const m of subdomainErrors(prefix)) out.push(`prefix part ${m}`);
  } else if (parts.length > 2) {
    return [
      `a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '${QUALIFIED_NAME_PART}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  if (name.length === 0) out.push('name part must be non-empty');
  else if (name.length > 63) out.push('name part must be no more than 63 bytes');
  if (name.length > 0 && !reNamePart.test(name)) out.push(NAME_PART_MSG);
  return out;
}

/** Label keys and values (`metadata.labels`). */
export function labelsErrors(labels: unknown, path: string): FieldError[] {
  const out: FieldError[] = [];
  if (labels === undefined || labels === null) return out;
  if (typeof labels !== 'object' || Array.isArray(labels)) return out;
  for (const [k, v] of Object.entries(labels as Record<string, unknown>)) {
    for (const m of qualifiedNameErrors(k))
      out.push({ type: 'FieldValueInvalid', field: path, value: k, detail: m });
    if (typeof v !== 'string') continue;
    if (v.length > 63)
      out.push({ type: 'FieldValueInvalid', field: path, value: v, detail: 'must be no more than 63 bytes' });
    if (!reLabelValue.test(v))
      out.push({ type: 'FieldValueInvalid', field: path, value: v, detail: LABEL_VALUE_MSG });
  }
  return out;
}

/** Annotation keys and the 256 KiB total. */
export function annotationsErrors(annotations: unknown, path: string): FieldError[] {
  const out: FieldError[] = [];
  if (!annotations || typeof annotations !== 'object' || Array.isArray(annotations)) return out;
  let total = 0;
  for (const [k, v] of Object.entries(annotations as Record<string, unknown>)) {
    for (const m of qualifiedNameErrors(k.toLowerCase()))
      out.push({ type: 'FieldValueInvalid', field: path, value: k, detail: m });
    total += k.length + (typeof v === 'string' ? v.length : 0);
  }
  if (total > 256 * 1024) {
    out.push({
      type: 'FieldValueTooLong',
      field: path,
      value: '',
      detail: `may not be more than ${256 * 1024} bytes`,
    });
  }
  return out;
}

/** `metadata` of a created or updated object: name (subdomain or label), labels, annotations. */
export function objectMetaErrors(
  meta: Record<string, unknown>,
  nameRule: 'subdomain' | 'label',
): FieldError[] {
  const out: FieldError[] = [];
  const name = meta.name;
  if (name === undefined || name === '') {
    out.push({
      type: 'FieldValueRequired',
      field: 'metadata.name',
      value: '',
      detail: 'name or generateName is required',
    });
  } else if (typeof name === 'string') {
    const msgs = nameRule === 'label' ? labelNameErrors(name) : subdomainErrors(name);
    for (const m of msgs)
      out.push({ type: 'FieldValueInvalid', field: 'metadata.name', value: name, detail: m });
  }
  out.push(...labelsErrors(meta.labels, 'metadata.labels'));
  out.push(...annotationsErrors(meta.annotations, 'metadata.annotations'));
  return out;
}
