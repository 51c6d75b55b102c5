import { type ParseArgsConfig, parseArgs } from 'node:util';

/**
 * The command line, parsed with node:util `parseArgs` (strict: an unknown option or a missing
 * value is a usage error). Each command has its own option table; the first positional is the
 * command. Pure: no I/O.
 */

type Options = NonNullable<ParseArgsConfig['options']>;

/** Options every command takes: where the API is and who the caller is. */
const TARGET: Options = {
  profile: { type: 'string', short: 'p' },
  endpoint: { type: 'string' },
  /** The local host's identity (auth: local profiles), e.g. `local:vision`; GANTRY_PRINCIPAL too. */
  principal: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

const WATCH: Options = {
  interval: { type: 'string' },
};

/** `-o json`: what the command prints as JSON (one document, or one per line where it streams). */
const OUTPUT: Options = {
  output: { type: 'string', short: 'o' },
};

/** The `-o` values. */
export const OUTPUT_FORMATS = ['table', 'json'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

interface CommandSpec {
  /** Positional arguments, by name, all required. */
  args: readonly string[];
  options: Options;
  summary: string;
}

export const COMMANDS = {
  submit: {
    args: ['FILE'],
    options: {
      watch: { type: 'boolean', short: 'w' },
      'idempotency-key': { type: 'string' },
      ...WATCH,
      ...OUTPUT,
    },
    summary: 'Submit a run or a sweep (YAML or JSON; - reads stdin) and print its id',
  },
  watch: {
    args: ['ID'],
    options: WATCH,
    summary: 'Follow a run or a sweep to its end: phase, admission, progress, ETA, latest loss',
  },
  logs: {
    args: ['ID'],
    options: {
      follow: { type: 'boolean', short: 'f' },
      node: { type: 'string' },
      attempt: { type: 'string' },
      tail: { type: 'string' },
      ...WATCH,
      ...OUTPUT,
    },
    summary:
      "Print the tail of a node's trainer container log (-f: keep printing new lines; an ended run's or attempt's from the archive)",
  },
  events: {
    args: ['ID'],
    options: { follow: { type: 'boolean', short: 'f' }, json: { type: 'boolean' }, ...WATCH, ...OUTPUT },
    summary:
      "Print a run's lifecycle events (-f: keep printing them until it ends; --json or -o json: one envelope a line)",
  },
  ls: {
    args: [],
    options: {
      phase: { type: 'string' },
      model: { type: 'string' },
      sweep: { type: 'string' },
      metric: { type: 'string' },
      limit: { type: 'string' },
      ...OUTPUT,
    },
    summary:
      "List the caller's runs: phase, duration, a metric's latest value (--metric, default loss), a trial's parameters; filtered by phase, model and sweep",
  },
  show: {
    args: ['ID'],
    options: OUTPUT,
    summary:
      'Describe a run or a sweep: where it runs, its phase history, metrics, request (-o json: the API view)',
  },
  cancel: { args: ['ID'], options: OUTPUT, summary: 'Cancel a run or a sweep' },
  rerun: {
    args: ['ID'],
    options: {
      set: { type: 'string', multiple: true },
      'set-string': { type: 'string', multiple: true },
      watch: { type: 'boolean', short: 'w' },
      'idempotency-key': { type: 'string' },
      ...WATCH,
      ...OUTPUT,
    },
    summary:
      'Start a run again as a new run, with --set key=value overrides (dotted paths: env.LR=0.01, numNodes=2) and print its id',
  },
  sweep: {
    args: ['ID'],
    options: OUTPUT,
    summary: "A sweep's trials sorted by objective, best first (marked *)",
  },
  sweeps: {
    args: [],
    options: { phase: { type: 'string' }, limit: { type: 'string' }, ...OUTPUT },
    summary: "List the caller's sweeps: phase, trials ended, the best objective",
  },
  metrics: {
    args: ['ID'],
    options: { name: { type: 'string' }, ...OUTPUT },
    summary: "A run's metrics: the latest value of each (--name NAME: that metric's series)",
  },
  validate: {
    args: ['FILE'],
    options: OUTPUT,
    summary: 'Dry run: check a run request (or a sweep and its template) without submitting it',
  },
  models: {
    args: [],
    options: {},
    summary: "List the caller's models: latest version and where each alias points",
  },
  model: {
    args: ['NAME'],
    options: { limit: { type: 'string' } },
    summary: "A model's versions (metrics, aliases), each alias's recent moves and pending approvals",
  },
  promote: {
    args: ['MODEL', 'VERSION'],
    options: { alias: { type: 'string' }, reason: { type: 'string' } },
    summary: 'Point an alias (--alias, default production) at a version: promote, or approve a pending one',
  },
  rollback: {
    args: ['MODEL'],
    options: { alias: { type: 'string' }, to: { type: 'string' }, reason: { type: 'string' } },
    summary: 'Move an alias (default production) back to its previous version, or to --to VERSION',
  },
  usage: {
    args: [],
    options: {
      team: { type: 'string' },
      model: { type: 'string' },
      period: { type: 'string' },
      json: { type: 'boolean' },
    },
    summary:
      "A team's used and lost GPU-hours of a month (each day) or a day (--period 2026-12 or 2026-12-05), and its monthly budget",
  },
} as const satisfies Record<string, CommandSpec>;

export type CommandName = keyof typeof COMMANDS;

export interface ParsedCommand {
  command: CommandName;
  /** The positional arguments by name (FILE, ID). */
  args: Record<string, string>;
  profile?: string;
  endpoint?: string;
  /** Who to act as on the local host (`x-gantry-principal`), e.g. `local:vision`. */
  principal?: string;
  watch: boolean;
  follow: boolean;
  /** events: print each event's JSON envelope instead of a line. */
  json: boolean;
  idempotencyKey?: string;
  /** Seconds between polls. */
  intervalSeconds: number;
  node?: number;
  /** logs: the attempt whose log to read (default the run's current or last). */
  attempt?: number;
  tail?: number;
  phase?: string;
  model?: string;
  limit?: number;
  /** promote / rollback: the alias moved (default production). */
  alias?: string;
  reason?: string;
  /** rollback: the version to go back to (default the alias's previous one). */
  to?: number;
  /** `-o`: `table` (default) or `json`. */
  output: OutputFormat;
  /** ls: the sweep whose trials to list. */
  sweep?: string;
  /** ls: the metric whose latest value is shown (default loss). */
  metric?: string;
  /** metrics: the one metric whose series to print. */
  name?: string;
  /** rerun: the overrides from `--set` / `--set-string`, as a JSON merge patch on the request. */
  overrides?: Record<string, unknown>;
  /** usage: the team (when the caller has several) and the UTC month or day. */
  team?: string;
  period?: string;
}

export type Parsed = ParsedCommand | { help: string };

/** A command line that cannot run: wrong command, option or value. Exit code 3. */
export class UsageError extends Error {
  override readonly name = 'UsageError' as const;
}

export const DEFAULT_INTERVAL_SECONDS = 1;

function wholeNumber(value: string | undefined, flag: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new UsageError(
      `${flag} must be a whole number from ${min} to ${max} (got ${JSON.stringify(value)})`,
    );
  }
  return Number(value);
}

function seconds(value: string | undefined): number {
  if (value === undefined) return DEFAULT_INTERVAL_SECONDS;
  const n = Number(value);
  if (!/^[0-9]*\.?[0-9]+$/.test(value) || n < 0.05 || n > 300) {
    throw new UsageError(
      `--interval must be a number of seconds from 0.05 to 300 (got ${JSON.stringify(value)})`,
    );
  }
  return n;
}

function optionHelp(options: Options): string {
  return Object.entries(options)
    .map(([name, o]) => `${o.short ? `-${o.short}, ` : ''}--${name}${o.type === 'string' ? ' VALUE' : ''}`)
    .join('  ');
}

export function usage(command?: CommandName): string {
  if (command) {
    const spec: CommandSpec = COMMANDS[command];
    return [
      `usage: gantry ${command} ${spec.args.join(' ')} [options]`.replace(/ +/g, ' '),
      '',
      `  ${spec.summary}`,
      '',
      `  options: ${optionHelp(spec.options) || '(none)'}`,
      `  target:  ${optionHelp(TARGET)}`,
    ].join('\n');
  }
  const entries: [string, CommandSpec][] = Object.entries(COMMANDS);
  const heads = entries.map(([name, spec]) => [name, ...spec.args].join(' '));
  const width = Math.max(...heads.map((h) => h.length));
  return [
    'usage: gantry <command> [options]',
    '',
    ...entries.map(([, spec], i) => `  ${(heads[i] as string).padEnd(width)}  ${spec.summary}`),
    '',
    '  Every command takes --profile NAME (or GANTRY_PROFILE) and --endpoint URL (or GANTRY_ENDPOINT);',
    '  on npm run dev, --principal P (or GANTRY_PRINCIPAL) acts as a team, e.g. --principal local:vision.',
    '  gantry <command> --help shows its options. Exit codes: see README.md, section CLI.',
  ].join('\n');
}

/** Parse `argv` (without `node` and the script). Throws UsageError. */
export function parseCommandLine(argv: readonly string[]): Parsed {
  const [first, ...rest] = argv;
  if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
    return { help: usage() };
  }
  if (!Object.hasOwn(COMMANDS, first)) {
    throw new UsageError(
      `unknown command ${JSON.stringify(first)}; one of ${Object.keys(COMMANDS).join(', ')}`,
    );
  }
  const command = first as CommandName;
  const spec: CommandSpec = COMMANDS[command];
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...rest],
      options: { ...TARGET, ...spec.options },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify .*$/s, ''));
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  if (values.help) return { help: usage(command) };
  if (parsed.positionals.length !== spec.args.length) {
    throw new UsageError(
      spec.args.length
        ? `gantry ${command} takes ${spec.args.join(' ')} (got ${parsed.positionals.length} arguments)`
        : `gantry ${command} takes no arguments (got ${parsed.positionals.join(' ')})`,
    );
  }
  const str = (name: string) => values[name] as string | undefined;
  const out: ParsedCommand = {
    command,
    args: Object.fromEntries(spec.args.map((name, i) => [name, parsed.positionals[i] as string])),
    watch: values.watch === true,
    follow: values.follow === true,
    json: values.json === true,
    intervalSeconds: seconds(str('interval')),
    output: outputFormat(str('output'), values.json === true),
  };
  const set = <K extends keyof ParsedCommand>(key: K, value: ParsedCommand[K] | undefined) => {
    if (value !== undefined) out[key] = value;
  };
  set('profile', str('profile'));
  set('endpoint', str('endpoint'));
  set('principal', str('principal'));
  set('idempotencyKey', str('idempotency-key'));
  set('node', wholeNumber(str('node'), '--node', 0, 1023));
  set('attempt', wholeNumber(str('attempt'), '--attempt', 1, 1000));
  set('tail', wholeNumber(str('tail'), '--tail', 1, 100_000));
  set('phase', str('phase'));
  set('model', str('model'));
  set('limit', wholeNumber(str('limit'), '--limit', 1, 100_000));
  set('alias', str('alias'));
  set('reason', str('reason'));
  set('to', wholeNumber(str('to'), '--to', 1, 999_999_999));
  set('sweep', str('sweep'));
  set('metric', str('metric'));
  set('name', str('name'));
  const sets = (parsed.values as Record<string, string[] | undefined>).set ?? [];
  const strings = (parsed.values as Record<string, string[] | undefined>)['set-string'] ?? [];
  if (sets.length + strings.length > 0) set('overrides', overridesFrom(sets, strings));
  set('team', str('team'));
  set('period', str('period'));
  if (out.period !== undefined && !/^[0-9]{4}-[0-9]{2}(-[0-9]{2})?$/.test(out.period)) {
    throw new UsageError(
      `--period must be a UTC month YYYY-MM or a day YYYY-MM-DD (got ${JSON.stringify(out.period)})`,
    );
  }
  if (out.idempotencyKey !== undefined && !/^[\x21-\x7e]{1,128}$/.test(out.idempotencyKey)) {
    throw new UsageError('--idempotency-key must be 1–128 printable ASCII characters without spaces');
  }
  return out;
}

