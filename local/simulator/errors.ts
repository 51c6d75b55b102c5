/**
 * Kubernetes `Status` error bodies and `field.Error` formatting, byte-compatible with what
 * kube-apiserver v1.35 writes (checked side by side against a real apiserver with the same CRDs:
 * see test/contract/simulator.test.ts). Anything here that looks odd (the `<nil>` field of root
 * CEL rules, `kind` being the resource in NotFound but the Kind in Invalid) is what the real
 * server does.
 */

export type CauseType =
  | 'FieldValueInvalid'
  | 'FieldValueRequired'
  | 'FieldValueNotSupported'
  | 'FieldValueTypeInvalid'
  | 'FieldValueTooLong'
  | 'FieldValueTooMany'
  | 'FieldValueDuplicate'
  | 'FieldValueForbidden'
  | 'FieldValueNotFound'
  | 'InternalError';

/** Marker for field errors whose value the real server omits from the message. */
export const OMIT = Symbol('omit');

/** One `field.Error`: the path (`<nil>` for the object root), its type, the bad value and a detail. */
export interface FieldError {
  type: CauseType;
  field: string;
  value?: unknown;
  detail?: string;
}

export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure' | 'Success';
  message?: string;
  reason?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
  code: number;
}

/** An error the HTTP layer turns into a response: a Status body, or plain text (the real 404 for unknown paths). */
export class ApiError extends Error {
  readonly code: number;
  readonly body: StatusBody | string;
  readonly headers: Record<string, string>;
  constructor(code: number, body: StatusBody | string, headers: Record<string, string> = {}) {
    super(typeof body === 'string' ? body : (body.message ?? body.reason ?? String(code)));
    this.code = code;
    this.body = body;
    this.headers = headers;
  }
}

/** Go's `%q` for a string (close enough: JSON escaping is a subset of Go's for printable text). */
export function goQuote(s: string): string {
  return JSON.stringify(s);
}

function goValue(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return goQuote(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  // Composite values print as JSON (Go's json.Marshal: map keys sorted).
  return JSON.stringify(sortKeys(value));
}

/** A copy with object keys sorted, as Go's encoding/json writes maps. */
export function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeys((v as Record<string, unknown>)[k]);
    return out;
  }
  return v;
}

const TYPE_TEXT: Record<CauseType, string> = {
  FieldValueInvalid: 'Invalid value',
  FieldValueRequired: 'Required value',
  FieldValueNotSupported: 'Unsupported value',
  FieldValueTypeInvalid: 'Invalid value',
  FieldValueTooLong: 'Too long',
  FieldValueTooMany: 'Too many',
  FieldValueDuplicate: 'Duplicate value',
  FieldValueForbidden: 'Forbidden',
  FieldValueNotFound: 'Not found',
  InternalError: 'Internal error',
};

/** `field.Error.ErrorBody()`. */
export function errorBody(e: FieldError): string {
  let s: string;
  if (
    e.type === 'FieldValueRequired' ||
    e.type === 'FieldValueForbidden' ||
    e.type === 'FieldValueTooLong' ||
    e.type === 'InternalError' ||
    e.value === OMIT
  ) {
    s = TYPE_TEXT[e.type];
  } else {
    s = `${TYPE_TEXT[e.type]}: ${goValue(e.value)}`;
  }
  if (e.detail) s += `: ${e.detail}`;
  return s;
}

/** `field.Error.Error()`. */
export function errorString(e: FieldError): string {
  return `${e.field}: ${errorBody(e)}`;
}

