import { randomBytes, timingSafeEqual } from 'node:crypto';
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

/**
 * The per-run write token: an unguessable path segment minted at submit and kept in the run
 * record (its `spec.metricsUri`). Only the run's own pods are given it (GANTRY_METRICS_URI), so an
 * object under a run's prefix without it came from another writer and is dropped
 * (docs/metric-channel-security.md). 128 random bits, lower-case hex.
 */
const TOKEN = /^[0-9a-f]{32}$/;
export function newMetricsToken(): string {
  return randomBytes(16).toString('hex');
}

/**
 * Where a run's training code writes its metric objects (the Gantry bucket, whatever the output
 * URI): `runs/<run id>/metrics/<token>/`. Without a token, the layout of runs submitted before
 * tokens existed.
 */
export const metricsPrefix = (runId: string, token?: string) =>
  token === undefined ? `runs/${runId}/metrics/` : `runs/${runId}/metrics/${token}/`;
export const metricsUri = (bucket: string, runId: string, token?: string) =>
  `s3://${bucket}/${metricsPrefix(runId, token)}`;
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
/**
 * Metrics tracked per run; points of further names are dropped (and counted). The reserved names
 * (a trial's objective) always have a slot: other names get at most MAX_SERIES minus those.
 */
export const MAX_SERIES = 64;
/**
 * New metric names one object may add: a single line with thousands of names cannot take every
 * slot before the names the training reports in its next objects.
 */
export const MAX_NEW_SERIES_PER_OBJECT = 16;
/** Reserved names honoured per run (a trial's objective is one). */
export const MAX_RESERVED = 4;
/** Object keys remembered for deduplication (a redelivered notification or a re-read is a no-op). */
export const MAX_SOURCES = 64;

const METRIC_KEY = /^runs\/(run-[a-z2-7]{20})\/metrics\/(?:([^/]+)\/)?[^/]+\.jsonl$/;

/**
 * The run a key reports for and the token segment it carries, when the key is a metric object
 * (`runs/<run id>/metrics/<token>/<name>.jsonl`, or `runs/<run id>/metrics/<name>.jsonl` from a
 * run without a token). The token is not checked here: only the run's record knows it.
 */
export function parseMetricKey(key: string): { runId: string; token?: string } | undefined {
  const m = METRIC_KEY.exec(key);
  if (!m || !RUN_ID.test(m[1] as string)) return undefined;
  return { runId: m[1] as string, ...(m[2] !== undefined ? { token: m[2] } : {}) };
}

/** The run a key reports for, when the key is a metric object. */
export function runOfMetricKey(key: string): string | undefined {
  return parseMetricKey(key)?.runId;
}

/**
 * The token in a run's metrics URI: a string when the URI is the run's with a token, `null` when
 * it is the run's tokenless URI (a run submitted before tokens), undefined when it is not the run's.
 */
export function metricsTokenOf(uri: string, bucket: string, runId: string): string | null | undefined {
  const base = metricsUri(bucket, runId);
  if (uri === base) return null;
  if (!uri.startsWith(base) || !uri.endsWith('/')) return undefined;
  const token = uri.slice(base.length, -1);
  return TOKEN.test(token) ? token : undefined;
}

/** Whether an object's token segment is the run's (constant time; both absent is a tokenless run's). */
export function tokenMatches(expected: string | null, got: string | undefined): boolean {
  if (expected === null || got === undefined) return expected === null && got === undefined;
  const a = Buffer.from(expected);
  const b = Buffer.from(got);
  return a.length === b.length && timingSafeEqual(a, b);
}

const METRIC_NAME = /^[A-Za-z0-9_.:/-]{1,128}$/;
const METRIC_NAME_RULE = 'metric names are 1–128 of A-Z a-z 0-9 _ . : / -';

/**
 * One line of a metric object. Every field is optional, but a line must carry something. Built on
 * first use, not at import: every function imports the wiring that can reach this module, and only
 * the metrics consumer and PublishArtifacts parse lines. `metrics` is checked by `metricsOf`, not
 * by zod: a record schema drops a `__proto__` key, and every valid name must be taken.
 */
const buildMetricLineSchema = () =>
  z.strictObject({
    /** ISO 8601; when absent, the object's last-modified time. */
    time: z.optional(z.iso.datetime({ offset: true })),
    /** Training step (or epoch): orders points written in the same second. */
    step: z.optional(z.number().check(z.int(), z.gte(0))),
    progressPercentage: z.optional(z.number().check(z.gte(0), z.lte(100))),
    estimatedRemainingSeconds: z.optional(z.number().check(z.gte(0))),
    metrics: z.optional(z.unknown()),
  });
let metricLineSchema: ReturnType<typeof buildMetricLineSchema> | undefined;

/** A parsed line: the metrics in a Map (any valid name, `constructor` and `__proto__` included). */
export interface MetricLine {
  time?: string;
  step?: number;
  progressPercentage?: number;
  estimatedRemainingSeconds?: number;
  metrics?: Map<string, number>;
}

