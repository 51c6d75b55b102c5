import { readFile } from 'node:fs/promises';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { DASHBOARD_CSP, dashboardAsset } from '../../lib/web/assets.ts';

/**
 * GET / and GET /ui/{proxy+} — the dashboard's static files (web/, uPlot), from the package
 * (/var/task on Lambda, the repository locally: this file is two directories below either).
 * No authorizer and no data: the page calls the API with the user's bearer token (JWT stacks) or,
 * on `npm run dev`, the local principal header.
 */
const ROOT = new URL('../../', import.meta.url);
const files = new Map<string, Promise<string>>();

export async function handler(event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> {
  // The proxy parameter, not rawPath: on a named stage rawPath starts with the stage.
  const proxy = event.pathParameters?.proxy;
  const asset = dashboardAsset(proxy === undefined ? '/' : `/ui/${proxy}`);
  if (!asset) {
    return {
      statusCode: 404,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ error: 'NotFoundError', message: `no dashboard file ${event.rawPath}` }),
    };
  }
  let text = files.get(asset.file);
  if (!text) {
    text = readFile(new URL(asset.file, ROOT), 'utf8');
    files.set(asset.file, text);
    text.catch(() => files.delete(asset.file));
  }
  return {
    statusCode: 200,
    headers: {
      'content-type': asset.type,
      // Small files that change with a deploy: the browser revalidates each time.
      'cache-control': 'no-cache',
      'content-security-policy': DASHBOARD_CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    },
    body: await text,
  };
}
