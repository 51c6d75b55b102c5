import { mapLimit } from '../concurrency.ts';
import type { CallOptions, Clock, ClusterGateway, ObjectStore } from '../ports.ts';
import { parseWith } from '../run/validate.ts';
import type { JobKind } from '../trainjob/kinds.ts';
import * as z from '../zod.ts';
import { logLines } from './lines.ts';
import { type JobPodLog, jobPodLogs, jobPodSelector } from './pods.ts';

/**
 * Run logs that outlive the job: before Gantry deletes a job (Cleanup, NextAttempt, cancel, the
 * reconciler's orphan removal) the tail of each of its pods' logs is copied to the Gantry bucket,
 * read through the ClusterGateway and written through the ObjectStore:
 *
 *   runs/<run id>/logs/attempt-<n>/index.json    what was archived (pods, sizes, truncation, failures)
 *   runs/<run id>/logs/attempt-<n>/<name>.json   one pod's lines (`node-<N>`, `dataset-initializer-0`, …)
 *
 * Archiving is best effort and bounded in time: it never throws, so the delete that follows always
 * happens; what could not be archived is logged and noted in the index.
 */

export interface LogArchiveLimits {
  /** Lines kept per pod: the last ones. */
  maxLines: number;
  /** Bytes kept per pod (UTF-8, a newline per line): the last ones, whole lines. */
  maxBytes: number;
  /** How long one job's archive may take before the delete goes ahead without the rest. */
  budgetMs: number;
}

export const DEFAULT_LOG_ARCHIVE_LIMITS: LogArchiveLimits = {
  maxLines: 10_000,
  maxBytes: 1024 * 1024,
  budgetMs: 15_000,
};

/** Pods read at once. */
const POD_CONCURRENCY = 8;

/** The environment that sets the limits (each optional; a bad value fails the first call, naming it). */
export const logArchiveEnvSchema = () =>
  z.object({
    GANTRY_LOG_ARCHIVE_MAX_LINES: z._default(
      z.coerce.number().check(z.int(), z.gte(1), z.lte(100_000)),
      DEFAULT_LOG_ARCHIVE_LIMITS.maxLines,
    ),
    GANTRY_LOG_ARCHIVE_MAX_BYTES: z._default(
      z.coerce.number().check(z.int(), z.gte(1024), z.lte(8 * 1024 * 1024)),
      DEFAULT_LOG_ARCHIVE_LIMITS.maxBytes,
    ),
    GANTRY_LOG_ARCHIVE_SECONDS: z._default(
      z.coerce.number().check(z.gt(0), z.lte(600)),
      DEFAULT_LOG_ARCHIVE_LIMITS.budgetMs / 1000,
    ),
  });

export function logArchiveLimits(env: Record<string, string | undefined>): LogArchiveLimits {
  const e = parseWith(logArchiveEnvSchema(), env);
  return {
    maxLines: e.GANTRY_LOG_ARCHIVE_MAX_LINES,
    maxBytes: e.GANTRY_LOG_ARCHIVE_MAX_BYTES,
    budgetMs: e.GANTRY_LOG_ARCHIVE_SECONDS * 1000,
  };
}

/** One archived pod, as the index lists it. */
export interface LogArchiveEntry extends JobPodLog {
  /** The object holding the lines; absent when the log could not be read. */
  key?: string;
  lines?: number;
  bytes?: number;
  /** Earlier lines were dropped to stay within the limits. */
  truncated?: boolean;
  /** Why the log could not be read. */
  error?: string;
}

export interface LogArchiveIndex {
  runId: string;
  attempt: number;
  jobName: string;
  archivedAt: string;
  limits: { maxLines: number; maxBytes: number };
  pods: LogArchiveEntry[];
  /** Set when the job's pods could not be listed (nothing archived by that call). */
  error?: string;
}

/** One pod's archived log. */
export interface ArchivedLog {
  runId: string;
  attempt: number;
  name: string;
  node?: number;
  pod: string;
  container: string;
  archivedAt: string;
  truncated: boolean;
  lines: string[];
}

