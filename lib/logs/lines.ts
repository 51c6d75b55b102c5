/**
 * Container log text → lines, shared by the live read (lib/intake/logs.ts) and the archive.
 * Longer lines are cut (with a note of how much): 1,000 lines stay well under Lambda's 6 MB
 * response limit whatever the training code prints (a progress bar redrawn with `\r` is one line).
 */
export const MAX_LINE_CHARS = 2000;

/** Text → its last `tailLines` lines: the trailing newline of the last line ends it, it does not start another. */
export function logLines(text: string, tailLines: number): string[] {
  if (text === '') return [];
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines
    .slice(-tailLines)
    .map((l) =>
      l.length > MAX_LINE_CHARS
        ? `${l.slice(0, MAX_LINE_CHARS)} … [${l.length - MAX_LINE_CHARS} more characters]`
        : l,
    );
}
