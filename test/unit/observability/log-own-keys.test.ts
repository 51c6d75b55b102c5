import { afterEach, describe, expect, it, vi } from 'vitest';
import { log, logLine } from '../../../functions/_log.ts';
import { identityOf } from '../../../lib/intake/jwt.ts';
import { parseQuantity } from '../../../lib/run/limits.ts';

// Names that come from env, claims or requests are looked up as own keys only (issue 38).

function captureLines(): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  vi.spyOn(console, 'log').mockImplementation((line: string) => {
    lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  return lines;
}

afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
});

describe('own keys only', () => {
  it.each(['constructor', 'toString', '__proto__'])(
    'a log line whose level is %s is logged at info',
    (level) => {
      vi.stubEnv('GANTRY_LOG_LEVEL', 'info');
      const lines = captureLines();
      logLine({ level, msg: 'odd level' });
      expect(lines).toMatchObject([{ level: 'INFO', msg: 'odd level' }]);
    },
  );

  it('GANTRY_LOG_LEVEL=constructor is the default threshold (info): debug lines stay out', () => {
    vi.stubEnv('GANTRY_LOG_LEVEL', 'constructor');
    const lines = captureLines();
    log('debug', { msg: 'hidden' });
    log('info', { msg: 'shown' });
    expect(lines.map((l) => l.msg)).toEqual(['shown']);
  });

  it('a claim named like an Object.prototype member is absent unless the token has it', () => {
    expect(identityOf({ sub: 'u' }, { principalClaim: 'constructor', groupsClaims: ['toString'] })).toEqual({
      groups: [],
    });
    expect(
      identityOf(
        { constructor: 'u', toString: ['g'] },
        { principalClaim: 'constructor', groupsClaims: ['toString'] },
      ),
    ).toEqual({ sub: 'u', groups: ['g'] });
  });

  it('a quantity suffix is a unit only when it is one', () => {
    expect(parseQuantity('2Gi')).toBe(2 * 1024 ** 3);
    expect(parseQuantity('1constructor')).toBeNaN();
    expect(parseQuantity('1toString')).toBeNaN();
  });
});
