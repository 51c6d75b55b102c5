import { describe, expect, it } from 'vitest';
import { EXIT, exitCodeForPhase, exitCodeForStatus, isTerminalPhase } from '../../../cli/exit-codes.ts';

describe('exit codes', () => {
  it.each([
    ['Succeeded', 0],
    ['Failed', 1],
    ['Cancelled', 2],
    ['SomethingNew', 2],
  ])('a followed run or sweep that ends %s exits %i', (phase, code) => {
    expect(exitCodeForPhase(phase)).toBe(code);
  });

  it.each([
    [400, EXIT.usage],
    [403, EXIT.refused],
    [404, EXIT.refused],
    [409, EXIT.refused],
    [413, EXIT.refused],
    [500, EXIT.unavailable],
    [503, EXIT.unavailable],
  ])('HTTP %i exits %i', (status, code) => {
    expect(exitCodeForStatus(status)).toBe(code);
  });

  it.each([
    ['Succeeded', true],
    ['Failed', true],
    ['Cancelled', true],
    ['Pending', false],
    ['Running', false],
    ['Publishing', false],
    // A sweep that stopped releasing trials still has some to wait for.
    ['Completing', false],
    [undefined, false],
  ])('%s is terminal: %s', (phase, terminal) => {
    expect(isTerminalPhase(phase)).toBe(terminal);
  });

  it('gives every outcome its own code', () => {
    expect(new Set(Object.values(EXIT)).size).toBe(Object.keys(EXIT).length);
  });
});
