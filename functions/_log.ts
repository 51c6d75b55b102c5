/**
 * Gantry's log lines, through Powertools Logger: one JSON object per call, `level`, `time`, `msg`,
 * `service`, then the invocation's correlation keys (`requestId`, and `runId`, `sweepId`, `team`
 * where the invocation is about one run or sweep: `withLogKeys`) and the call's own fields.
 * `GANTRY_LOG_LEVEL` (debug, info — the default —, warn, error, silent) filters, read at each call
 * so tests can switch it. In Lambda the line goes to stdout through Powertools' own console (a bare
 * JSON line, no runtime prefix); elsewhere (the embedded default, tests) through `console.log`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { LogFormatter, Logger, LogItem } from '@aws-lambda-powertools/logger';
import type { LogAttributes, UnformattedAttributes } from '@aws-lambda-powertools/logger/types';

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
type Level = Exclude<keyof typeof LEVELS, 'silent'>;
let threshold: number = LEVELS.info;
let thresholdOf: string | undefined;

/** The correlation keys of one invocation; absent ones are left out of the lines. */
export interface LogKeys {
  requestId?: string | undefined;
  runId?: string | undefined;
  sweepId?: string | undefined;
  team?: string | undefined;
}

/**
 * The keys of the invocation in progress. Per async context, not per process: the embedded default
 * runs many handlers concurrently in one process, and a key set for one must not reach another's
 * lines (Powertools' appendKeys is process-wide outside Lambda's concurrent mode).
 */
const current = new AsyncLocalStorage<LogKeys & { coldStart?: boolean }>();
let cold = true;

/** `service` is a key Powertools reserves: a line's own service travels under this name to the formatter. */
const SERVICE_KEY = '__gantryService';

/** Gantry's field names (`time`, `msg`) and order, Powertools' context (request id, cold start, trace). */
class GantryLogFormatter extends LogFormatter {
  formatAttributes(attributes: UnformattedAttributes, additional: LogAttributes): LogItem {
    const { [SERVICE_KEY]: service, ...fields } = additional;
    const scope = current.getStore();
    return new LogItem({
      attributes: {
        level: attributes.logLevel,
        time: this.formatTimestamp(attributes.timestamp),
        msg: attributes.message,
        service: service ?? attributes.serviceName,
        ...scope,
        ...(attributes.xRayTraceId ? { xrayTraceId: attributes.xRayTraceId } : {}),
      },
    }).addAttributes(fields);
  }
}

class GantryLogger extends Logger {
  /** Outside Lambda, `console.log`: the embedded default's output and what tests capture. */
  protected override printLog(logLevel: number, item: LogItem): void {
    if (process.env.AWS_LAMBDA_FUNCTION_NAME) {
      super.printLog(logLevel, item);
      return;
    }
    item.prepareForPrint();
    console.log(JSON.stringify(item.getAttributes(), this.getJsonReplacer()));
  }
}

let instance: GantryLogger | undefined;

/** The process's logger, built on first use (nothing at import time). */
export function logger(): Logger {
  instance ??= new GantryLogger({
    serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'gantry',
    // Gantry's own threshold (GANTRY_LOG_LEVEL) decides; Powertools passes everything it is given.
    logLevel: 'DEBUG',
    logFormatter: new GantryLogFormatter(),
  });
  return instance;
}

/** One JSON log line (CloudWatch parses it); `GANTRY_LOG_LEVEL` (default info) filters. */
export function log(level: Level, fields: Record<string, unknown>): void {
  const setting = process.env.GANTRY_LOG_LEVEL ?? 'info';
  if (setting !== thresholdOf) {
    thresholdOf = setting;
    // Own keys only: GANTRY_LOG_LEVEL=constructor must not read Object.prototype.
    threshold = Object.hasOwn(LEVELS, setting) ? LEVELS[setting as keyof typeof LEVELS] : LEVELS.info;
  }
  if (LEVELS[level] < threshold) return;
  const { msg, service, level: _level, message: _message, timestamp: _ts, ...rest } = fields;
  logger()[level]({
    message: msg === undefined ? '' : String(msg),
    ...rest,
    ...(service !== undefined ? { [SERVICE_KEY]: service } : {}),
  });
}

/** A line from a use case (`{ level: 'INFO' | 'ERROR' | …, msg, … }`), through the same filter. */
export function logLine(line: Record<string, unknown>): void {
  const { level, ...fields } = line;
  const name = String(level ?? 'info').toLowerCase();
  log(Object.hasOwn(LEVELS, name) && name !== 'silent' ? (name as 'info') : 'info', fields);
}

/**
 * A handler whose every log line carries the Lambda request id, whether the invocation is a cold
 * start, and the run id, sweep id and team `keysOf` finds in the event (absent ones are left out).
 * Wrap the whole middy handler, so its middlewares' lines carry them too.
 */
export function withLogKeys<E, C extends { awsRequestId?: string } | undefined, R>(
  keysOf: (event: E) => LogKeys,
  handler: (event: E, context: C) => Promise<R>,
): (event: E, context: C) => Promise<R> {
  return (event, context) => {
    let keys: LogKeys = {};
    try {
      keys = keysOf(event);
    } catch {
      // A malformed event is the handler's to refuse, not the logger's.
    }
    const coldStart = cold;
    cold = false;
    const scope = {
      ...(context?.awsRequestId ? { requestId: context.awsRequestId } : {}),
      ...(Object.fromEntries(Object.entries(keys).filter(([, v]) => typeof v === 'string' && v)) as LogKeys),
      coldStart,
    };
    return current.run(scope, () => handler(event, context));
  };
}

/** The keys of the invocation this code runs in (tests, and code that logs outside `log`). */
export function logKeys(): LogKeys {
  const { coldStart: _c, ...keys } = current.getStore() ?? {};
  return keys;
}
