import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fillEmptyPutContentType } from './fauxqs-shims.ts';

/**
 * S3 conditional writes for the local S3 (fauxqs 2.4.1 honours `If-Match` / `If-None-Match`
 * on GET only, and ignores them on PUT). This proxy sits in front of it and implements the
 * documented S3 semantics for `PutObject` and `CompleteMultipartUpload`:
 * - `If-None-Match: *` — write only if the key does not exist, else 412 PreconditionFailed;
 * - `If-Match: <etag>` — write only if the current ETag matches, else 412 (404 NoSuchKey when absent).
 * Writes to one key are serialised, so a check and its write cannot interleave with another
 * writer's (S3 itself may answer a concurrent loser with 409 ConditionalRequestConflict; the
 * client treats 409 and 412 alike). Every other request passes through unchanged, but for an
 * empty PUT without a Content-Type, which fauxqs answers with 500 (`fauxqs-shims.ts`).
 */
export async function startConditionalS3Proxy(opts: {
  upstream: string;
  port?: number;
  notifications?: ObjectCreatedNotifications;
}) {
  const upstream = new URL(opts.upstream);
  const locks = new Map<string, Promise<void>>();
  let sequence = 0;

  /**
   * S3 event notifications (fauxqs 2.4.1 has no bucket notification configuration): after a
   * successful PutObject, CopyObject or CompleteMultipartUpload of a watched key, the proxy sends
   * the AWS-shaped `ObjectCreated:*` event (key form-encoded, size and ETag read back with HEAD,
   * an increasing sequencer; no versionId: the local store does not version) to `deliver`.
   */
  async function notifyCreated(path: string, eventName: string): Promise<void> {
    const n = opts.notifications;
    const slash = path.indexOf('/', 1);
    if (!n || slash < 0) return;
    const bucket = decodeURIComponent(path.slice(1, slash));
    const key = decodeURIComponent(path.slice(slash + 1));
    if (!n.watches(bucket, key)) return;
    const head = await headObject(path);
    if (!head) return;
    sequence++;
    await n.deliver(
      { bucket, key },
      JSON.stringify({
        Records: [
          {
            eventVersion: '2.1',
            eventSource: 'aws:s3',
            awsRegion: 'us-east-1',
            eventTime: new Date().toISOString(),
            eventName,
            userIdentity: { principalId: 'local' },
            requestParameters: { sourceIPAddress: '127.0.0.1' },
            responseElements: { 'x-amz-request-id': `local-${sequence}`, 'x-amz-id-2': 'local' },
            s3: {
              s3SchemaVersion: '1.0',
              configurationId: 'gantry-local-data-events',
              bucket: {
                name: bucket,
                ownerIdentity: { principalId: 'local' },
                arn: `arn:aws:s3:::${bucket}`,
              },
              object: {
                key: encodeURIComponent(key).replace(/%20/g, '+'),
                size: head.size,
                eTag: stripQuotes(head.etag),
                sequencer: sequence.toString(16).toUpperCase().padStart(18, '0'),
              },
            },
          },
        ],
      }),
    );
  }

  function headObject(path: string): Promise<{ etag: string; size: number } | undefined> {
    return new Promise((resolve, reject) => {
      const r = httpRequest(
        {
          host: upstream.hostname,
          port: upstream.port,
          method: 'HEAD',
          path,
          headers: { host: upstream.host },
        },
        (res) => {
          res.resume();
          resolve(
            res.statusCode === 200
              ? { etag: String(res.headers.etag ?? ''), size: Number(res.headers['content-length'] ?? 0) }
              : undefined,
          );
        },
      );
      r.on('error', reject);
      r.end();
    });
  }

  async function withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = locks.get(key) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((r) => {
      release = r;
    });
    const chained = previous.then(() => current);
    locks.set(key, chained);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (locks.get(key) === chained) locks.delete(key);
    }
  }

  function forward(req: IncomingMessage, res: ServerResponse, body?: Buffer): void {
    const headers = { ...req.headers, host: upstream.host };
    const created = createdEvent(req);
    const out = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
        if (created && up.statusCode === 200) {
          up.on('end', () => {
            notifyCreated(created.path, created.eventName).catch((err) =>
              console.error('local S3 notification failed:', err),
            );
          });
        }
      },
    );
    out.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
    if (body) out.end(body);
    else req.pipe(out);
  }

  function headEtag(path: string, headers: IncomingMessage['headers']): Promise<string | undefined> {
    return new Promise((resolve, reject) => {
      const h: Record<string, string | string[] | undefined> = { ...headers, host: upstream.host };
      for (const k of [
        'content-length',
        'content-type',
        'if-match',
        'if-none-match',
        'content-md5',
        'transfer-encoding',
      ])
        delete h[k];
      const r = httpRequest(
        { host: upstream.hostname, port: upstream.port, method: 'HEAD', path, headers: h },
        (res) => {
          res.resume();
          resolve(res.statusCode === 200 ? String(res.headers.etag ?? '') : undefined);
        },
      );
      r.on('error', reject);
      r.end();
    });
  }

  function fail(res: ServerResponse, status: number, code: string, message: string): void {
    res.writeHead(status, { 'content-type': 'application/xml' });
    res.end(
      `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message></Error>`,
    );
  }

  const server = createServer((req, res) => {
    fillEmptyPutContentType(req);
    const ifMatch = req.headers['if-match'];
    const ifNoneMatch = req.headers['if-none-match'];
    const url = new URL(req.url ?? '/', 'http://local');
    const isWrite =
      (req.method === 'PUT' && !url.searchParams.has('partNumber') && !req.headers['x-amz-copy-source']) ||
      (req.method === 'POST' && url.searchParams.has('uploadId'));
    if (!isWrite || (!ifMatch && !ifNoneMatch)) {
      forward(req, res);
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      withLock(url.pathname, async () => {
        const current = await headEtag(url.pathname, req.headers);
        if (ifNoneMatch === '*' && current !== undefined) {
          fail(
            res,
            412,
            'PreconditionFailed',
            'At least one of the pre-conditions you specified did not hold',
          );
          return;
        }
        if (ifMatch !== undefined) {
          if (current === undefined) {
            fail(res, 404, 'NoSuchKey', 'The specified key does not exist.');
            return;
          }
          if (stripQuotes(current) !== stripQuotes(String(ifMatch))) {
            fail(
              res,
              412,
              'PreconditionFailed',
              'At least one of the pre-conditions you specified did not hold',
            );
            return;
          }
        }
        await new Promise<void>((resolve) => {
          res.on('finish', resolve);
          res.on('close', resolve);
          forward(req, res, body);
        });
      }).catch((err) => fail(res, 500, 'InternalError', String(err)));
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Where local S3 delivers `ObjectCreated:*` events (the stack: the data-events and metrics queues). */
export interface ObjectCreatedNotifications {
  watches(bucket: string, key: string): boolean;
  deliver(object: { bucket: string; key: string }, body: string): Promise<void>;
}

/** The S3 event name of a request that creates an object, if it is one. */
function createdEvent(req: IncomingMessage): { path: string; eventName: string } | undefined {
  const url = new URL(req.url ?? '/', 'http://local');
  // PutObject / CopyObject carry at most the SDK's `x-id`; other PUTs on a key are subresources (?tagging, ?partNumber).
  if (req.method === 'PUT' && [...url.searchParams.keys()].every((k) => k === 'x-id')) {
    return {
      path: url.pathname,
      eventName: req.headers['x-amz-copy-source'] ? 'ObjectCreated:Copy' : 'ObjectCreated:Put',
    };
  }
  if (req.method === 'POST' && url.searchParams.has('uploadId')) {
    return { path: url.pathname, eventName: 'ObjectCreated:CompleteMultipartUpload' };
  }
  return undefined;
}

function stripQuotes(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"|"$/g, '');
}
