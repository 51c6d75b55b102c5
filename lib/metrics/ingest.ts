import { parseDataMessage } from '../datatrigger/events.ts';
import { NotFoundError } from '../errors.ts';
import type { CallOptions, Clock, ObjectStore } from '../ports.ts';
import type { RunRecord } from '../run/record.ts';
import type { RunRecords } from '../run/records.ts';
import { updateWithRetry } from '../state/update.ts';
import {
  emptyHistory,
  foldObject,
  historyKey,
  latestMetrics,
  MAX_OBJECT_BYTES,
  METRIC_OBJECT_SUFFIX,
  type MetricHistory,
  metricsPrefix,
  metricsTokenOf,
  parseMetricKey,
  runOfMetricKey,
  tokenMatches,
} from './channel.ts';

/** Reads a metric object's text (the S3 adapter's `makeS3TextReader`). Undefined when it is gone. */
export interface MetricObjectReader {
  read(
    key: string,
    opts?: CallOptions,
  ): Promise<{ text: string; etag: string; lastModified: string; size: number } | undefined>;
}

/** A new object named by a notification (lib/datatrigger/events.ts ObjectEvent). */
export interface NotifiedObject {
  bucket: string;
  key: string;
  size?: number;
}

export interface IngestReport {
  runs: number;
  objects: number;
  /** Objects that are not metric objects of the Gantry bucket, too large, gone, or already folded in. */
  skipped: number;
  /**
   * Objects dropped because their writer is not the run: the key's token is not the run's, the run
   * does not exist, or its record names no metric channel here. Nothing is written for them.
   */
  refused: number;
  /** Runs whose history could not be written (retryable): their messages are redelivered. */
  failedRuns: string[];
}

const MAX_ATTEMPTS = 8;
/** How many of a run's newest metric objects `drain` re-reads (each is skipped when already folded in). */
const DRAIN_OBJECTS = 4;

/**
 * The metric channel's consumer: folds metric objects into each run's history (conditional
 * writes, retried on a lost race) and puts the latest metrics and progress in the run record.
 * At least once and idempotent: an object already folded in (same key and ETag) changes nothing.
 */
