import type { GantryConfig } from '../config.ts';
import { ClusterRejectedError, NotFoundError, ValidationError } from '../errors.ts';
import { lazily } from '../lazily.ts';
import { attemptOfJob, makeLogArchiveReader } from '../logs/archive.ts';
import { logLines, MAX_LINE_CHARS } from '../logs/lines.ts';
import type { CallOptions, ClusterGateway, ObjectStore } from '../ports.ts';
import { isTerminal } from '../run/phases.ts';
import type { JobLocation, RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import { parseWith } from '../run/validate.ts';
import type { JobKind } from '../trainjob/kinds.ts';
import { LABEL } from '../trainjob/labels.ts';
import { nodePod } from '../trainjob/node-pods.ts';
import * as z from '../zod.ts';
import { RunLogsUnavailableError } from './errors.ts';
import { makeGetRun } from './runs.ts';
import type { Caller } from './tenancy.ts';

/**
 * `GET /v1/runs/{id}/logs`: the tail of the trainer container of one node of the run's job, read
 * through the Kubernetes API (`pods/log`) while the attempt's job exists, and from the archive
 * (lib/logs/archive.ts) once it was deleted. Scoped like `GET /v1/runs/{id}`: another team's run is
 * a 404, word for word the answer for an unknown one.
 */

export const DEFAULT_TAIL_LINES = 100;
export const MAX_TAIL_LINES = 1000;

const wholeNumber = (rule: string) =>
  z.pipe(z.string().check(z.regex(/^[0-9]{1,7}$/, rule)), z.transform(Number));

export const runLogsQuerySchema = /* @__PURE__ */ lazily(() =>
  z.strictObject({
    node: z.described(
      z.optional(wholeNumber('must be a whole number from 0 (the node index)')),
      "The node (0-based index, below the run's numNodes) whose trainer container to read (default 0)",
    ),
    attempt: z.described(
      z.optional(
        z.pipe(
          wholeNumber('must be a whole number from 1 (the attempt)'),
          z.number().check(z.gte(1, 'must be at least 1')),
        ),
      ),
      "The attempt whose logs to read (1 for the first; default the run's current or last attempt). An ended attempt's logs are the ones archived when its job was deleted",
    ),
    tailLines: z.described(
      z.optional(
        z.pipe(
          wholeNumber(`must be a whole number from 1 to ${MAX_TAIL_LINES}`),
          z
            .number()
            .check(
              z.gte(1, 'must be at least 1'),
              z.lte(MAX_TAIL_LINES, `must be at most ${MAX_TAIL_LINES}`),
            ),
        ),
      ),
      `How many lines from the end of the log, 1–${MAX_TAIL_LINES} (default ${DEFAULT_TAIL_LINES})`,
    ),
  }),
);
export type RunLogsQuery = z.input<ReturnType<typeof runLogsQuerySchema>>;

export interface RunLogs {
  runId: string;
  pod: string;
  container: string;
  lines: string[];
  attempt: number;
  source: 'live' | 'archive';
  truncated?: boolean;
  archivedAt?: string;
}

export { logLines, MAX_LINE_CHARS };

/**
 * The attempt the run is on (or ended in), and its job when it has one. Between attempts (the last
 * job's attempt recorded ended, the run not) the next attempt has no job yet.
 */
export function currentAttempt(record: RunRecord): { attempt: number; job?: JobLocation } {
  const recorded = Math.max(1, ...(record.attempts ?? []).map((a) => a.attempt));
  if (!record.job) return { attempt: recorded };
  const ofJob = attemptOfJob(record.spec.jobName, record.job.name);
  const ended = record.attempts?.some((a) => a.attempt === ofJob && a.endedAt);
  if (ended && !isTerminal(record.phase)) return { attempt: Math.max(recorded, ofJob + 1) };
  return ofJob >= recorded ? { attempt: ofJob, job: record.job } : { attempt: recorded };
}

function unavailable(record: RunRecord, what: string, cause?: unknown): RunLogsUnavailableError {
  return new RunLogsUnavailableError(
    `run ${record.runId} (phase ${record.phase}) has no logs to read: ${what}`,
    record.phase,
    cause === undefined ? undefined : { cause },
  );
}

export function makeGetRunLogs(deps: {
  records: RunRecords;
  config: GantryConfig;
  gateway: (cluster: string) => Promise<ClusterGateway>;
  /** The archived logs (lib/logs/archive.ts) in the Gantry bucket. */
  store: Pick<ObjectStore, 'getJson'>;
}) {
  const getRun = makeGetRun(deps);
  const archive = makeLogArchiveReader(deps.store);

  /** The node's pod of the attempt's job, read from the cluster now. */
  async function live(
    record: RunRecord,
    job: JobLocation,
    attempt: number,
    node: number,
    tailLines: number,
    opts?: CallOptions,
  ): Promise<RunLogs | { logs: RunLogs; terminating: true } | string> {
    const gateway = await deps.gateway(job.cluster);
    const pods = (await gateway.listPods(`${LABEL.runId}=${record.runId}`, opts)).filter(
      (p) => p.metadata.namespace === job.namespace,
    );
    const chosen = nodePod(job.kind as JobKind, job.name, pods, node);
    if (!chosen) return `node ${node} has no pod`;
    let text: string;
    try {
      text = await gateway.readPodLog(
        job.namespace,
        chosen.pod,
        { container: chosen.container, tailLines },
        opts,
      );
    } catch (err) {
      // 404: the pod went away; 400: the container has not started (the kubelet's words say why).
      if (err instanceof NotFoundError || err instanceof ClusterRejectedError) {
        throw unavailable(record, err.message, err);
      }
      throw err;
    }
    const logs: RunLogs = {
      runId: record.runId,
      pod: chosen.pod,
      container: chosen.container,
      lines: logLines(text, tailLines),
      attempt,
      source: 'live',
    };
    // A pod being deleted with its job: the archive written just before is the whole log.
    const pod = pods.find((p) => p.metadata.name === chosen.pod);
    const terminating = Boolean(
      (pod?.metadata as { deletionTimestamp?: string } | undefined)?.deletionTimestamp,
    );
    return terminating ? { logs, terminating } : logs;
  }

  /** The node's log as archived when the attempt's job was deleted; a string says why there is none. */
  async function archived(
    record: RunRecord,
    attempt: number,
    node: number,
    tailLines: number,
    opts?: CallOptions,
  ): Promise<RunLogs | string> {
    const index = await archive.index(record.runId, attempt, opts);
    if (!index) return `no logs were archived for attempt ${attempt}`;
    const entry = index.pods.find((e) => e.name === `node-${node}`);
    if (!entry) {
      const why = index.error ?? `its job had no pod for node ${node}`;
      return `attempt ${attempt}'s logs were archived without node ${node}: ${why}`;
    }
    const log = entry.key ? await archive.log(entry.key, opts) : undefined;
    if (!log)
      return `the log of node ${node} of attempt ${attempt} could not be archived: ${entry.error ?? 'its object is missing'}`;
    return {
      runId: record.runId,
      pod: log.pod,
      container: log.container,
      lines: log.lines.slice(-tailLines),
      attempt,
      source: 'archive',
      truncated: log.truncated,
      archivedAt: log.archivedAt,
    };
  }

  return async function getRunLogs(
    input: { caller: Caller; runId: unknown; query: unknown },
    opts?: CallOptions,
  ): Promise<RunLogs> {
    const query = parseWith(runLogsQuerySchema(), input.query ?? {});
    const record = await getRun({ caller: input.caller, runId: input.runId }, opts);
    const node = query.node ?? 0;
    const tailLines = query.tailLines ?? DEFAULT_TAIL_LINES;
    const numNodes = record.spec.request.numNodes;
    if (node >= numNodes) {
      throw new ValidationError([
        {
          field: 'node',
          rule: `must be below the run's numNodes (${numNodes}): nodes are 0–${numNodes - 1}`,
        },
      ]);
    }
    const { attempt: current, job: currentJob } = currentAttempt(record);
    const attempt = query.attempt ?? current;
    if (attempt < 1 || attempt > current) {
      throw new ValidationError([
        { field: 'attempt', rule: `must be from 1 to the run's attempts so far (${current})` },
      ]);
    }
    const job = attempt === current ? currentJob : undefined;
    if (!isTerminal(record.phase)) {
      if (job) {
        const read = await live(record, job, attempt, node, tailLines, opts);
        if (typeof read !== 'string' && !('terminating' in read)) return read;
        // Between attempts the job may be gone (or its pods terminating) before the record names
        // the next attempt (NextAttempt archives the pods' logs, deletes the job, then records):
        // the archive has the whole log.
        const kept = await archived(record, attempt, node, tailLines, opts);
        if (typeof kept !== 'string') return kept;
        if (typeof read !== 'string') return read.logs;
        throw unavailable(record, `${read} yet`);
      }
      if (attempt === current) throw unavailable(record, 'its job is not created yet');
      // An earlier attempt of a run still going: its job is gone, only the archive has it.
      const kept = await archived(record, attempt, node, tailLines, opts);
      if (typeof kept !== 'string') return kept;
      throw unavailable(record, kept);
    }
    // An ended run: the archive, else its job if the job is still there (a succeeded run's job is
    // deleted by the reconciler a few minutes after the run ends).
    const kept = await archived(record, attempt, node, tailLines, opts);
    if (typeof kept !== 'string') return kept;
    if (!job)
      throw unavailable(
        record,
        record.job || attempt < current ? kept : `${kept}: the run ended before its job was created`,
      );
    const read = await live(record, job, attempt, node, tailLines, opts).catch((err: unknown) => {
      if (err instanceof RunLogsUnavailableError) return err.message;
      throw err;
    });
    if (typeof read !== 'string') return 'terminating' in read ? read.logs : read;
    throw unavailable(record, `${kept}, and its job's pods are gone`);
  };
}
