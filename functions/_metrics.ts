/**
 * Emits the metric points of lib/observability/metrics.ts through Powertools Metrics: CloudWatch
 * embedded metric format (EMF) lines on stdout, which CloudWatch Logs turns into metrics in the
 * `Gantry` namespace — no API call, no IAM. Dimensions: `service` (the function family) plus a
 * point's own bounded ones (`reason`, `kind`).
 *
 * On by default only in Lambda: in the embedded default and in tests the lines would be noise.
 * `POWERTOOLS_METRICS_DISABLED=false` turns them on anywhere, `=true` off everywhere.
 */
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { METRICS_NAMESPACE, type MetricPoint } from '../lib/observability/metrics.ts';
import { log } from './_log.ts';

const byService = new Map<string, Metrics>();
/**
 * Powertools Metrics, loaded on the first emit (a dynamic import, as functions/_deps.ts loads the
 * Kubernetes client): a function's cold start does not evaluate it, and a function that never
 * emits never does (bench/results/function-bundles.md).
 */
let library: Promise<typeof import('@aws-lambda-powertools/metrics')> | undefined;

export function metricsEnabled(): boolean {
  const setting = process.env.POWERTOOLS_METRICS_DISABLED?.toLowerCase();
  if (setting !== undefined && setting !== '') return setting === 'false' || setting === '0';
  return Boolean(process.env.AWS_LAMBDA_FUNCTION_NAME);
}

/**
 * One EMF line per dimension set of `points`, written before the promise resolves (await it: a
 * frozen Lambda would write it late). Never rejects: a metric is not worth an invocation.
 */
export async function emitMetrics(service: string, points: readonly MetricPoint[]): Promise<void> {
  if (points.length === 0 || !metricsEnabled()) return;
  try {
    library ??= import('@aws-lambda-powertools/metrics');
    const { Metrics, MetricUnit } = await library;
    let metrics = byService.get(service);
    if (!metrics) {
      metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: service });
      byService.set(service, metrics);
    }
    const groups = new Map<string, MetricPoint[]>();
    for (const p of points) {
      const key = JSON.stringify(p.dimensions ?? {});
      groups.set(key, [...(groups.get(key) ?? []), p]);
    }
    for (const [key, group] of groups) {
      const dimensions = JSON.parse(key) as Record<string, string>;
      if (Object.keys(dimensions).length) metrics.addDimensions(dimensions);
      for (const p of group) metrics.addMetric(p.name, MetricUnit[p.unit], p.value);
      metrics.publishStoredMetrics();
    }
  } catch (err) {
    library = undefined;
    log('warn', { msg: 'metrics not emitted', service, error: String(err) });
  }
}
