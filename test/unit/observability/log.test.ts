import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { log, logLine, withLogKeys } from '../../../functions/_log.ts';
import { emitMetrics } from '../../../functions/_metrics.ts';

/** The JSON lines the services log (console.log, outside Lambda). */
function captureLines(): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  vi.spyOn(console, 'log').mockImplementation((line: string) => {
    lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  return lines;
}

beforeEach(() => {
  vi.stubEnv('GANTRY_LOG_LEVEL', 'info');
});
afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
});

describe('log (Powertools Logger)', () => {
  it('writes one JSON line per call: level, time, msg, service, then the fields', () => {
    const lines = captureLines();
    log('info', { msg: 'reconciler tick', service: 'gantry-reconciler', answered: 3 });
    logLine({ level: 'ERROR', msg: 'sweeps not advanced', error: 'boom' });
    expect(lines).toHaveLength(2);
    expect(Object.keys(lines[0] as object).slice(0, 4)).toEqual(['level', 'time', 'msg', 'service']);
    expect(lines[0]).toMatchObject({
      level: 'INFO',
      msg: 'reconciler tick',
      service: 'gantry-reconciler',
      answered: 3,
    });
    expect(Date.parse(String(lines[0]?.time))).not.toBeNaN();
    expect(lines[1]).toMatchObject({
      level: 'ERROR',
      msg: 'sweeps not advanced',
      service: 'gantry',
      error: 'boom',
    });
  });

  it.each([
    ['silent', []],
    ['error', ['ERROR']],
    ['warn', ['WARN', 'ERROR']],
    ['info', ['INFO', 'WARN', 'ERROR']],
    ['debug', ['DEBUG', 'INFO', 'WARN', 'ERROR']],
  ])('GANTRY_LOG_LEVEL=%s lets through %j', (setting, want) => {
    vi.stubEnv('GANTRY_LOG_LEVEL', setting);
    const lines = captureLines();
    for (const level of ['debug', 'info', 'warn', 'error'] as const) log(level, { msg: level });
    expect(lines.map((l) => l.level)).toEqual(want);
  });
});

describe('withLogKeys', () => {
  it('puts the request id, cold start and the run, sweep and team on every line of the invocation, and only there', async () => {
    const lines = captureLines();
    const handler = withLogKeys(
      (event: { run: { runId: string; sweepId?: string; team: string } }) => ({
        runId: event.run.runId,
        sweepId: event.run.sweepId,
        team: event.run.team,
      }),
      async (_event, _context: { awsRequestId: string }) => {
        log('info', { msg: 'inside' });
        await new Promise((r) => setTimeout(r, 1));
        logLine({ level: 'WARN', msg: 'after an await' });
        return 'ok';
      },
    );
    await handler({ run: { runId: 'run-1', sweepId: 'swp-1', team: 'vision' } }, { awsRequestId: 'req-1' });
    await handler({ run: { runId: 'run-2', team: 'nlp' } }, { awsRequestId: 'req-2' });
    log('info', { msg: 'outside' });
    expect(lines.map(({ time: _t, ...l }) => l)).toEqual([
      {
        level: 'INFO',
        msg: 'inside',
        service: 'gantry',
        requestId: 'req-1',
        runId: 'run-1',
        sweepId: 'swp-1',
        team: 'vision',
        coldStart: true,
      },
      {
        level: 'WARN',
        msg: 'after an await',
        service: 'gantry',
        requestId: 'req-1',
        runId: 'run-1',
        sweepId: 'swp-1',
        team: 'vision',
        coldStart: true,
      },
      {
        level: 'INFO',
        msg: 'inside',
        service: 'gantry',
        requestId: 'req-2',
        runId: 'run-2',
        team: 'nlp',
        coldStart: false,
      },
      {
        level: 'WARN',
        msg: 'after an await',
        service: 'gantry',
        requestId: 'req-2',
        runId: 'run-2',
        team: 'nlp',
        coldStart: false,
      },
      { level: 'INFO', msg: 'outside', service: 'gantry' },
    ]);
  });

  it('keeps concurrent invocations apart (the embedded default runs handlers side by side in one process)', async () => {
    const lines = captureLines();
    const handler = withLogKeys(
      (event: { runId: string; wait: number }) => ({ runId: event.runId }),
      async (event, _context: { awsRequestId: string }) => {
        await new Promise((r) => setTimeout(r, event.wait));
        log('info', { msg: 'done', of: event.runId });
      },
    );
    await Promise.all([
      handler({ runId: 'run-a', wait: 20 }, { awsRequestId: 'a' }),
      handler({ runId: 'run-b', wait: 1 }, { awsRequestId: 'b' }),
    ]);
    expect(lines.map((l) => [l.of, l.runId, l.requestId])).toEqual([
      ['run-b', 'run-b', 'b'],
      ['run-a', 'run-a', 'a'],
    ]);
  });

  it('a line’s own field wins over the invocation’s key', async () => {
    const lines = captureLines();
    await withLogKeys(
      () => ({ runId: 'run-1' }),
      async (_e: unknown, _c: { awsRequestId: string }) =>
        log('info', { msg: 'about another', runId: 'run-9' }),
    )({}, { awsRequestId: 'r' });
    expect(lines[0]?.runId).toBe('run-9');
  });
});

describe('emitMetrics (Powertools Metrics, EMF)', () => {
  function captureStdout(): Array<Record<string, unknown>> {
    const out: Array<Record<string, unknown>> = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      for (const line of String(chunk).split('\n')) if (line.startsWith('{')) out.push(JSON.parse(line));
      return true;
    });
    return out;
  }

  it('writes one EMF document per dimension set, in namespace Gantry with the service dimension', async () => {
    vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
    const out = captureStdout();
    await emitMetrics('gantry-steps', [
      { name: 'RunsFailed', unit: 'Count', value: 1, dimensions: { reason: 'TrainingFailed' } },
      { name: 'AdmissionWait', unit: 'Seconds', value: 42 },
      { name: 'RunDuration', unit: 'Seconds', value: 600 },
    ]);
    vi.restoreAllMocks();
    expect(out).toHaveLength(2);
    const failed = out.find((d) => 'RunsFailed' in d) as Record<string, unknown> & {
      _aws: { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: unknown[] }> };
    };
    expect(failed).toMatchObject({ service: 'gantry-steps', reason: 'TrainingFailed', RunsFailed: 1 });
    expect(failed._aws.CloudWatchMetrics[0]).toMatchObject({
      Namespace: 'Gantry',
      Dimensions: [['service', 'reason']],
      Metrics: [{ Name: 'RunsFailed', Unit: 'Count' }],
    });
    const waits = out.find((d) => 'AdmissionWait' in d);
    expect(waits).toMatchObject({ service: 'gantry-steps', AdmissionWait: 42, RunDuration: 600 });
    expect(waits).not.toHaveProperty('reason');
  });

  it('is off outside Lambda unless turned on, and off anywhere with POWERTOOLS_METRICS_DISABLED=true', async () => {
    const out = captureStdout();
    vi.stubEnv('AWS_LAMBDA_FUNCTION_NAME', '');
    await emitMetrics('gantry-steps', [{ name: 'RunsStarted', unit: 'Count', value: 1 }]);
    vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'true');
    await emitMetrics('gantry-steps', [{ name: 'RunsStarted', unit: 'Count', value: 1 }]);
    vi.restoreAllMocks();
    expect(out).toEqual([]);
  });
});
