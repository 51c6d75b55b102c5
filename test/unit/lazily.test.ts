import { describe, expect, it, vi } from 'vitest';
import { lazily } from '../../lib/lazily.ts';

describe('lazily', () => {
  it('builds nothing until first use, then once, and returns the same value', () => {
    const make = vi.fn(() => ({ built: true }));
    const value = lazily(make);
    expect(make).not.toHaveBeenCalled();
    const first = value();
    expect(value()).toBe(first);
    expect(make).toHaveBeenCalledTimes(1);
  });

  it('keeps a falsy value without rebuilding it', () => {
    const make = vi.fn(() => undefined);
    const value = lazily(make);
    value();
    value();
    expect(make).toHaveBeenCalledTimes(1);
  });

  it('builds again after a failed build (nothing is kept)', () => {
    let calls = 0;
    const value = lazily(() => {
      calls += 1;
      if (calls === 1) throw new Error('first build fails');
      return calls;
    });
    expect(() => value()).toThrow('first build fails');
    expect(value()).toBe(2);
  });
});
