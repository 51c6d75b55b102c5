/**
 * The CLI's exit codes (README.md, section CLI). `watch` and `submit --watch` end with the
 * outcome of what they follow; every other command with 0 or the kind of error.
 */
export const EXIT = {
  /** Done; for watch: the run or sweep Succeeded. */
  ok: 0,
  /** The run or sweep Failed. */
  failed: 1,
  /** The run or sweep ended otherwise: Cancelled (or a terminal phase this CLI does not know). */
  otherEnd: 2,
  /** Usage or validation: a bad command line, an unreadable file, a request the API refused as invalid (400). */
  usage: 3,
  /** The API refused the call: not allowed (403), not found (404), conflict (409), too large (413, 415). */
  refused: 4,
  /** The API could not be reached or failed (network, 5xx), or a profile could not sign the request. */
  unavailable: 5,
} as const;

/** Phases after which nothing changes, for runs and sweeps alike. */
export const TERMINAL = ['Succeeded', 'Failed', 'Cancelled'] as const;

export function isTerminalPhase(phase: unknown): boolean {
  return (TERMINAL as readonly unknown[]).includes(phase);
}

/** The exit code of a followed run or sweep that reached `phase`. */
export function exitCodeForPhase(phase: string): number {
  if (phase === 'Succeeded') return EXIT.ok;
  if (phase === 'Failed') return EXIT.failed;
  return EXIT.otherEnd;
}

/** The exit code of an HTTP error answer. */
export function exitCodeForStatus(status: number): number {
  if (status === 400) return EXIT.usage;
  if (status >= 500) return EXIT.unavailable;
  return EXIT.refused;
}
