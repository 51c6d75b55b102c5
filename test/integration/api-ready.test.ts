import { describe, expect, it } from 'vitest';
import { startHttpApi } from '../../local/http-api.ts';

/**
 * The local API host answers 503 until its `ready` promise settles: a restart of `npm run dev`
 * restores the runs found in flight before any caller reads them (issue: runs read Running for a
 * few seconds after a restart).
 */
describe('the local API host before it is ready', () => {
  it('answers 503 with Retry-After while starting, then serves', async () => {
    let ready: () => void = () => {};
    const api = await startHttpApi({
      routes: { 'GET /v1/ping': async () => ({ statusCode: 200, body: '{"ok":true}' }) },
      port: 0,
      ready: new Promise<void>((r) => {
        ready = r;
      }),
    });
    try {
      const before = await fetch(`${api.url}/v1/ping`);
      expect(before.status).toBe(503);
      expect(before.headers.get('retry-after')).toBe('1');
      expect(((await before.json()) as { message: string }).message).toMatch(/^starting: restoring/);

      ready();
      await new Promise((r) => setImmediate(r));
      const after = await fetch(`${api.url}/v1/ping`);

      expect(after.status).toBe(200);
      expect(await after.json()).toEqual({ ok: true });
    } finally {
      await api.close();
    }
  });
});
