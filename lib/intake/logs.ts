import type { GantryConfig } from '../config.ts';
import { ClusterRejectedError, NotFoundError, ValidationError } from '../errors.ts';
import { lazily } from '../lazily.ts';
import type { CallOptions, ClusterGateway } from '../ports.ts';
import { isTerminal } from '../run/phases.ts';
import type { RunRecord } from '../run/record.ts';
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
 * through the Kubernetes API (`pods/log`). Scoped like `GET /v1/runs/{id}`: another team's run is
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
}

/**
 * Longer lines are cut (with a note of how much): 1,000 lines stay well under Lambda's 6 MB
 * response limit whatever the training code prints (a progress bar redrawn with `\r` is one line).
 */
export const MAX_LINE_CHARS = 2000;

/** Text → lines: the trailing newline of the last line ends it, it does not start another. */
export function logLines(text: string, tailLines: number): string[] {
  if (text === '') return [];
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines
    .slice(-tailLines)
    .map((l) =>
      l.length > MAX_LINE_CHARS
        ? `${l.slice(0, MAX_LINE_CHARS)} … [${l.length - MAX_LINE_CHARS} more characters]`
        : l,
    );
}

function unavailable(record: RunRecord, what: string, cause?: unknown): RunLogsUnavailableError {
  const ended = isTerminal(record.phase)
    ? `; the run ended (${record.phase}) and its pods are deleted with its job, so its logs are not kept`
    : '';
  return new RunLogsUnavailableError(
    `run ${record.runId} (phase ${record.phase}) has no logs to read: ${what}${ended}`,
    record.phase,
    cause === undefined ? undefined : { cause },
  );
}

export function makeGetRunLogs(deps: {
  records: RunRecords;
  config: GantryConfig;
  gateway: (cluster: string) => Promise<ClusterGateway>;
}) {
  const getRun = makeGetRun(deps);
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
    const job = record.job;
    if (!job) throw unavailable(record, 'its job is not created yet');
    const gateway = await deps.gateway(job.cluster);
    const pods = (await gateway.listPods(`${LABEL.runId}=${record.runId}`, opts)).filter(
      (p) => p.metadata.namespace === job.namespace,
    );
    const chosen = nodePod(job.kind as JobKind, job.name, pods, node);
    if (!chosen) throw unavailable(record, `node ${node} has no pod yet`);
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
    return {
      runId: record.runId,
      pod: chosen.pod,
      container: chosen.container,
      lines: logLines(text, tailLines),
    };
  };
}
