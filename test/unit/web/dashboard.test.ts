import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import { handler } from '../../../functions/web/dashboard.ts';
import { DASHBOARD_ASSETS, dashboardAsset } from '../../../lib/web/assets.ts';
import { ROOT } from '../../helpers/tiers.ts';

/** An HTTP API event for `GET /` or `GET /ui/{proxy+}` (on a named stage rawPath starts with it). */
const event = (proxy: string | undefined, rawPath = proxy === undefined ? '/' : `/prod/ui/${proxy}`) =>
  ({
    rawPath,
    ...(proxy === undefined ? {} : { pathParameters: { proxy } }),
  }) as unknown as APIGatewayProxyEventV2;

describe('the dashboard files', () => {
  it.each([
    ['/', 'web/index.html', 'text/html; charset=utf-8'],
    ['/ui/app.js', 'web/app.js', 'text/javascript; charset=utf-8'],
    ['/ui/uplot.js', 'node_modules/uplot/dist/uPlot.iife.min.js', 'text/javascript; charset=utf-8'],
    ['/ui/uplot.css', 'node_modules/uplot/dist/uPlot.min.css', 'text/css; charset=utf-8'],
  ])('%s is %s (%s)', (path, file, type) => {
    expect(dashboardAsset(path)).toEqual({ file, type });
  });

  it.each(['/ui/../package.json', '/ui/', '/index.html', '/ui/constructor', '/ui/app.js/'])(
    '%s is no file of the dashboard',
    (path) => {
      expect(dashboardAsset(path)).toBeUndefined();
    },
  );

  it('every file the table names exists', () => {
    for (const { file } of Object.values(DASHBOARD_ASSETS)) {
      expect(() => readFileSync(join(ROOT, file)), file).not.toThrow();
    }
  });

  it('the handler serves the page at / and a file by its proxy path, whatever the stage prefix', async () => {
    const index = await handler(event(undefined));
    expect(index.statusCode).toBe(200);
    expect(index.headers?.['content-type']).toBe('text/html; charset=utf-8');
    expect(index.body).toBe(readFileSync(join(ROOT, 'web/index.html'), 'utf8'));
    const css = await handler(event('style.css'));
    expect(css.statusCode).toBe(200);
    expect(css.headers?.['content-security-policy']).toMatch(/default-src 'none'/);
    expect(css.body).toBe(readFileSync(join(ROOT, 'web/style.css'), 'utf8'));
  });

  it('the handler answers 404 for any other path, never reading a file it names', async () => {
    for (const proxy of ['../package.json', 'nothing.js', '%2e%2e/README.md']) {
      const res = await handler(event(proxy));
      expect(res.statusCode, proxy).toBe(404);
      expect(JSON.parse(res.body ?? '{}').error).toBe('NotFoundError');
    }
  });
});
