/**
 * The dashboard's files (web/ and uPlot's build): which URL path serves which file of the
 * repository (the Lambda package ships the same paths), with its content type. Only the paths of
 * this table are served — a request never names a file.
 */
export interface DashboardAsset {
  /** Path from the repository root (and from /var/task in the Lambda package). */
  file: string;
  type: string;
}

export const DASHBOARD_ASSETS: Readonly<Record<string, DashboardAsset>> = {
  '/': { file: 'web/index.html', type: 'text/html; charset=utf-8' },
  '/ui/app.js': { file: 'web/app.js', type: 'text/javascript; charset=utf-8' },
  '/ui/charts.js': { file: 'web/charts.js', type: 'text/javascript; charset=utf-8' },
  '/ui/actions.js': { file: 'web/actions.js', type: 'text/javascript; charset=utf-8' },
  '/ui/models.js': { file: 'web/models.js', type: 'text/javascript; charset=utf-8' },
  '/ui/compare.js': { file: 'web/compare.js', type: 'text/javascript; charset=utf-8' },
  '/ui/sweep-plots.js': { file: 'web/sweep-plots.js', type: 'text/javascript; charset=utf-8' },
  '/ui/pareto-plot.js': { file: 'web/pareto-plot.js', type: 'text/javascript; charset=utf-8' },
  '/ui/svg-plot.js': { file: 'web/svg-plot.js', type: 'text/javascript; charset=utf-8' },
  '/ui/usage.js': { file: 'web/usage.js', type: 'text/javascript; charset=utf-8' },
  '/ui/style.css': { file: 'web/style.css', type: 'text/css; charset=utf-8' },
  '/ui/uplot.js': {
    file: 'node_modules/uplot/dist/uPlot.iife.min.js',
    type: 'text/javascript; charset=utf-8',
  },
  '/ui/uplot.css': { file: 'node_modules/uplot/dist/uPlot.min.css', type: 'text/css; charset=utf-8' },
};

/** The HTTP API routes that serve the dashboard (no authorizer: the files hold no data). */
export const DASHBOARD_ROUTES = ['GET /', 'GET /ui/{proxy+}'] as const;

/**
 * The page may load only its own files and call only its own origin (the API); styles may be
 * inline (uPlot positions its cursor and legend with style attributes).
 */
export const DASHBOARD_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/** The asset a request path names: `/` or `/ui/<file>` (the `{proxy+}` part given separately). */
export function dashboardAsset(path: string): DashboardAsset | undefined {
  return Object.hasOwn(DASHBOARD_ASSETS, path) ? DASHBOARD_ASSETS[path] : undefined;
}
