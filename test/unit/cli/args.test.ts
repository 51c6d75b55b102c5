import { describe, expect, it } from 'vitest';
import {
  DEFAULT_INTERVAL_SECONDS,
  type ParsedCommand,
  parseCommandLine,
  UsageError,
} from '../../../cli/args.ts';

const RUN = 'run-abcdefghijklmnopqrst';

function parsed(argv: string[]): ParsedCommand {
  const p = parseCommandLine(argv);
  if ('help' in p) throw new Error('expected a command, got help');
  return p;
}

describe('parseCommandLine', () => {
  it.each<[string[], Partial<ParsedCommand>]>([
    [['submit', 'run.yaml'], { command: 'submit', args: { FILE: 'run.yaml' }, watch: false }],
    [
      ['submit', 'sweep.json', '--watch', '--idempotency-key', 'k-1', '--interval', '0.5'],
      {
        command: 'submit',
        args: { FILE: 'sweep.json' },
        watch: true,
        idempotencyKey: 'k-1',
        intervalSeconds: 0.5,
      },
    ],
    [['submit', '-w', '-'], { args: { FILE: '-' }, watch: true }],
    [['watch', RUN], { command: 'watch', args: { ID: RUN }, intervalSeconds: DEFAULT_INTERVAL_SECONDS }],
    [
      ['logs', RUN, '-f', '--node', '1', '--tail', '50'],
      { command: 'logs', follow: true, node: 1, tail: 50 },
    ],
    [['logs', RUN], { follow: false }],
    [['events', RUN, '-f', '--json'], { command: 'events', args: { ID: RUN }, follow: true, json: true }],
    [['events', RUN], { follow: false, json: false }],
    [
      ['ls', '--phase', 'Running', '--model', 'bert'],
      { command: 'ls', args: {}, phase: 'Running', model: 'bert' },
    ],
    [['ls', '--limit', '5'], { limit: 5 }],
    [['cancel', RUN, '--profile', 'prod'], { command: 'cancel', profile: 'prod' }],
    [
      ['sweep', 'swp-abcdefghijklmnopqrst', '--endpoint', 'http://127.0.0.1:9'],
      { endpoint: 'http://127.0.0.1:9' },
    ],
    [['validate', 'run.yaml', '-p', 'dev'], { command: 'validate', profile: 'dev' }],
    [['ls', '--principal', 'local:vision'], { command: 'ls', principal: 'local:vision' }],
    [
      ['ls', '-o', 'json', '--sweep', 'swp-x', '--metric', 'accuracy'],
      { output: 'json', sweep: 'swp-x', metric: 'accuracy' },
    ],
    [['ls'], { output: 'table' }],
    [['events', RUN, '--json'], { output: 'json' }],
    [['sweeps', '--phase', 'Running', '-o', 'json'], { command: 'sweeps', phase: 'Running', output: 'json' }],
    [['metrics', RUN, '--name', 'loss'], { command: 'metrics', args: { ID: RUN }, name: 'loss' }],
    [['show', RUN, '--output', 'json'], { command: 'show', output: 'json' }],
    [
      ['rerun', RUN, '--set', 'numNodes=2', '--set', 'env.LR=0.01', '--set', 'args=["--epochs=5"]', '-w'],
      {
        command: 'rerun',
        watch: true,
        overrides: { numNodes: 2, env: { LR: '0.01' }, args: ['--epochs=5'] },
      },
    ],
    [
      [
        'rerun',
        RUN,
        '--set',
        'hyperparameters.lr=0.1',
        '--set-string',
        'modelName=007',
        '--set',
        'output=null',
      ],
      { overrides: { hyperparameters: { lr: 0.1 }, modelName: '007', output: null } },
    ],
    // Options may come before the positional argument.
    [['watch', '--interval', '2', RUN], { args: { ID: RUN }, intervalSeconds: 2 }],
  ])('%j', (argv, expected) => {
    expect(parsed(argv)).toMatchObject(expected);
  });

  it('leaves out options not given', () => {
    const p = parsed(['logs', RUN]);
    expect(Object.keys(p)).not.toContain('tail');
    expect(Object.keys(p)).not.toContain('node');
  });

  it.each<[string[], RegExp]>([
    [
      ['deploy'],
      /^unknown command "deploy"; one of submit, watch, logs, events, ls, show, cancel, rerun, sweep, sweeps, metrics, validate, models, model, promote, rollback, usage$/,
    ],
    [['submit'], /^gantry submit takes FILE \(got 0 arguments\)$/],
    [['submit', 'a.yaml', 'b.yaml'], /takes FILE \(got 2 arguments\)/],
    [['ls', 'extra'], /^gantry ls takes no arguments/],
    [['watch', RUN, '--follow'], /Unknown option '--follow'/],
    [['logs', RUN, '--tail'], /--tail/],
    [['logs', RUN, '--tail', '0'], /^--tail must be a whole number from 1 to 100000 \(got "0"\)$/],
    [['logs', RUN, '--node', 'x'], /^--node must be a whole number/],
    [['watch', RUN, '--interval', 'fast'], /^--interval must be a number of seconds/],
    [['watch', RUN, '--interval', '0'], /^--interval must be a number of seconds/],
    [['submit', 'f', '--idempotency-key', 'has space'], /^--idempotency-key must be/],
    [['ls', '-o', 'yaml'], /^-o\/--output must be one of table, json \(got "yaml"\)$/],
    [['rerun', RUN, '--set', 'numNodes'], /^--set takes key=value with a dotted key/],
    [['rerun', RUN, '--set', 'env..A=1'], /^--set takes key=value/],
    [['rerun', RUN, '--set', '__proto__.x=1'], /^--set takes key=value/],
    [['metrics'], /^gantry metrics takes ID/],
    // A boolean flag does not take a value.
    [['submit', 'f', '--watch=yes'], /--watch/],
  ])('%j is a usage error', (argv, message) => {
    expect(() => parseCommandLine(argv)).toThrow(UsageError);
    expect(() => parseCommandLine(argv)).toThrow(message);
  });

  it('answers help for no command, --help, and a command’s --help', () => {
    expect(parseCommandLine([])).toEqual({ help: expect.stringMatching(/^usage: gantry <command>/) });
    expect(parseCommandLine(['--help'])).toEqual({ help: expect.stringContaining('submit FILE') });
    const logs = parseCommandLine(['logs', '--help']);
    expect(logs).toEqual({ help: expect.stringMatching(/^usage: gantry logs ID \[options\]/) });
    expect((logs as { help: string }).help).toContain('-f, --follow');
  });
});
