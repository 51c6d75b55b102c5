'use strict';
/**
 * The training-run state machine's definition for serverless-step-functions, read from the one
 * ASL file (statemachines/training-run.asl.json) that the local engine also runs.
 *
 * The ASL names its Lambda functions with `${XxxFunctionArn}` substitutions. serverless-step-functions
 * 3.31 has no DefinitionSubstitutions, but it turns `{ "Fn::GetAtt": [<function key>, "Arn"] }`
 * objects into `Fn::Sub` variables, so each substitution becomes one of those. An unknown
 * substitution, or one whose function is not in serverless.yml, fails the package loudly.
 */
const fs = require('node:fs');
const path = require('node:path');

const ASL_PATH = path.resolve(__dirname, '../../statemachines/training-run.asl.json');

/**
 * ASL substitution → serverless.yml function key. local/definition.ts TASK_FUNCTIONS maps the same
 * names to handler files; test/deploy/template.test.ts checks that both agree.
 */
const TASK_FUNCTIONS = {
  CreateJobFunctionArn: 'createJob',
  AwaitJobFunctionArn: 'awaitJob',
  CheckJobFunctionArn: 'checkJob',
  PublishArtifactsFunctionArn: 'publishArtifacts',
  EvaluateModelFunctionArn: 'evaluateModel',
  NotifyServingFunctionArn: 'notifyServing',
  RecordOutcomeFunctionArn: 'recordOutcome',
  CleanupFunctionArn: 'cleanup',
  NextAttemptFunctionArn: 'nextAttempt',
};

const WHOLE = /^\$\{(\w+)\}$/;

/** The ASL with every `${Name}` replaced by `replace(Name)`; a `${` anywhere else is an error. */
function substitute(node, replace, where = '$') {
  if (typeof node === 'string') {
    const m = WHOLE.exec(node);
    if (m) return replace(m[1], where);
    if (node.includes('${')) {
      throw new Error(
        `${where}: "${node}" embeds a substitution; only whole-string \${Name} values are supported`,
      );
    }
    return node;
  }
  if (Array.isArray(node)) return node.map((v, i) => substitute(v, replace, `${where}[${i}]`));
  if (node && typeof node === 'object') {
    return Object.fromEntries(
      Object.entries(node).map(([k, v]) => [k, substitute(v, replace, `${where}.${k}`)]),
    );
  }
  return node;
}

/** The function keys the ASL names, in order of first use. */
function namedFunctions(asl = readAsl()) {
  const keys = new Set();
  substitute(asl, (name) => {
    keys.add(functionKey(name));
    return name;
  });
  return [...keys];
}

function functionKey(name, where = 'the ASL') {
  const key = TASK_FUNCTIONS[name];
  if (!key) {
    throw new Error(
      `${where} names the substitution \${${name}}, which deploy/serverless/state-machine.cjs does not define ` +
        `(known: ${Object.keys(TASK_FUNCTIONS).join(', ')})`,
    );
  }
  return key;
}

function readAsl() {
  return JSON.parse(fs.readFileSync(ASL_PATH, 'utf8'));
}

/**
 * The definition serverless-step-functions compiles: every `${XxxFunctionArn}` of `asl` becomes
 * `{ "Fn::GetAtt": [<function key>, "Arn"] }`; unknown substitutions and functions missing from
 * `functionKeys` (serverless.yml's functions) throw.
 */
function definitionFor(asl, functionKeys) {
  const defined = new Set(functionKeys);
  return substitute(asl, (name, where) => {
    const key = functionKey(name, `statemachines/training-run.asl.json ${where}`);
    if (!defined.has(key)) {
      throw new Error(
        `the ASL's \${${name}} needs the function "${key}", which serverless.yml does not define`,
      );
    }
    return { 'Fn::GetAtt': [key, 'Arn'] };
  });
}

module.exports = {
  ASL_PATH,
  TASK_FUNCTIONS,
  namedFunctions,
  definitionFor,
  /** `${file(./deploy/serverless/state-machine.cjs):definition}` */
  definition: async ({ resolveConfigurationProperty }) =>
    definitionFor(readAsl(), Object.keys((await resolveConfigurationProperty(['functions'])) ?? {})),
};
