import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { METRIC, METRICS_NAMESPACE } from '../../../lib/observability/metrics.ts';
import { parseYaml as parse } from '../../../lib/yaml.ts';
import { ROOT } from '../../helpers/tiers.ts';

const require = createRequire(import.meta.url);
const observability = require('../../../deploy/serverless/observability.cjs') as {
  METRIC: Record<string, string>;
  NAMESPACE: string;
  observabilityResources(keys: string[]): {
    Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
  };
};

const sls = parse(readFileSync(join(ROOT, 'serverless.yml'), 'utf8')) as {
  functions: Record<string, unknown>;
  resources: unknown[];
};
const functionKeys = Object.keys(sls.functions);
const { Resources } = observability.observabilityResources(functionKeys);
const alarms = Object.entries(Resources).filter(([, r]) => r.Type === 'AWS::CloudWatch::Alarm');

/** The dashboard body with every CloudFormation value replaced by a marker naming it. */
function dashboardBody(): { widgets: Array<{ properties: { title: string; metrics: unknown[][] } }> } {
  const body = Resources.GantryDashboard?.Properties.DashboardBody as { 'Fn::Join': [string, unknown[]] };
  const parts = body['Fn::Join'][1];
  return JSON.parse(
    parts.map((p) => (typeof p === 'string' ? p : `<${JSON.stringify(p).replace(/"/g, "'")}>`)).join(''),
  );
}

describe('deploy/serverless/observability.cjs', () => {
  it('is wired into serverless.yml', () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a Serverless variable, not a template
    expect(sls.resources).toContain('${file(./deploy/serverless/observability.cjs):resources}');
  });

  it('names the metrics the functions emit (lib/observability/metrics.ts)', () => {
    expect(observability.NAMESPACE).toBe(METRICS_NAMESPACE);
    expect(observability.METRIC).toEqual(METRIC);
  });

  it('the dashboard body is JSON with the stack’s names joined in, and charts every Gantry metric', () => {
    const body = dashboardBody();
    const text = JSON.stringify(body);
    for (const name of Object.values(METRIC)) expect(text, name).toContain(`"${name}`);
    expect(text).toContain("<{'Ref':'TrainingRunStateMachine'}>");
    expect(text).toContain("<{'Ref':'ReconcilerLambdaFunction'}>");
    for (const q of ['Runs', 'DataEvents', 'Metrics', 'Serving', 'Events'])
      expect(text).toContain(`<{'Fn::GetAtt':['${q}DeadLetterQueue','QueueName']}>`);
    expect(body.widgets.map((w) => w.properties.title)).toContain('Reconciler requests per pass, by kind');
  });

  it.each([
    ['ReconcilerErrorsAlarm', 'AWS/Lambda', 'Errors'],
    ['ReconcilerPassErrorsAlarm', 'Gantry', 'ReconcilerErrors'],
    ['ReconcilerTickDurationAlarm', 'Gantry', 'ReconcilerTickDuration'],
    ['ExecutionsThrottledAlarm', 'AWS/States', 'ExecutionThrottled'],
  ])('%s watches %s %s and notifies the alarm topic', (id, namespace, metric) => {
    const alarm = Resources[id];
    expect(alarm?.Properties).toMatchObject({
      Namespace: namespace,
      MetricName: metric,
      AlarmActions: [{ Ref: 'AlarmTopic' }],
    });
  });

  it('alarms on every function’s throttles, at most 10 metrics per alarm', () => {
    const watched = alarms
      .filter(([id]) => id.startsWith('FunctionThrottlesAlarm'))
      .flatMap(([, a]) => {
        const metrics = a.Properties.Metrics as Array<{
          MetricStat?: { Metric: { MetricName: string; Dimensions: Array<{ Value: { Ref: string } }> } };
        }>;
        const stats = metrics.filter((m) => m.MetricStat);
        expect(stats.length).toBeLessThanOrEqual(10);
        return stats.map((m) => {
          expect(m.MetricStat?.Metric.MetricName).toBe('Throttles');
          return m.MetricStat?.Metric.Dimensions[0]?.Value.Ref;
        });
      });
    expect(watched).toHaveLength(functionKeys.length);
    expect(watched).toContain('ReconcilerLambdaFunction');
    expect(watched).toContain('SubmitRunLambdaFunction');
  });

  it('every alarm notifies the alarm topic and treats missing data as fine', () => {
    expect(alarms.length).toBeGreaterThan(5);
    for (const [id, a] of alarms) {
      expect(a.Properties.AlarmActions, id).toEqual([{ Ref: 'AlarmTopic' }]);
      expect(a.Properties.TreatMissingData, id).toBe('notBreaching');
    }
  });
});
