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

/** What a pass acts on in a job: its state (suspension, conditions, started) and waiting tokens. */
interface SeenJob {
  state: string;
  /** Annotation key → token, for the waits the job carries. */
  tokens: Map<string, string>;
}

const TOKEN_ANNOTATIONS = [ANNOTATION.admissionToken, ANNOTATION.completionToken];

type Obj = Record<string, unknown>;
const asObj = (v: unknown): Obj | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;

/**
 * Whether a replicated job reports a ready or finished Job (`status.jobsStatus`, as
 * lib/trainjob/pod-health.ts reads it to tell a started job from one whose pods are starting):
 * the one bit of `jobsStatus` a pass acts on. Its counts change with every pod that starts,
 * restarts or ends; they wake no pass.
 */
function started(status: Obj | undefined): boolean | null {
  const list = status?.jobsStatus;
  if (!Array.isArray(list) || list.length === 0) return null;
  return list.some((j) => Number(asObj(j)?.ready ?? 0) > 0 || Number(asObj(j)?.succeeded ?? 0) > 0);
}

function seenJob(job: K8sObject): SeenJob {
  const spec = asObj(job.spec) as { suspend?: unknown; runPolicy?: { suspend?: unknown } } | undefined;
  const status = asObj(job.status);
  // Conditions by type, status and reason: a message or a time alone is not a change.
  const conditions = (Array.isArray(status?.conditions) ? status.conditions : []).map((c) => {
    const o = asObj(c);
    return [o?.type, o?.status, o?.reason];
  });
  const annotations = job.metadata.annotations ?? {};
  return {
    state: JSON.stringify([spec?.suspend ?? spec?.runPolicy?.suspend ?? null, conditions, started(status)]),
    tokens: new Map(TOKEN_ANNOTATIONS.flatMap((k) => (annotations[k] ? [[k, annotations[k]] as const] : []))),
  };
}

/**
 * What the watch keeps of a listed job between passes: only what `actionFor` compares (suspension,
 * conditions, whether it started, its tokens) and what identifies it — not its spec, not its
 * progress, not the rest of its annotations.
 */
export function watchedForm(job: K8sObject): K8sObject {
  const spec = asObj(job.spec);
  const status = asObj(job.status);
  const annotations = job.metadata.annotations ?? {};
  const runPolicy = asObj(spec?.runPolicy);
  return {
    apiVersion: job.apiVersion,
    kind: job.kind,
    metadata: {
      name: job.metadata.name,
      ...(job.metadata.namespace === undefined ? {} : { namespace: job.metadata.namespace }),
      ...(job.metadata.uid === undefined ? {} : { uid: job.metadata.uid }),
      annotations: Object.fromEntries(
        TOKEN_ANNOTATIONS.flatMap((k) => (annotations[k] ? [[k, annotations[k]]] : [])),
      ),
    },
    spec: {
      ...(spec?.suspend === undefined ? {} : { suspend: spec.suspend }),
      ...(runPolicy?.suspend === undefined ? {} : { runPolicy: { suspend: runPolicy.suspend } }),
    },
    status: {
      ...(status?.conditions === undefined ? {} : { conditions: status.conditions }),
      ...(status?.jobsStatus === undefined ? {} : { jobsStatus: status.jobsStatus }),
    },
  };
}

/**
 * What a watched change of a job needs (`listed`: the job as last seen — the last LIST, or an
 * earlier event of this watch):
 * - 'answer': the job finished successfully and carries a waiting token. The job alone settles it
 *   (neither its pods nor its Kueue Workload change a Complete job's answer), so the token can be
 *   answered at once, without a pass over every job;
 * - 'pass': a change the next pass must look at with its wider view — a failed job (its pods' evidence
 *   tells a code failure from the infrastructure's), a job admitted, suspended again, whose
 *   conditions changed or whose pods started (`jobsStatus` first reports a ready Job), a finished
 *   job without a token, a new admission wait on a running job;
 * - 'none': nothing the next pass would do sooner than the period — Gantry's own changes (a token
 *   cleared after its answer), progress reports (`status.trainerStatus`), `jobsStatus` counts moving
 *   on a started job, a condition's message or time alone, a new job or a new wait while Kueue has
 *   not admitted the job, a completion wait begun on a running job.
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
  // Running: its conditions changed or its pods started, or a new admission wait the pass may answer.
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
  /**
   * The listed jobs by uid (namespace/name when a job has none), in their `watchedForm`, compared
   * only when one changes.
   */
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

/** The waiting tokens a job carries (annotation key → token). */
export function tokensOf(job: K8sObject): Map<string, string> {
  return seenJob(job).tokens;
}

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
  opts: CallOptions & {
    onError?: (cluster: string, err: unknown) => void;
    answer?: AnswerFromWatch;
    /** A job deleted while it carries waits (by someone else: Gantry answers before it deletes). */
    vanished?: AnswerFromWatch;
  } = {},
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
  const settle = (settling: Promise<boolean>) =>
    answering.push(
      settling.then(
        (answered) => answered || changed(),
        () => changed(),
      ),
    );
  const seen = (c: Listed, api: JobApi, job: K8sObject, deleted?: boolean): 'stop' | undefined => {
    const key = jobKey(job);
    if (deleted) {
      // Its waits can never be answered by the job now: they fail JobVanished at once, not after
      // the state machine's heartbeat timeout. Its last state carries its tokens.
      c.jobs.delete(key);
      if (tokensOf(job).size === 0) return undefined;
      if (!opts.vanished) return 'stop';
      settle(opts.vanished(c, api, job));
      return undefined;
    }
    const action = actionFor(c.jobs.get(key), job);
    if (action === 'pass' || (action === 'answer' && !opts.answer)) return 'stop';
    // Later events of this job compare with this one: the answer's own token clearing changes nothing.
    c.jobs.set(key, watchedForm(job));
    if (action === 'answer' && opts.answer) settle(opts.answer(c, api, job));
    return undefined;
  };
  for (const c of clusters) {
    const watch = c.gateway.watchManagedJobs?.bind(c.gateway);
    if (!watch) continue;
    for (const api of c.apis) {
      watches.push(
        watch(api, timeoutSeconds, (job, deleted) => seen(c, api, job, deleted), { signal }).then(
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

/**
 * The jobs the last pass listed with a waiting token that this pass's LIST no longer has: deleted in
 * between, and their DELETED event missed (no watch, or a watch that ended early).
 */
export function vanishedSince(before: Listed | undefined, now: ReadonlyMap<string, K8sObject>): K8sObject[] {
  if (before === undefined) return [];
  return [...before.jobs]
    .filter(([key, job]) => !now.has(key) && tokensOf(job).size > 0)
    .map(([, job]) => job);
}
