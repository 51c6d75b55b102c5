const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
let threshold: number = LEVELS.info;
let thresholdOf: string | undefined;

/** One JSON log line (CloudWatch parses it); `GANTRY_LOG_LEVEL` (default info) filters. */
export function log(level: Exclude<keyof typeof LEVELS, 'silent'>, fields: Record<string, unknown>): void {
  const setting = process.env.GANTRY_LOG_LEVEL ?? 'info';
  if (setting !== thresholdOf) {
    thresholdOf = setting;
    threshold = LEVELS[setting as keyof typeof LEVELS] ?? LEVELS.info;
  }
  if (LEVELS[level] < threshold) return;
  console.log(JSON.stringify({ level: level.toUpperCase(), time: new Date().toISOString(), ...fields }));
}

/** A line from a use case (`{ level: 'INFO' | 'ERROR' | …, msg, … }`), through the same filter. */
export function logLine(line: Record<string, unknown>): void {
  const { level, ...fields } = line;
  const name = String(level ?? 'info').toLowerCase();
  log(name in LEVELS && name !== 'silent' ? (name as 'info') : 'info', fields);
}