function status(code: number, reason: string, message: string, details?: StatusBody['details']): StatusBody {
  const body: StatusBody = details
    ? { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, details, code }
    : { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
  return body;
}

/** Resource of an object, for messages: `trainjobs.trainer.kubeflow.org`, or `namespaces` for the core group. */
export interface QualifiedResource {
  group: string;
  resource: string;
}

export const qualified = (r: QualifiedResource): string =>
  r.group ? `${r.resource}.${r.group}` : r.resource;

function details(r: QualifiedResource, name: string): NonNullable<StatusBody['details']> {
  return r.group ? { name, group: r.group, kind: r.resource } : { name, kind: r.resource };
}

export const notFound = (r: QualifiedResource, name: string): ApiError =>
  new ApiError(404, status(404, 'NotFound', `${qualified(r)} ${goQuote(name)} not found`, details(r, name)));

export const alreadyExists = (r: QualifiedResource, name: string): ApiError =>
  new ApiError(
    409,
    status(409, 'AlreadyExists', `${qualified(r)} ${goQuote(name)} already exists`, details(r, name)),
  );

export const conflict = (r: QualifiedResource, name: string, why: string): ApiError =>
  new ApiError(
    409,
    status(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualified(r)} ${goQuote(name)}: ${why}`,
      details(r, name),
    ),
  );

export const CONFLICT_MODIFIED =
  'the object has been modified; please apply your changes to the latest version and try again';

export const badRequest = (message: string): ApiError =>
  new ApiError(400, status(400, 'BadRequest', message));

export const methodNotAllowed = (method: string): ApiError =>
  new ApiError(
    405,
    status(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`, {}),
    { Allow: method },
  );

export const unsupportedMediaType = (accepted: string[]): ApiError =>
  new ApiError(
    415,
    status(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
    ),
  );

/** The real server answers unknown groups, versions and resources with this plain-text body. */
export const pageNotFound = (): ApiError => new ApiError(404, '404 page not found\n');

/** `apierrors.NewInvalid`: `kindOrResource` is the Kind for schema errors and the resource for some metadata checks. */
export function invalid(group: string, kindOrResource: string, name: string, errs: FieldError[]): ApiError {
  const causes = errs.map((e) => ({ reason: e.type, message: errorBody(e), field: e.field }));
  const qualifiedKind = group && kindOrResource ? `${kindOrResource}.${group}` : kindOrResource;
  // ToAggregate drops duplicate messages.
  const messages = [...new Set(errs.map(errorString))];
  const agg = messages.length === 0 ? '' : messages.length === 1 ? messages[0] : `[${messages.join(', ')}]`;
  const message = agg
    ? `${qualifiedKind} ${goQuote(name)} is invalid: ${agg}`
    : `${qualifiedKind} ${goQuote(name)} is invalid`;
  const d: NonNullable<StatusBody['details']> = { name, group, kind: kindOrResource, causes };
  if (!name) delete d.name;
  if (!group) delete d.group;
  if (!kindOrResource) delete d.kind;
  return new ApiError(422, status(422, 'Invalid', message, d));
}

export const forbidden = (
  r: QualifiedResource,
  name: string,
  why: string,
  causes?: StatusCause[],
): ApiError => {
  const d = details(r, name);
  if (causes) d.causes = causes;
  return new ApiError(
    403,
    status(403, 'Forbidden', `${qualified(r)} ${goQuote(name)} is forbidden: ${why}`, d),
  );
};

/** A validating admission webhook's denial, as the apiserver relays it. */
export function webhookDenied(webhook: string, code: number, reason: string, message: string): ApiError {
  return new ApiError(
    code,
    status(code, reason, `admission webhook ${goQuote(webhook)} denied the request: ${message}`),
  );
}

/** 429 / 5xx for fault injection, shaped like the real server's throttling and unavailability answers. */
export function injectedFault(code: number, retryAfterSeconds: number | undefined): ApiError {
  const headers: Record<string, string> = {};
  if (retryAfterSeconds !== undefined) headers['Retry-After'] = String(retryAfterSeconds);
  if (code === 429) {
    const d: NonNullable<StatusBody['details']> = {};
    if (retryAfterSeconds !== undefined) d.retryAfterSeconds = retryAfterSeconds;
    return new ApiError(
      429,
      status(429, 'TooManyRequests', 'Too many requests, please try again later.', d),
      headers,
    );
  }
  if (code === 503) {
    return new ApiError(
      503,
      status(503, 'ServiceUnavailable', 'the server is currently unable to handle the request'),
      headers,
    );
  }
  if (code === 504) {
    return new ApiError(
      504,
      status(504, 'Timeout', 'the server was unable to return a response in the time allotted'),
      headers,
    );
  }
  return new ApiError(
    code,
    status(
      code,
      'InternalError',
      'an error on the server ("injected fault") has prevented the request from succeeding',
    ),
    headers,
  );
}

/** `Status` with `status: Success` (the answer to a DELETE that removed the object at once). */
export function success(r: QualifiedResource, name: string, uid: string): StatusBody {
  const d = details(r, name);
  d.uid = uid;
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: d } as StatusBody;
}