export const logArchivePrefix = (runId: string, attempt: number) => `runs/${runId}/logs/attempt-${attempt}/`;
export const logArchiveIndexKey = (runId: string, attempt: number) =>
  `${logArchivePrefix(runId, attempt)}index.json`;

/** The job to archive before it is deleted. */
export interface LogArchiveTarget {
  cluster: string;
  namespace: string;
  kind: string;
  /** The job's name (`<run job name>` or `<run job name>-a<N>`). */
  name: string;
  runId: string;
  attempt: number;
}

/** The target for a step's job (`$.job`, a JobRef) of the run's attempt (`$.run.attempt`, absent = 1). */
export function archiveTarget(
  run: { runId: string; attempt?: number },
  job: { cluster: string; namespace: string; name: string; api: { kind: string } },
): LogArchiveTarget {
  return {
    cluster: job.cluster,
    namespace: job.namespace,
    kind: job.api.kind,
    name: job.name,
    runId: run.runId,
    attempt: run.attempt ?? 1,
  };
}

export interface LogArchiveOutcome {
  attempt: number;
  pods: number;
  archived: number;
  truncated: number;
  failed: number;
  /** Set when nothing could be archived (the pods not listed, or the index not written). */
  error?: string;
}

/** Archive a job's pod logs; never throws (a failure is logged and in the outcome). */
export type ArchiveJobLogs = (target: LogArchiveTarget, opts?: CallOptions) => Promise<LogArchiveOutcome>;

/** The last lines of `text` within the limits; `truncated` when earlier lines were dropped. */
export function boundLog(
  text: string,
  limits: Pick<LogArchiveLimits, 'maxLines' | 'maxBytes'>,
): { lines: string[]; bytes: number; truncated: boolean } {
  // One line more than kept says whether there were more.
  const read = logLines(text, limits.maxLines + 1);
  let truncated = read.length > limits.maxLines;
  const tail = truncated ? read.slice(1) : read;
  let bytes = 0;
  let from = tail.length;
  while (from > 0) {
    const size = Buffer.byteLength(tail[from - 1] as string, 'utf8') + 1;
    if (bytes + size > limits.maxBytes) break;
    bytes += size;
    from--;
  }
  if (from > 0) truncated = true;
  return { lines: tail.slice(from), bytes, truncated };
}

