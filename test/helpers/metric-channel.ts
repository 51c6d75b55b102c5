import type { RunRecords } from '../../lib/run/records.ts';

/**
 * The key prefix a run's pods write metric objects under: its GANTRY_METRICS_URI, which carries
 * the run's token (lib/metrics/channel.ts), read from the run record as the job env gets it.
 */
export async function metricKeyPrefix(records: Pick<RunRecords, 'get'>, runId: string): Promise<string> {
  const uri = (await records.get(runId))?.spec.metricsUri;
  if (!uri) throw new Error(`run ${runId} has no metrics URI`);
  return uri.replace(/^s3:\/\/[^/]+\//, '');
}
