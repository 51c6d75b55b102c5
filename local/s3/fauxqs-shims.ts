import type { IncomingMessage } from 'node:http';

/**
 * What S3 records as an object's Content-Type when the PutObject names none.
 * (AWS documents `binary/octet-stream` as the default; fauxqs would store `application/octet-stream`.)
 */
export const S3_DEFAULT_CONTENT_TYPE = 'binary/octet-stream';

/**
 * Shim for an empty PutObject without a Content-Type (fauxqs 2.4.1).
 *
 * Spark and Hadoop write an empty `_SUCCESS` marker, and `aws s3api put-object --bucket B --key K`
 * (no `--body`) sends `Content-Length: 0` and no Content-Type. fauxqs is a Fastify app: Fastify
 * skips body parsing for a request with neither a Content-Type nor a body, so `request.body` stays
 * `undefined`, and fauxqs' `putObject` calls `Buffer.from(request.body)`, which throws: HTTP 500
 * `ERR_INVALID_ARG_TYPE`. (Found in fauxqs 2.4.1's `dist/s3/actions/putObject.js`; the line is
 * the same in the newest upstream source we read, and no upstream issue names it.) With any
 * Content-Type Fastify hands fauxqs an empty buffer, so the proxy adds the one S3 would record.
 * It changes nothing for a request with a body or a Content-Type.
 */
export function fillEmptyPutContentType(req: IncomingMessage): void {
  if (req.method !== 'PUT' || req.headers['content-type'] !== undefined) return;
  if (req.headers['transfer-encoding'] !== undefined) return;
  const length = req.headers['content-length'];
  if (length !== undefined && length !== '0') return;
  req.headers['content-type'] = S3_DEFAULT_CONTENT_TYPE;
}
