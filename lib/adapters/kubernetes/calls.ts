import { NotFoundError } from '../../errors.ts';
import type { CallOptions } from '../../ports.ts';
import type { K8sObject } from '../../trainjob/types.ts';
import type { KubeCallOptions } from './custom-objects.ts';
import { httpStatusOf, kubeCall, toGantryError } from './errors.ts';

/** How the gateway calls the API: per-call options, 404 as absence, paged lists, names in messages. */

export const LIST_PAGE = 500;
/** How often one LIST starts again from its first page after an expired continue token (410). */
export const LIST_RESTARTS = 3;

/** Per-call client options: the caller's signal, and optionally a Content-Type (merge patch). */
export function callOptions(opts: CallOptions | undefined, contentType?: string): KubeCallOptions {
  return { ...(opts?.signal ? { signal: opts.signal } : {}), ...(contentType ? { contentType } : {}) };
}

export function withTypeMeta(items: unknown, apiVersion: string, kind: string): K8sObject[] {
  return ((items as K8sObject[] | undefined) ?? []).map((o) => ({
    ...o,
    apiVersion: o.apiVersion ?? apiVersion,
    kind: o.kind ?? kind,
  }));
}

/** GET that answers undefined on 404. */
export async function getOrUndefined<T>(what: string, call: () => Promise<T>): Promise<T | undefined> {
  try {
    return await kubeCall(what, call);
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

/**
 * Every page of a list, items with their apiVersion and kind (a list's items carry none). With
 * `keep`, each page's items are trimmed (or dropped: undefined) as the page arrives, so a LIST of
 * 40,000 pods never holds more than one page of whole objects (trim.ts).
 */
export async function listAll(
  what: string,
  page: (
    cont: string | undefined,
  ) => Promise<{ items?: unknown; metadata?: { continue?: string; resourceVersion?: string } }>,
  apiVersion: string,
  kind: string,
  /** Told the list's resourceVersion (its first page's: later pages are of the same snapshot). */
  onVersion?: (resourceVersion: string) => void,
  keep?: (o: K8sObject) => K8sObject | undefined,
): Promise<K8sObject[]> {
  const out: K8sObject[] = [];
  let cont: string | undefined;
  let first = true;
  let restarts = 0;
  for (;;) {
    let res: Awaited<ReturnType<typeof page>>;
    try {
      res = await page(cont);
    } catch (err) {
      // 410 on a later page: the continue token expired (etcd compacted the snapshot the list
      // began at; kube-apiserver keeps about 5 minutes). The pages read so far are of a snapshot that
      // is gone: the list starts again from its first page, at a new snapshot, a bounded number of times.
      if (cont !== undefined && httpStatusOf(err) === 410 && restarts < LIST_RESTARTS) {
        restarts++;
        out.length = 0;
        cont = undefined;
        first = true;
        continue;
      }
      throw toGantryError(err, what);
    }
    if (first && res.metadata?.resourceVersion) onVersion?.(res.metadata.resourceVersion);
    first = false;
    for (const o of withTypeMeta(res.items, apiVersion, kind)) {
      const kept = keep ? keep(o) : o;
      if (kept) out.push(kept);
    }
    cont = res.metadata?.continue || undefined;
    if (!cont) break;
  }
  return out;
}

/** `plural.group`, for messages. */
export const resourceName = (api: { group: string; plural: string }) => `${api.plural}.${api.group}`;
/** `namespace/name`, for messages. */
export const at = (ns: string, n: string) => `${ns}/${n}`;
