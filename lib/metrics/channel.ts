import { RUN_ID } from '../run/ids.ts';
import type { RunProgress } from '../run/record.ts';
import * as z from '../zod.ts';

/**
 * The metric channel: training code reports progress and metrics by writing small JSON Lines
 * objects under its run's `GANTRY_METRICS_URI` (`s3://<gantry bucket>/runs/<run id>/metrics/`);
 * S3 notifies the metrics queue and the consumer (lib/metrics/ingest.ts) folds them into the run's
 * bounded metric history and its record. It works on every cluster and job kind, unlike Trainer's
 * `status.trainerStatus` (alpha `TrainJobStatus` gate, off on a default install). Pure.
 */

/** Where a run's training code writes its metric objects (the Gantry bucket, whatever the output URI). */
export const metricsPrefix = (runId: string) => `runs/${runId}/metrics/`;
export const metricsUri = (bucket: string, runId: string) => `s3://${bucket}/${metricsPrefix(runId)}`;
/** The run's metric history: beside the record, outside the notified `metrics/` prefix. */
export const historyKey = (runId: string) => `runs/${runId}/metric-history.json`;

/** The suffix the bucket notification filters on: nothing else a run writes ends in it. */
export const METRIC_OBJECT_SUFFIX = '.jsonl';
/** Objects larger than this are not read (a metric object is a few lines). */
export const MAX_OBJECT_BYTES = 256 * 1024;
/** Lines read from one object. */
export const MAX_LINES = 1000;
/** Points kept per metric: past it a series is thinned to half its resolution (oldest points first). */
export const MAX_POINTS = 512;
/** Metrics tracked per run; points of further names are dropped (and counted). */
export const MAX_SERIES = 64;
/** Object keys remembered for deduplication (a redelivered notification or a re-read is a no-op). */
export const MAX_SOURCES = 64;

const METRIC_KEY = /^runs\/(run-[a-z2-7]{20})\/metrics\/[^/]+\.jsonl$/;

/** The run a key reports for, when the key is a metric object (`runs/<run id>/metrics/<name>.jsonl`). */
export function runOfMetricKey(key: string): string | undefined {
  const m = METRIC_KEY.exec(key);
  return m && RUN_ID.test(m[1] as string) ? m[1] : undefined;
}

const METRIC_NAME = /^[A-Za-z0-9_.:/-]{1,128}$/;

/**
 * One line of a metric object. Every field is optional, but a line must carry something. Built on
 * first use, not at import: every function imports the wiring that can reach this module, and only
 * the metrics consumer and PublishArtifacts parse lines.
 */
const buildMetricLineSchema = () =>
  z.strictObject({
    /** ISO 8601; when absent, the object's last-modified time. */
    time: z.optional(z.iso.datetime({ offset: true })),
    /** Training step (or epoch): orders points written in the same second. */
    step: z.optional(z.number().check(z.int(), z.gte(0))),
    progressPercentage: z.optional(z.number().check(z.gte(0), z.lte(100))),
    estimatedRemainingSeconds: z.optional(z.number().check(z.gte(0))),
    metrics: z.optional(
      z.record(
        z.string().check(z.regex(METRIC_NAME, 'metric names are 1–128 of A-Z a-z 0-9 _ . : / -')),
        z.number().check(z.refine(Number.isFinite, 'must be a finite number')),
      ),
    ),
  });
export type MetricLine = z.output<ReturnType<typeof buildMetricLineSchema>>;
let metricLineSchema: ReturnType<typeof buildMetricLineSchema> | undefined;

/** A point of a series: time, value, and the step when the line gave one. */
export interface SeriesPoint {
  t: string;
  v: number;
  s?: number;
}

/** The run's metric history, `runs/<id>/metric-history.json`. */
export interface MetricHistory {
  runId: string;
  /** Every metric as a time series, oldest first, at most MAX_POINTS points each. */
  series: Record<string, SeriesPoint[]>;
  /** The latest progress any line reported (by time, then step). */
  progress?: RunProgress & { step?: number };
  /**
   * The newest time of any line folded in (never later than when it was folded in: a clock ahead
   * cannot hold off stall detection): when the training last reported.
   */
  lastAt?: string;
  /** Keys (with ETags) of the objects already folded in, newest last. */
  sources: Array<{ key: string; etag: string }>;
  /** Lines folded in, and lines or points dropped (malformed, past MAX_SERIES). */
  lines: number;
  dropped: number;
  updatedAt: string;
}

export function emptyHistory(runId: string, now: Date): MetricHistory {
  return { runId, series: {}, sources: [], lines: 0, dropped: 0, updatedAt: now.toISOString() };
}

export interface ParsedObject {
  lines: MetricLine[];
  /** Malformed lines, each named by its number and the first rule it broke. */
  problems: string[];
}