/** The attempt a job belongs to, from its name: `<base>` is 1, `<base>-a<N>` is N (lib/run/attempts.ts). */
export function attemptOfJob(baseJobName: string, jobName: string): number {
  const m = new RegExp(`^${baseJobName.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-a([0-9]+)$`).exec(jobName);
  return m ? Number(m[1]) : 1;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

export function makeLogArchiver(deps: {
  gateway: (cluster: string) => Promise<ClusterGateway>;
  store: ObjectStore;
  clock: Clock;
  limits?: Partial<LogArchiveLimits>;
  log?: (line: Record<string, unknown>) => void;
}): ArchiveJobLogs {
  const limits = { ...DEFAULT_LOG_ARCHIVE_LIMITS, ...deps.limits };

  /** `signal` bounds the reads and pod writes; the index is written under the caller's own `after`. */
  async function archive(
    target: LogArchiveTarget,
    signal: AbortSignal,
    after: CallOptions | undefined,
  ): Promise<LogArchiveOutcome> {
    const { runId, attempt } = target;
    const opts = { signal };
    const prefix = logArchivePrefix(runId, attempt);
    const base = (archivedAt: string): Omit<LogArchiveIndex, 'pods'> => ({
      runId,
      attempt,
      jobName: target.name,
      archivedAt,
      limits: { maxLines: limits.maxLines, maxBytes: limits.maxBytes },
    });
    const previous = await deps.store
      .getJson<LogArchiveIndex>(logArchiveIndexKey(runId, attempt), opts)
      .catch(() => undefined);
    let pods: JobPodLog[];
    let gateway: ClusterGateway;
    try {
      gateway = await deps.gateway(target.cluster);
      const listed = await gateway.listPods(jobPodSelector(target.kind as JobKind, target.name), opts);
      pods = jobPodLogs(
        target.kind as JobKind,
        target.name,
        listed.filter((p) => p.metadata.namespace === target.namespace),
      );
    } catch (err) {
      // An earlier call's archive stands; otherwise say in the index why there is none.
      if (!previous?.value.pods.length) {
        await deps.store.putJson(
          logArchiveIndexKey(runId, attempt),
          {
            ...base(deps.clock.now().toISOString()),
            pods: [],
            error: `the job's pods could not be listed: ${messageOf(err)}`,
          } satisfies LogArchiveIndex,
          undefined,
          after,
        );
      }
      return { attempt, pods: 0, archived: 0, truncated: 0, failed: 0, error: messageOf(err) };
    }
    const archivedAt = deps.clock.now().toISOString();
    const entries = await mapLimit(pods, POD_CONCURRENCY, async (p): Promise<LogArchiveEntry> => {
      try {
        const text = await gateway.readPodLog(
          target.namespace,
          p.pod,
          { container: p.container, tailLines: limits.maxLines + 1 },
          opts,
        );
        const bounded = boundLog(text, limits);
        const key = `${prefix}${p.name}.json`;
        await deps.store.putJson(
          key,
          {
            runId,
            attempt,
            name: p.name,
            ...(p.node !== undefined ? { node: p.node } : {}),
            pod: p.pod,
            container: p.container,
            archivedAt,
            truncated: bounded.truncated,
            lines: bounded.lines,
          } satisfies ArchivedLog,
          undefined,
          opts,
        );
        return { ...p, key, lines: bounded.lines.length, bytes: bounded.bytes, truncated: bounded.truncated };
      } catch (err) {
        return { ...p, error: messageOf(err) };
      }
    });
    // A repeated call (a retried step) whose pods are going keeps what an earlier call archived.
    const earlier = new Map((previous?.value.pods ?? []).filter((e) => e.key).map((e) => [e.name, e]));
    const merged = entries.map((e) => (e.error && earlier.get(e.name)) || e);
    for (const [name, e] of earlier) if (!merged.some((m) => m.name === name)) merged.push(e);
    await deps.store.putJson(
      logArchiveIndexKey(runId, attempt),
      { ...base(archivedAt), pods: merged } satisfies LogArchiveIndex,
      undefined,
      after,
    );
    return {
      attempt,
      pods: merged.length,
      archived: merged.filter((e) => e.key).length,
      truncated: merged.filter((e) => e.truncated).length,
      failed: merged.filter((e) => !e.key).length,
    };
  }

  return async function archiveJobLogs(target, opts) {
    const budget = AbortSignal.timeout(limits.budgetMs);
    const signal = opts?.signal ? AbortSignal.any([opts.signal, budget]) : budget;
    let outcome: LogArchiveOutcome;
    try {
      outcome = await archive(target, signal, opts);
    } catch (err) {
      outcome = {
        attempt: target.attempt,
        pods: 0,
        archived: 0,
        truncated: 0,
        failed: 0,
        error: messageOf(err),
      };
    }
    const line = { runId: target.runId, job: target.name, ...outcome };
    deps.log?.(
      outcome.error || outcome.failed
        ? { level: 'WARN', msg: 'run logs not archived (all or some); the job is deleted anyway', ...line }
        : { level: 'INFO', msg: 'run logs archived', ...line },
    );
    return outcome;
  };
}

/** Reading the archive back (GET /v1/runs/{id}/logs on an ended run or an earlier attempt). */
export function makeLogArchiveReader(store: Pick<ObjectStore, 'getJson'>) {
  return {
    async index(runId: string, attempt: number, opts?: CallOptions): Promise<LogArchiveIndex | undefined> {
      return (await store.getJson<LogArchiveIndex>(logArchiveIndexKey(runId, attempt), opts))?.value;
    },
    async log(key: string, opts?: CallOptions): Promise<ArchivedLog | undefined> {
      return (await store.getJson<ArchivedLog>(key, opts))?.value;
    },
  };
}
