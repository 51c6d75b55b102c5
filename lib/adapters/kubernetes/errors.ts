import {
  ClusterAccessDeniedError,
  ClusterRejectedError,
  ClusterUnavailableError,
  type Issue,
  NotFoundError,
  RetryableError,
  TerminalError,
} from '../../errors.ts';

/**
 * The edge between @kubernetes/client-node and Gantry: every failure of a Kubernetes call leaves the
 * adapter as one of Gantry's error classes (lib/errors.ts), with the original error as `cause`.
 * Nothing above the adapter sees client-node's ApiException.
 */

/** The part of a Kubernetes `Status` object (the body of an error response) that Gantry reads. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    causes?: Array<{ field?: string; message?: string; reason?: string }>;
  };
}

/** An HTTP failure as client-node reports it (ApiException: `code` = HTTP status, `body` = text or object). */
interface HttpFailure {
  code: number;
  body?: unknown;
}

/** Network / TLS / socket error codes that mean "the cluster could not be reached right now". */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
  'ERR_SOCKET_CONNECTION_TIMEOUT',
  'ERR_STREAM_PREMATURE_CLOSE',
  'ERR_HTTP2_STREAM_ERROR',
  'ABORT_ERR',
]);

/** HTTP statuses that may pass on their own: timeouts, conflicts on update, expired continue tokens, throttling. */
const RETRYABLE_STATUS = new Set([408, 409, 410, 429]);

function isHttpFailure(err: unknown): err is HttpFailure {
  return (
    err instanceof Error &&
    typeof (err as { code?: unknown }).code === 'number' &&
    'body' in err &&
    'headers' in err
  );
}

/** The HTTP status of a failed client-node call, or undefined for network and other errors. */
export function httpStatusOf(err: unknown): number | undefined {
  return isHttpFailure(err) ? err.code : undefined;
}

/** The Kubernetes Status in an error body (client-node hands the raw text for most error codes). */
export function statusOf(body: unknown): KubeStatus | undefined {
  let value = body;
  if (typeof body === 'string') {
    try {
      value = JSON.parse(body);
    } catch {
      return body.trim() ? { message: body.trim().slice(0, 500) } : undefined;
    }
  }
  if (value && typeof value === 'object') return value as KubeStatus;
  return undefined;
}

/**
 * Field-level causes of a 400/422 (`details.causes[{field, message}]`) as Gantry issues. A rule on
 * the whole object (a CRD's root CEL rule) has no field; the apiserver prints it as `<nil>`.
 */
export function causesOf(status: KubeStatus | undefined): Issue[] {
  return (status?.details?.causes ?? []).map((c) => ({
    field: !c.field || c.field === '<nil>' ? '' : c.field,
    rule: c.message ?? c.reason ?? 'invalid',
  }));
}

/** Walks `cause` chains (fetch wraps socket errors; AbortError carries the signal's reason). */
function* chain(err: unknown): Generator<unknown> {
  const seen = new Set<unknown>();
  let e: unknown = err;
  while (e !== undefined && e !== null && !seen.has(e)) {
    seen.add(e);
    yield e;
    e = (e as { cause?: unknown }).cause;
  }
}

function networkReason(err: unknown): string | undefined {
  const links = [...chain(err)].filter((e): e is object => typeof e === 'object' && e !== null);
  // An abort caused by AbortSignal.timeout() carries a TimeoutError as its cause.
  if (links.some((e) => (e as { name?: unknown }).name === 'TimeoutError')) return 'timed out';
  for (const e of links) {
    const { name, code } = e as { name?: unknown; code?: unknown };
    if (name === 'AbortError') return 'aborted';
    if (typeof code === 'string') {
      if (NETWORK_CODES.has(code) || code.startsWith('UND_ERR_')) return code;
      // TLS failures (expired or rotated CA, wrong name): a new cold start re-reads the endpoint and CA.
      if (
        code.startsWith('ERR_TLS_') ||
        code.startsWith('ERR_SSL_') ||
        /CERT|SELF_SIGNED|UNABLE_TO_/.test(code)
      )
        return code;
    }
  }
  return undefined;
}

/**
 * A validating admission webhook's refusal as the apiserver relays it: the webhook's status code
 * (controller-runtime's `Denied` is 403 Forbidden; `Errored` may carry 400 or 422) and a message
 * `admission webhook "<name>" denied the request: <why>`. Undefined for anything else — notably
 * 500 `failed calling webhook` (the webhook is down), which is the cluster's trouble, not the request's.
 */
export function webhookDenial(code: number, status: KubeStatus | undefined): string | undefined {
  if (code !== 400 && code !== 403 && code !== 422) return undefined;
  const message = status?.message;
  return message && /^admission webhook "[^"]+" denied the request/.test(message) ? message : undefined;
}

/**
 * Translate any failure of a Kubernetes call into Gantry's error classes:
 * 404 → NotFoundError; 400/422 (and other client errors) → ClusterRejectedError with the Status causes;
 * an admission webhook's denial (400/403/422) → ClusterRejectedError led by the webhook's message;
 * 401/403 → ClusterAccessDeniedError; 408/409/410/429/5xx and network failures, timeouts and aborts →
 * ClusterUnavailableError. Gantry's own errors pass through; anything else (a bug) is rethrown as is.
 *
 * `what` names the call for the message, e.g. `create trainjobs.trainer.kubeflow.org team-a/run-1`.
 */
export function toGantryError(err: unknown, what: string): Error {
  if (err instanceof RetryableError || err instanceof TerminalError) return err;
  if (isHttpFailure(err)) {
    const status = statusOf(err.body);
    const detail = status?.message ? `: ${status.message}` : '';
    const message = `${what}: HTTP ${err.code}${status?.reason ? ` ${status.reason}` : ''}${detail}`;
    const options = { cause: err };
    const denial = webhookDenial(err.code, status);
    if (denial !== undefined) {
      // The webhook's own words first: they say what to change (e.g. the runtime lacks an initializer).
      return new ClusterRejectedError(`${denial} (${what}: HTTP ${err.code})`, causesOf(status), options);
    }
    if (err.code === 404) return new NotFoundError(message, options);
    if (err.code === 401 || err.code === 403) return new ClusterAccessDeniedError(message, options);
    if (err.code >= 500 || RETRYABLE_STATUS.has(err.code) || err.code < 100) {
      return new ClusterUnavailableError(message, options);
    }
    return new ClusterRejectedError(message, causesOf(status), options);
  }
  const reason = networkReason(err);
  if (reason !== undefined) {
    const text = err instanceof Error ? err.message : String(err);
    return new ClusterUnavailableError(`${what}: ${reason} (${text})`, { cause: err });
  }
  return err instanceof Error ? err : new Error(`${what}: ${String(err)}`, { cause: err });
}

/** Run one Kubernetes call and translate its failure at the edge. */
export async function kubeCall<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw toGantryError(err, what);
  }
}
