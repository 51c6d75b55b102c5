import type { CallOptions, ClusterGateway, JobApi } from '../ports.ts';
import { ANNOTATION } from '../trainjob/labels.ts';
import type { K8sObject } from '../trainjob/types.ts';

/**
 * Waking the reconciler between its passes. A pass LISTs every Gantry job; between two passes the
 * reconciler watches the same jobs from that LIST's resourceVersion, and a change a pass would act
 * on (admitted, completed or failed, a new waiting token, a new job) ends the wait at once instead
 * of at the next period. What it ignores: Gantry's own changes (a token cleared after its answer,
 * a job deleted) and progress reports (`status.trainerStatus`), which can wait for the period.
 */

/** What a pass acts on in a job. */
interface SeenJob {
  state: string;
  tokens: string[];
}

const TOKEN_ANNOTATIONS = [ANNOTATION.admissionToken, ANNOTATION.completionToken];

function seenJob(job: K8sObject): SeenJob {
  const spec = (job.spec ?? {}) as { suspend?: unknown; runPolicy?: { suspend?: unknown } };
  const { trainerStatus: _progress, ...status } = (job.status ?? {}) as Record<string, unknown>;
  const annotations = job.metadata.annotations ?? {};
  return {
    state: JSON.stringify([spec.suspend ?? spec.runPolicy?.suspend ?? null, status]),
    tokens: TOKEN_ANNOTATIONS.flatMap((k) => (annotations[k] ? [annotations[k]] : [])),
  };
}

/** Whether a watched job changed in a way the next pass acts on (`listed`: as the last LIST saw it). */
export function wantsPass(listed: K8sObject | undefined, job: K8sObject): boolean {
  if (!listed) return true;
  const before = seenJob(listed);
  const now = seenJob(job);
  return now.state !== before.state || now.tokens.some((t) => !before.tokens.includes(t));
}

/** One cluster as the last pass listed it. */
export interface Listed {
  cluster: string;
  gateway: ClusterGateway;
  apis: JobApi[];
  /** The listed jobs by uid (namespace/name when a job has none), compared only when one changes. */
  jobs: Map<string, K8sObject>;
}

export const jobKey = (job: K8sObject) =>
  job.metadata.uid ?? `${job.metadata.namespace ?? ''}/${job.metadata.name}`;

export type WakeReason = 'changed' | 'period';

/**
 * Waits up to `ms` for a change the next pass acts on, in any of the listed clusters: 'changed'
 * as soon as one is seen (or a cluster's list is too old to watch from: the next pass lists
 * again), else 'period'. A cluster whose gateway cannot watch, or whose watch fails (no `watch`
 * right, an unreachable API server), only waits for the period; `onError` is told why.
 */
export async function waitForChange(
  clusters: Iterable<Listed>,
  ms: number,
  opts: CallOptions & { onError?: (cluster: string, err: unknown) => void } = {},
): Promise<WakeReason> {
  const stop = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
  const timeoutSeconds = Math.max(1, Math.ceil(ms / 1000));
  const watches: Promise<unknown>[] = [];
  let changed!: () => void;
  const change = new Promise<WakeReason>((resolve) => {
    changed = () => resolve('changed');
  });
  for (const c of clusters) {
    const watch = c.gateway.watchManagedJobs?.bind(c.gateway);
    if (!watch) continue;
    for (const api of c.apis) {
      watches.push(
        watch(api, timeoutSeconds, (job) => (wantsPass(c.jobs.get(jobKey(job)), job) ? 'stop' : undefined), {
          signal,
        }).then(
          (how) => {
            if (how !== 'ended') changed();
          },
          (err: unknown) => {
            if (!signal.aborted) opts.onError?.(c.cluster, err);
          },
        ),
      );
    }
  }
  let timer: NodeJS.Timeout | undefined;
  const period = new Promise<WakeReason>((resolve) => {
    timer = setTimeout(() => resolve('period'), ms);
    signal.addEventListener('abort', () => resolve('period'), { once: true });
  });
  try {
    return await Promise.race([period, change]);
  } finally {
    clearTimeout(timer);
    stop.abort();
    await Promise.allSettled(watches);
  }
}