/** A line's `metrics` (parsed JSON) as a Map, or the first rule it breaks. Own keys only. */
function metricsOf(value: unknown): Map<string, number> | string {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return 'metrics: must be an object of name → number';
  const out = new Map<string, number>();
  for (const name of Object.keys(value)) {
    if (!METRIC_NAME.test(name)) return `metrics.${name}: ${METRIC_NAME_RULE}`;
    const v: unknown = (value as Record<string, unknown>)[name];
    if (typeof v !== 'number' || !Number.isFinite(v)) return `metrics.${name}: must be a finite number`;
    out.set(name, v);
  }
  return out;
}

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
      problems.push(`line ${i + 1}: ${field}: ${issue?.message ?? 'invalid'}`);
      continue;
    }
    const { metrics: rawMetrics, ...rest } = parsed.data;
    const l = rest as MetricLine;
    if (rawMetrics !== undefined) {
      const metrics = metricsOf(rawMetrics);
      if (typeof metrics === 'string') {
        problems.push(`line ${i + 1}: ${metrics}`);
        continue;
      }
      l.metrics = metrics;
    }
    if (
      l.progressPercentage === undefined &&
      l.estimatedRemainingSeconds === undefined &&
      (l.metrics?.size ?? 0) === 0
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
 * The latest time a line of this object may carry: when S3 recorded the object (its
 * LastModified, or the notification's eventTime), never later than now. S3's Last-Modified has
 * whole seconds, so a time in whole seconds covers the rest of that second: an honest line
 * written a moment before the object was stamped is not moved.
 */
export function writtenBound(lastModified: string, now: Date): number {
  const at = Date.parse(lastModified);
  if (!Number.isFinite(at)) return now.getTime();
  return Math.min(at % 1000 === 0 ? at + 999 : at, now.getTime());
}

/** What the fold needs to know about the run beyond the object. */
export interface FoldOptions {
  /**
   * Metric names that always get a series slot (a trial's sweep objective): at most MAX_RESERVED
   * are honoured, and other names never take the slots they need.
   */
  reserved?: readonly string[];
}

/**
 * Fold one object's lines into the history. Returns a new history, or undefined when the object
 * (same key and ETag) was folded in before. A line dated after the object was written (see
 * `writtenBound`) is recorded at that time instead: a point can never be dated after its object,
 * so a line claiming the year 2999 cannot pin the run's latest value.
 */
export function foldObject(
  history: MetricHistory,
  object: { key: string; etag: string; lastModified: string; text: string },
  now: Date,
  opts: FoldOptions = {},
): { history: MetricHistory; problems: string[] } | undefined {
  if (history.sources.some((s) => s.key === object.key && s.etag === object.etag)) return undefined;
  const { lines, problems } = parseMetricObject(object.text);
  // A Map, never a plain object: any valid name (`constructor`, `__proto__`) is a series.
  const series = new Map<string, SeriesPoint[]>();
  for (const [name, points] of Object.entries(history.series)) series.set(name, [...points]);
  const reserved = new Set((opts.reserved ?? []).slice(0, MAX_RESERVED));
  let others = 0;
  for (const name of series.keys()) if (!reserved.has(name)) others++;
  let newInObject = 0;
  /** Whether a name has (or now gets) a slot. */
  const slot = (name: string): SeriesPoint[] | undefined => {
    const existing = series.get(name);
    if (existing) return existing;
    if (!reserved.has(name)) {
      if (others >= MAX_SERIES - reserved.size || newInObject >= MAX_NEW_SERIES_PER_OBJECT) return undefined;
      others++;
      newInObject++;
    }
    const created: SeriesPoint[] = [];
    series.set(name, created);
    return created;
  };
  const bound = writtenBound(object.lastModified, now);
  // A line without a time, or dated after its object: the object's write time.
  const written = Date.parse(object.lastModified) <= now.getTime() ? object.lastModified : now.toISOString();
  let progress = history.progress;
  let dropped = problems.length;
  let lastAt = history.lastAt;
  for (const l of lines) {
    const t = l.time !== undefined && Date.parse(l.time) <= bound ? l.time : written;
    const reported = Math.min(Date.parse(t), now.getTime());
    if (Number.isFinite(reported) && (lastAt === undefined || reported > Date.parse(lastAt)))
      lastAt = new Date(reported).toISOString();
    for (const [name, v] of l.metrics ?? []) {
      const points = slot(name);
      if (!points) {
        dropped++;
        continue;
      }
      insert(points, { t, v, ...(l.step !== undefined ? { s: l.step } : {}) });
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
  const sources = [
    ...history.sources.filter((s) => s.key !== object.key),
    { key: object.key, etag: object.etag },
  ].slice(-MAX_SOURCES);
  return {
    history: {
      ...history,
      // fromEntries defines own properties (`__proto__` included), unlike assignment.
      series: Object.fromEntries([...series].map(([name, points]) => [name, thin(points)])),
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
  const out: Array<[string, number]> = [];
  for (const [name, points] of Object.entries(history.series)) {
    const last = points[points.length - 1];
    if (last) out.push([name, last.v]);
  }
  return Object.fromEntries(out);
}