export function makeMetricIngester(deps: {
  store: ObjectStore;
  objects: MetricObjectReader;
  records: RunRecords;
  clock: Clock;
  bucket: string;
  /**
   * A sweep's objective metric, to reserve its series slot in a trial's history (lib/sweep): the
   * name early stopping and the sweep's ranking read. Absent: no name is reserved.
   */
  objectiveOf?: (sweepId: string, opts?: CallOptions) => Promise<string | undefined>;
  log?: (line: Record<string, unknown>) => void;
}) {
  const { store, objects, records, clock } = deps;
  const log = deps.log ?? (() => undefined);

  async function ingest(notified: NotifiedObject[], opts?: CallOptions): Promise<IngestReport> {
    const report: IngestReport = { runs: 0, objects: 0, skipped: 0, refused: 0, failedRuns: [] };
    const byRun = new Map<string, string[]>();
    for (const o of notified) {
      const runId = o.bucket === deps.bucket ? runOfMetricKey(o.key) : undefined;
      if (!runId || (o.size !== undefined && o.size > MAX_OBJECT_BYTES)) {
        report.skipped++;
        if (runId) log({ level: 'WARN', msg: 'metric object too large', runId, key: o.key, size: o.size });
        continue;
      }
      const keys = byRun.get(runId) ?? [];
      if (!keys.includes(o.key)) keys.push(o.key);
      byRun.set(runId, keys);
    }
    for (const [runId, keys] of byRun) {
      try {
        // The record first: an object for a run that does not exist, or from a writer that does
        // not hold the run's token, is dropped before anything is read or written.
        const record = await records.get(runId, opts);
        const allowed = record ? keys.filter((key) => writtenByRun(record, key)) : [];
        if (allowed.length < keys.length) {
          report.refused += keys.length - allowed.length;
          log({
            level: 'WARN',
            msg: record
              ? 'metric objects from a writer that is not the run; dropped'
              : 'metric objects for a run that does not exist; dropped',
            runId,
            // Key names without the token segment: a log reader must not learn a run's token.
            objects: keys
              .filter((k) => !allowed.includes(k))
              .slice(0, 5)
              .map(withoutToken),
            refused: keys.length - allowed.length,
          });
        }
        if (!record || allowed.length === 0) continue;
        const folded = await foldInto(record, allowed, opts);
        report.runs++;
        report.objects += folded;
        report.skipped += allowed.length - folded;
      } catch (err) {
        if (err instanceof NotFoundError) {
          report.skipped += keys.length;
          log({ level: 'WARN', msg: 'metrics for a run without a record', runId, error: err.message });
          continue;
        }
        report.failedRuns.push(runId);
        log({ level: 'ERROR', msg: 'metrics not ingested', runId, error: String(err) });
      }
    }
    return report;
  }

  /**
   * Fold in the run's newest metric objects whose notifications may not have been consumed yet:
   * called before a finished run's metrics are read (publishing, a trial's objective).
   */
  async function drain(runId: string, opts?: CallOptions): Promise<number> {
    const record = await records.get(runId, opts);
    const token = record ? runToken(record) : undefined;
    if (!record || token === undefined) return 0;
    // Only the run's own prefix: objects other writers left beside it are never listed. The
    // history is read beside the LIST (one round trip, not two: PublishArtifacts drains a trial
    // on the way from its end to its successor's release).
    const history = store.getJson<MetricHistory>(historyKey(runId), opts);
    history.catch(() => undefined);
    const listed = (await store.list(metricsPrefix(runId, token ?? undefined), opts))
      .filter(
        (o) =>
          o.key.endsWith(METRIC_OBJECT_SUFFIX) && o.size <= MAX_OBJECT_BYTES && writtenByRun(record, o.key),
      )
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .slice(-DRAIN_OBJECTS);
    if (listed.length === 0) return 0;
    // The common case, everything already folded in: one LIST and one GET (at once), no object read.
    const seen = (await history)?.value.sources ?? [];
    const fresh = listed.filter((o) => !seen.some((s) => s.key === o.key && s.etag === o.etag));
    return fresh.length === 0
      ? 0
      : foldInto(
          record,
          fresh.map((o) => o.key),
          opts,
        );
  }

  /** The run's token (null: a run from before tokens), undefined when its record names no channel here. */
  function runToken(record: RunRecord): string | null | undefined {
    const uri = record.spec.metricsUri;
    return uri === undefined ? undefined : metricsTokenOf(uri, deps.bucket, record.runId);
  }

  /** Whether an object under the run's prefix carries the run's token (the run's own pods wrote it). */
  function writtenByRun(record: RunRecord, key: string): boolean {
    const expected = runToken(record);
    const parsed = parseMetricKey(key);
    return expected !== undefined && parsed?.runId === record.runId && tokenMatches(expected, parsed.token);
  }

  /** The names that keep a series slot: a trial's objective. */
  async function reservedOf(record: RunRecord, opts?: CallOptions): Promise<string[]> {
    const sweepId = record.spec.trial?.sweepId;
    if (!sweepId || !deps.objectiveOf) return [];
    const objective = await deps.objectiveOf(sweepId, opts);
    return objective === undefined ? [] : [objective];
  }

  /** Returns how many of the objects were new. */
  async function foldInto(record: RunRecord, keys: string[], opts?: CallOptions): Promise<number> {
    const { runId } = record;
    const read: ({ key: string } & NonNullable<Awaited<ReturnType<MetricObjectReader['read']>>>)[] = [];
    for (const key of keys) {
      const o = await objects.read(key, opts);
      if (o && o.size <= MAX_OBJECT_BYTES) read.push({ key, ...o });
    }
    if (read.length === 0) return 0;
    const reserved = await reservedOf(record, opts);
    const { history, folded } = await updateWithRetry(
      async () => {
        const current = await store.getJson<MetricHistory>(historyKey(runId), opts);
        let history = current?.value ?? emptyHistory(runId, clock.now());
        let folded = 0;
        for (const o of read) {
          const next = foldObject(history, o, clock.now(), { reserved });
          if (!next) continue;
          folded++;
          history = next.history;
          if (next.problems.length > 0) {
            log({
              level: 'WARN',
              msg: 'metric lines dropped',
              runId,
              key: o.key,
              problems: next.problems.slice(0, 5),
            });
          }
        }
        // Nothing new (a redelivery, or a retry after the record write failed): the record is still
        // brought up to date below, which costs one read and no write when it already is.
        if (folded > 0)
          await store.putJson(
            historyKey(runId),
            history,
            current ? { ifMatch: current.etag } : { ifNoneMatch: true },
            opts,
          );
        return { history, folded };
      },
      { maxAttempts: MAX_ATTEMPTS },
    );
    const metrics = latestMetrics(history);
    const change = {
      ...(Object.keys(metrics).length > 0 ? { metrics } : {}),
      ...(history.progress ? { progress: recordProgress(history.progress) } : {}),
      ...(history.lastAt !== undefined ? { lastProgressAt: history.lastAt } : {}),
    };
    if (Object.keys(change).length > 0) await records.update(runId, change, opts);
    return folded;
  }

  /** The run's history, for the API. */
  async function history(runId: string, opts?: CallOptions): Promise<MetricHistory | undefined> {
    return (await store.getJson<MetricHistory>(historyKey(runId), opts))?.value;
  }

  /**
   * One SQS batch of S3 notifications (ReportBatchItemFailures): malformed messages and S3's test
   * event are acknowledged and logged, never retried; the messages of a run whose history could
   * not be written are returned for redelivery.
   */
  async function consume(
    messages: Array<{ messageId: string; body: string }>,
    opts?: CallOptions,
  ): Promise<{ batchItemFailures: Array<{ itemIdentifier: string }>; report: IngestReport }> {
    const notified: Array<NotifiedObject & { messageId: string }> = [];
    for (const m of messages) {
      let parsed: ReturnType<typeof parseDataMessage>;
      try {
        parsed = parseDataMessage(m.body);
      } catch (err) {
        log({
          level: 'WARN',
          msg: 'malformed metric notification',
          messageId: m.messageId,
          error: String(err),
        });
        continue;
      }
      if (parsed.kind !== 'objects') {
        if (parsed.kind === 'check')
          log({ level: 'WARN', msg: 'not a metric notification', messageId: m.messageId });
        continue;
      }
      for (const o of parsed.objects) notified.push({ ...o, messageId: m.messageId });
    }
    const report = await ingest(notified, opts);
    const failed = new Set(report.failedRuns);
    const retry = new Set(
      notified.filter((o) => failed.has(runOfMetricKey(o.key) ?? '')).map((o) => o.messageId),
    );
    return { batchItemFailures: [...retry].map((itemIdentifier) => ({ itemIdentifier })), report };
  }

  return { ingest, consume, drain, history };
}

export type MetricIngester = ReturnType<typeof makeMetricIngester>;

function recordProgress(p: NonNullable<MetricHistory['progress']>) {
  const { step: _step, ...progress } = p;
  return progress;
}

/** A metric key without its token segment, for logs. */
function withoutToken(key: string): string {
  return key.replace(/^(runs\/[^/]+\/metrics\/)[^/]+\/([^/]+)$/, '$1…/$2');
}
