import type { CallOptions, ClusterGateway, JobApi } from '../ports.ts';
import { ANNOTATION } from '../trainjob/labels.ts';
import { toRunPhase } from '../trainjob/status.ts';
import type { K8sObject } from '../trainjob/types.ts';

/**
 * Between the reconciler's passes. A pass LISTs every Gantry job; between two passes the reconciler
 * watches the same jobs from that LIST's resourceVersion. A finished job's waits are answered from
 * the watch event itself; a change only a pass can judge (a failure, an admission) ends the wait at
 * once instead of at the next period; the rest waits for the period (`actionFor`).
 */

/** What a pass acts on in a job: its state (suspended, status without progress) and waiting tokens. */
interface SeenJob {
  state: string;
  /** Annotation key → token, for the waits the job carries. */
  tokens: Map<string, string>;
}

const TOKEN_ANNOTATIONS = [ANNOTATION.admissionToken, ANNOTATION.completionToken];

function seenJob(job: K8sObject): SeenJob {
  const spec = (job.spec ?? {}) as { suspend?: unknown; runPolicy?: { suspend?: unknown } };
  const { trainerStatus: _progress, ...status } = (job.status ?? {}) as Record<string, unknown>;
  const annotations = job.metadata.annotations ?? {};
  return {
    state: JSON.stringify([spec.suspend ?? spec.runPolicy?.suspend ?? null, status]),
    tokens: new Map(TOKEN_ANNOTATIONS.flatMap((k) => (annotations[k] ? [[k, annotations[k]] as const] : []))),
  };
}

/**
 * What a watched change of a job needs (`listed`: the job as last seen — the last LIST, or an
 * earlier event of this watch):
 * - 'answer': the job finished successfully and carries a waiting token. The job alone settles it
 *   (neither its pods nor its Kueue Workload change a Complete job's answer), so the token can be
 *   answered at once, without a pass over every job;
 * - 'pass': a change the next pass must look at with its wider view — a failed job (its pods' evidence
 *   tells a code failure from the infrastructure's), a job admitted, suspended again or whose status
 *   moved (whether its pods started, a preemption for the record), a finished job without a token, a
 *   new admission wait on a running job;
 * - 'none': nothing the next pass would do sooner than the period — Gantry's own changes (a token
 *   cleared after its answer), progress reports (`status.trainerStatus`), a new job or a new wait
 *   while Kueue has not admitted the job, a completion wait begun on a running job.
 */
export type WatchAction = 'answer' | 'pass' | 'none';

export function actionFor(listed: K8sObject | undefined, job: K8sObject): WatchAction {
  const now = seenJob(job);
  const before = listed ? seenJob(listed) : undefined;
  const changed = before === undefined || now.state !== before.state;
  const added = [...now.tokens]
    .filter(([key, token]) => before?.tokens.get(key) !== token)
    .map(([key]) => key);
  if (!changed && added.length === 0) return 'none';
  const phase = toRunPhase(job).phase;
  if (phase === 'Succeeded') return now.tokens.size > 0 ? 'answer' : 'pass';
  if (phase === 'Failed') return 'pass';
  if (phase === 'Pending') return before !== undefined && changed ? 'pass' : 'none';
  // Running: its status moved (pods starting, ready), or a new admission wait the pass may answer.
  return changed || added.includes(ANNOTATION.admissionToken) ? 'pass' : 'none';
}

/** Whether a watched change needs the next pass now (no answering between passes). */
export function wantsPass(listed: K8sObject | undefined, job: K8sObject): boolean {
  return actionFor(listed, job) !== 'none';
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
 * Settles one watched job between passes (reconcile.ts): resolves true when its waits were answered,
 * false when they were not (the next pass must look).
 */
export type AnswerFromWatch = (cluster: Listed, api: JobApi, job: K8sObject) => Promise<boolean>;

/**
 * Waits up to `ms` for a change the next pass acts on, in any of the listed clusters: 'changed'
 * as soon as one is seen (or a cluster's list is too old to watch from: the next pass lists
 * again), else 'period'. With `answer`, a finished job's waits are answered as its event arrives
 * and the wait goes on (an answer that fails ends it: the pass retries); the wait returns only once
 * the answers it started are done, so the next pass never answers the same token twice. A cluster
 * whose gateway cannot watch, or whose watch fails (no `watch` right, an unreachable API server),
 * only waits for the period; `onError` is told why.
 */
export async function waitForChange(
  clusters: Iterable<Listed>,
  ms: number,
  opts: CallOptions & { onError?: (cluster: string, err: unknown) => void; answer?: AnswerFromWatch } = {},
): Promise<WakeReason> {
  const stop = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
  const timeoutSeconds = Math.max(1, Math.ceil(ms / 1000));
  const watches: Promise<unknown>[] = [];
  const answering: Promise<unknown>[] = [];
  let changed!: () => void;
  const change = new Promise<WakeReason>((resolve) => {
    changed = () => resolve('changed');
  });
  const seen = (c: Listed, api: JobApi, job: K8sObject): 'stop' | undefined => {
    const key = jobKey(job);
    const action = actionFor(c.jobs.get(key), job);
    if (action === 'pass' || (action === 'answer' && !opts.answer)) return 'stop';
    // Later events of this job compare with this one: the answer's own token clearing changes nothing.
    c.jobs.set(key, job);
    if (action === 'answer' && opts.answer) {
      answering.push(
        opts.answer(c, api, job).then(
          (answered) => answered || changed(),
          () => changed(),
        ),
      );
    }
    return undefined;
  };
  for (const c of clusters) {
    const watch = c.gateway.watchManagedJobs?.bind(c.gateway);
    if (!watch) continue;
    for (const api of c.apis) {
      watches.push(
        watch(api, timeoutSeconds, (job) => seen(c, api, job), { signal }).then(
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
    await Promise.allSettled(answering);
  }
}