function outputFormat(value: string | undefined, json: boolean): OutputFormat {
  if (value === undefined) return json ? 'json' : 'table';
  if (!(OUTPUT_FORMATS as readonly string[]).includes(value)) {
    throw new UsageError(
      `-o/--output must be one of ${OUTPUT_FORMATS.join(', ')} (got ${JSON.stringify(value)})`,
    );
  }
  return value as OutputFormat;
}

/** A `--set` value: JSON when it parses as JSON (numbers, true, null, ["a"]), else the text itself. */
function setValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * `--set a.b=v` lines → the JSON merge patch the API's rerun takes (`{a: {b: v}}`). `--set-string`
 * keeps the value text; so does `--set` under `env.` (environment variables are strings).
 */
export function overridesFrom(
  sets: readonly string[],
  strings: readonly string[] = [],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const put = (line: string, flag: string, asString: boolean) => {
    const eq = line.indexOf('=');
    const path = eq > 0 ? line.slice(0, eq).split('.') : [];
    if (eq <= 0 || path.some((p) => p === '' || p === '__proto__')) {
      throw new UsageError(
        `${flag} takes key=value with a dotted key such as env.LR=0.01 or numNodes=2 (got ${JSON.stringify(line)})`,
      );
    }
    const text = line.slice(eq + 1);
    const value = asString || path[0] === 'env' ? text : setValue(text);
    let node = out;
    for (const key of path.slice(0, -1)) {
      const next = node[key];
      if (next === null || typeof next !== 'object' || Array.isArray(next)) {
        Object.defineProperty(node, key, { value: {}, enumerable: true, writable: true, configurable: true });
      }
      node = node[key] as Record<string, unknown>;
    }
    Object.defineProperty(node, path.at(-1) as string, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  };
  for (const line of sets) put(line, '--set', false);
  for (const line of strings) put(line, '--set-string', true);
  return out;
}
