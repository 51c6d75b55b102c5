import { join } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { ROOT } from './tiers.ts';

/** Debian's Chromium (scripts/ci-install.sh quick), or GANTRY_CHROMIUM. */
export const CHROMIUM = process.env.GANTRY_CHROMIUM ?? '/usr/bin/chromium';
/** Where the dashboard's browser tests save their screenshots (listed at the end of .ci/run). */
export const SCREENSHOTS = process.env.GANTRY_SCREENSHOT_DIR ?? join(ROOT, 'test-results', 'screenshots');

/**
 * Chromium, headless and quiet (no network of its own: updates, sync, QUIC probes), and one page
 * whose uncaught script errors are pushed to `pageErrors`.
 */
export async function openBrowser(pageErrors: string[]): Promise<{ browser: Browser; page: Page }> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (err) => pageErrors.push(err.message));
  return { browser, page };
}
