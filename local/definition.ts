import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The state machine as the local stack runs it: the ASL file, its substitutions, their handlers. */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const ASL_PATH = resolve(ROOT, 'statemachines/training-run.asl.json');
export const REGION = 'us-east-1';
export const ACCOUNT = '000000000000';
export const STATE_MACHINE = 'gantry-training-run';

/** ASL substitution → the handler module that serves it (the `functions/` file Lambda would run). */
export const TASK_FUNCTIONS: Record<string, string> = {
  CreateJobFunctionArn: '../functions/steps/create-job.ts',
  AwaitJobFunctionArn: '../functions/steps/await-job.ts',
  CheckJobFunctionArn: '../functions/steps/check-job.ts',
  PublishArtifactsFunctionArn: '../functions/steps/publish-artifacts.ts',
  EvaluateModelFunctionArn: '../functions/steps/evaluate-model.ts',
  NotifyServingFunctionArn: '../functions/steps/notify-serving.ts',
  RecordOutcomeFunctionArn: '../functions/steps/record-outcome.ts',
  CleanupFunctionArn: '../functions/steps/cleanup.ts',
  NextAttemptFunctionArn: '../functions/steps/next-attempt.ts',
};

export const functionArn = (substitution: string) =>
  `arn:aws:lambda:${REGION}:${ACCOUNT}:function:gantry-${substitution}`;

/** The ASL with its `${…FunctionArn}` substitutions replaced, as CloudFormation would. */
export function loadDefinition(): unknown {
  const text = readFileSync(ASL_PATH, 'utf8').replace(/\$\{(\w+)\}/g, (_m, name: string) => {
    if (!TASK_FUNCTIONS[name]) throw new Error(`the ASL names an undefined substitution \${${name}}`);
    return functionArn(name);
  });
  return JSON.parse(text);
}
