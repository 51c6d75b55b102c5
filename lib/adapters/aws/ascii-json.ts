/**
 * JSON with every non-ASCII character written as a \uXXXX escape. SQS accepts only some Unicode
 * in a message body (no U+FFFE/U+FFFF, and the local stand-in also refuses characters above the
 * BMP, such as emoji), while a run request may carry any text in its env or args. Escaped, the body
 * is plain ASCII and JSON.parse restores the same value.
 */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
