import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTransport } from '../../../lib/adapters/kubernetes/transport.ts';

/**
 * The transport's streamed GET (a watch), against a real HTTP server on 127.0.0.1 that writes
 * lines the way the API server writes watch events (chunked, one JSON object a line, a line may
 * be split across chunks).
 */
describe('transport: a watch stream read line by line', () => {
  let server: Server;
  let base: string;
  /** Connections the server saw closed by the client before it ended them. */
  const closedEarly: string[] = [];

  beforeAll(async () => {
    server = createServer((req, res: ServerResponse) => {
      const path = req.url ?? '';
      res.on('close', () => {
        if (!res.writableEnded) closedEarly.push(path);
      });
      if (path.startsWith('/forbidden')) {
        res.writeHead(403, { 'content-type': 'application/json' });
        res.end('{"kind":"Status","code":403,"message":"cannot watch"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      if (path.startsWith('/split')) {
        res.write('{"n":1}\n{"n"');
        setTimeout(() => res.write(':2}\n'), 20);
        setTimeout(() => res.end('{"n":3}\n'), 40);
      } else if (path.startsWith('/forever')) {
        res.write('{"n":1}\n');
        setTimeout(() => res.write('{"n":2}\n'), 20); // then nothing, never ends
      } else if (path.startsWith('/garbage')) {
        res.write('not json\n');
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const transport = () =>
    makeTransport({ getCurrentCluster: () => ({ server: base }), applyToHTTPSOptions: async () => {} }, 5000);
  const get = (path: string) => ({ method: 'GET' as const, url: new URL(base + path), headers: {} });

  it('hands over every line, joined across chunks, until the server ends the stream', async () => {
    const seen: unknown[] = [];

    const res = await transport().lines(get('/split'), (line) => void seen.push(JSON.parse(line)), 5000);

    expect(seen).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    expect(res).toMatchObject({ status: 200, stopped: false });
  });

  it('ends the request when the reader says stop', async () => {
    const seen: unknown[] = [];

    const res = await transport().lines(
      get('/forever?stop'),
      (line) => {
        seen.push(JSON.parse(line));
        return seen.length === 2 ? 'stop' : undefined;
      },
      5000,
    );
    await new Promise((r) => setTimeout(r, 50));

    expect(res.stopped).toBe(true);
    expect(seen).toEqual([{ n: 1 }, { n: 2 }]);
    expect(closedEarly).toContain('/forever?stop');
  });

  it('ends a stream that outlives its time bound like a server end (status 0, not stopped)', async () => {
    const res = await transport().lines(get('/forever?bound'), () => undefined, 200);

    expect(res).toMatchObject({ status: 0, stopped: false });
  });

  it("rejects with the caller's abort", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('caller gone')), 50);

    await expect(
      transport().lines({ ...get('/forever?abort'), signal: ac.signal }, () => undefined, 5000),
    ).rejects.toThrow();
  });

  it('returns a non-2xx answer whole, with no line handed over', async () => {
    const seen: string[] = [];

    const res = await transport().lines(get('/forbidden'), (line) => void seen.push(line), 5000);

    expect(res.status).toBe(403);
    expect(res.body.toString()).toContain('cannot watch');
    expect(seen).toEqual([]);
  });

  it('a line the reader cannot take rejects the stream with its error (no crash)', async () => {
    await expect(
      transport().lines(get('/garbage'), (line) => JSON.parse(line) as undefined, 5000),
    ).rejects.toThrow(SyntaxError);
  });
});
