import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import {
  DescribeExecutionCommand,
  GetExecutionHistoryCommand,
  SFNClient,
  StartExecutionCommand,
} from '@aws-sdk/client-sfn';
import { metricsUri, newMetricsToken } from '../../lib/metrics/channel.ts';
import { newRunId, requestFingerprint } from '../../lib/run/ids.ts';
import { newRecord, type RunRecord } from '../../lib/run/record.ts';
import { makeRunRecords } from '../../lib/run/records.ts';
import type { RunRequestInput } from '../../lib/run/schema.ts';
import type { RunSpec } from '../../lib/run/spec.ts';
import type { Stack } from '../../local/stack.ts';
import { aRunRequest } from './builders.ts';
import { metricKeyPrefix } from './metric-channel.ts';
import { tableOf } from './state.ts';

/** Drive runs through a local stack the way intake does: record (Accepted), then StartExecution. */
/** The phases of a run that trains once and succeeds, in order (its record's transitions). */
export const SUCCEEDED_PHASES = ['Accepted', 'Submitting', 'Pending', 'Running', 'Publishing', 'Succeeded'];

export function runDriver(stack: Stack) {
  const clock = { now: () => new Date() };
  const records = makeRunRecords({ table: tableOf(stack), clock });
  const sfn = new SFNClient({
    endpoint: stack.endpoints.sfn,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });

  function spec(request: Partial<RunRequestInput>, namespace: string): RunSpec {
    const runId = newRunId();
    return {
      runId,
      cluster: 'local',
      jobName: runId,
      namespace,
      request: aRunRequest({ team: 'demo', namespace, image: 'registry.local/train:1', ...request }),
      outputUri: `s3://${stack.bucket}/runs/${runId}/output/`,
      metricsUri: metricsUri(stack.bucket, runId, newMetricsToken()),
    };
  }

  async function start(run: RunSpec): Promise<string> {
    await records.create(newRecord(run, requestFingerprint(run.request), clock.now()));
    const out = await sfn.send(
      new StartExecutionCommand({
        stateMachineArn: stack.stateMachineArn,
        name: run.runId,
        input: JSON.stringify({ run }),
      }),
    );
    return out.executionArn as string;
  }

  async function waitFor<T>(
    what: string,
    probe: () => Promise<T | undefined>,
    timeoutMs = 30_000,
  ): Promise<T> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function execution(arn: string) {
    return sfn.send(new DescribeExecutionCommand({ executionArn: arn }));
  }

  async function finished(arn: string, timeoutMs = 30_000) {
    return waitFor(
      `execution ${arn} to end`,
      async () => {
        const e = await execution(arn);
        return e.status === 'RUNNING' ? undefined : e;
      },
      timeoutMs,
    );
  }

  async function history(arn: string) {
    const events = [];
    let nextToken: string | undefined;
    do {
      const page = await sfn.send(
        new GetExecutionHistoryCommand({ executionArn: arn, nextToken, maxResults: 1000 }),
      );
      events.push(...(page.events ?? []));
      nextToken = page.nextToken;
    } while (nextToken);
    return events;
  }

  async function record(runId: string): Promise<RunRecord> {
    const r = await records.get(runId);
    if (!r) throw new Error(`no record for ${runId}`);
    return r;
  }

  /** What training code does at the end: write the model and metrics under GANTRY_OUTPUT_URI. */
  async function writeOutput(s3: S3Client, run: RunSpec) {
    const prefix = run.outputUri.replace(`s3://${stack.bucket}/`, '');
    await s3.send(new PutObjectCommand({ Bucket: stack.bucket, Key: `${prefix}model.pt`, Body: 'weights' }));
    await s3.send(
      new PutObjectCommand({ Bucket: stack.bucket, Key: `${prefix}metrics.json`, Body: '{"accuracy":0.9}' }),
    );
  }

  /**
   * What training code does through the metric channel: one JSON Lines object under the run's
   * GANTRY_METRICS_URI (`s3://<bucket>/runs/<runId>/metrics/<token>/`, from its record), keys in
   * the order they are written.
   */
  let metricSeq = 0;
  async function writeMetrics(
    s3: S3Client,
    runId: string,
    lines: Array<{
      step?: number;
      metrics?: Record<string, number>;
      progressPercentage?: number;
      estimatedRemainingSeconds?: number;
    }>,
  ) {
    const name = `${String(Date.now() * 1000 + (metricSeq++ % 1000)).padStart(20, '0')}-rank0.jsonl`;
    const body = lines.map((l) => JSON.stringify({ time: new Date().toISOString(), ...l })).join('\n');
    await s3.send(
      new PutObjectCommand({
        Bucket: stack.bucket,
        Key: `${await metricKeyPrefix(records, runId)}${name}`,
        Body: `${body}\n`,
      }),
    );
  }

  return {
    spec,
    start,
    waitFor,
    execution,
    finished,
    history,
    record,
    records,
    sfn,
    writeOutput,
    writeMetrics,
  };
}
