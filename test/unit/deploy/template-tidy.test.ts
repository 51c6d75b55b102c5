import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

const require = createRequire(import.meta.url);
const { tidyDependsOn } = require('../../../deploy/serverless/template-tidy.cjs') as {
  tidyDependsOn(template: {
    Resources: Record<string, { DependsOn?: string | string[]; Properties?: unknown }>;
  }): number;
};

// deploy/serverless/template-tidy.cjs: DependsOn entries a reference already implies go (cfn-lint W3005).
describe('tidyDependsOn', () => {
  it('drops what Ref, Fn::GetAtt and Fn::Sub already reference, and duplicates; keeps the rest', () => {
    const template = {
      Resources: {
        Fn: {
          DependsOn: ['FnLogGroup', 'FnRole'],
          Properties: { Role: { 'Fn::GetAtt': ['FnRole', 'Arn'] } },
        },
        Route: {
          DependsOn: 'Integration',
          Properties: { Target: { 'Fn::Join': ['/', ['integrations', { Ref: 'Integration' }]] } },
        },
        Stage: {
          DependsOn: ['LogGroup', 'LogGroup', 'RouteA'],
          // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub string
          Properties: { AccessLogSettings: { DestinationArn: { 'Fn::Sub': '${LogGroup.Arn}' } } },
        },
        Short: { DependsOn: ['Role'], Properties: { Role: { 'Fn::GetAtt': 'Role.Arn' } } },
      },
    };
    expect(tidyDependsOn(template)).toBe(5);
    expect(template.Resources).toEqual({
      Fn: { DependsOn: ['FnLogGroup'], Properties: template.Resources.Fn.Properties },
      Route: { Properties: template.Resources.Route.Properties },
      Stage: { DependsOn: ['RouteA'], Properties: template.Resources.Stage.Properties },
      Short: { Properties: template.Resources.Short.Properties },
    });
  });
});