/** Parse a metric object's text: one JSON object per non-empty line. Never throws. */
export function parseMetricObject(text: string): ParsedObject {
  const lines: MetricLine[] = [];
  const problems: string[] = [];
  const raw = text.split('\n');
  for (const [i, line] of raw.entries()) {
    if (line.trim() === '') continue;
    if (lines.length + problems.length >= MAX_LINES) {
      problems.push(`lines after ${MAX_LINES} are not read`);
      break;
    }
    let doc: unknown;
    try {
      doc = JSON.parse(line);
    } catch {
      problems.push(`line ${i + 1}: not JSON`);
      continue;
    }
    metricLineSchema ??= buildMetricLineSchema();
    const parsed = metricLineSchema.safeParse(doc);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path.join('.') || '(line)';
      // A bad metric name is reported by zod as an invalid record key; its own rule says why.
      const inner = issue?.code === 'invalid_key' ? issue.issues[0]?.message : undefined;
      problems.push(`line ${i + 1}: ${field}: ${inner ?? issue?.message ?? 'invalid'}`);
      continue;
    }
    const l = parsed.data;
    if (
      l.progressPercentage === undefined &&
      l.estimatedRemainingSeconds === undefined &&
      Object.keys(l.metrics ?? {}).length === 0
    ) {
      problems.push(`line ${i + 1}: carries no metrics and no progress`);
      continue;
    }
    lines.push(l);
  }
  return { lines, problems };
}

/** The progress as a point, to order it by time then step like the series. */
function pointOf(p: RunProgress & { step?: number }): SeriesPoint {
  return { t: p.updatedAt ?? '1970-01-01T00:00:00Z', v: 0, ...(p.step !== undefined ? { s: p.step } : {}) };
}

/** Order of points: time, then step. */
function before(a: SeriesPoint, b: SeriesPoint): boolean {
  if (a.t !== b.t) return Date.parse(a.t) < Date.parse(b.t);
  return (a.s ?? -1) < (b.s ?? -1);
}

function samePoint(a: SeriesPoint, b: SeriesPoint): boolean {
  return a.t === b.t && a.s === b.s && a.v === b.v;
}

/** Insert in order (appending is the common case); an identical point is not added twice. */
function insert(series: SeriesPoint[], p: SeriesPoint): boolean {
  let i = series.length;
  while (i > 0 && before(p, series[i - 1] as SeriesPoint)) i--;
  if (i > 0 && samePoint(series[i - 1] as SeriesPoint, p)) return false;
  series.splice(i, 0, p);
  return true;
}

/**
 * Halve a series' resolution until it fits `cap`: every other point goes, the first and the last
 * stay. Points added later arrive at full resolution, so recent history is the densest.
 */
export function thin(series: SeriesPoint[], cap = MAX_POINTS): SeriesPoint[] {
  let out = series;
  while (out.length > cap) {
    const last = out.length - 1;
    out = out.filter((_, i) => i % 2 === 0 || i === last);
  }
  return out;
}

/**
 * Fold one object's lines into the history. Returns a new history, or undefined when the object
 * (same key and ETag) was folded in before.
 */
export function foldObject(
  history: MetricHistory,
  object: { key: string; etag: string; lastModified: string; text: string },
  now: Date,
): { history: MetricHistory; problems: string[] } | undefined {
  if (history.sources.some((s) => s.key === object.key && s.etag === object.etag)) return undefined;
  const { lines, problems } = parseMetricObject(object.text);
  const series: Record<string, SeriesPoint[]> = {};
  for (const [name, points] of Object.entries(history.series)) series[name] = [...points];
  let progress = history.progress;
  let dropped = problems.length;
  let lastAt = history.lastAt;
  for (const l of lines) {
    const t = l.time ?? object.lastModified;
    const reported = Math.min(Date.parse(t), now.getTime());
    if (Number.isFinite(reported) && (lastAt === undefined || reported > Date.parse(lastAt)))
      lastAt = new Date(reported).toISOString();
    for (const [name, v] of Object.entries(l.metrics ?? {})) {
      if (!(name in series) && Object.keys(series).length >= MAX_SERIES) {
        dropped++;
        continue;
      }
      series[name] ??= [];
      insert(series[name], { t, v, ...(l.step !== undefined ? { s: l.step } : {}) });
    }
    if (l.progressPercentage !== undefined || l.estimatedRemainingSeconds !== undefined) {
      const candidate: RunProgress & { step?: number } = {
        ...(l.progressPercentage !== undefined ? { percent: l.progressPercentage } : {}),
        ...(l.estimatedRemainingSeconds !== undefined ? { etaSeconds: l.estimatedRemainingSeconds } : {}),
        updatedAt: t,
        ...(l.step !== undefined ? { step: l.step } : {}),
      };
      if (
        progress === undefined ||
        !before({ t, v: 0, ...(l.step !== undefined ? { s: l.step } : {}) }, pointOf(progress))
      )
        progress = candidate;
    }
  }
  for (const name of Object.keys(series)) series[name] = thin(series[name] as SeriesPoint[]);
  const sources = [
    ...history.sources.filter((s) => s.key !== object.key),
    { key: object.key, etag: object.etag },
  ].slice(-MAX_SOURCES);
  return {
    history: {
      ...history,
      series,
      ...(progress ? { progress } : {}),
      ...(lastAt !== undefined ? { lastAt } : {}),
      sources,
      lines: history.lines + lines.length,
      dropped: history.dropped + dropped,
      updatedAt: now.toISOString(),
    },
    problems,
  };
}

/** The latest value of every metric: what the run record, sweeps and early stopping read. */
export function latestMetrics(history: MetricHistory): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, points] of Object.entries(history.series)) {
    const last = points[points.length - 1];
    if (last) out[name] = last.v;
  }
  return out;
}
