import type { RunRequest } from '../run/schema.ts';
import type { ThenRequest } from './schema.ts';
import type { Assignment, ParameterSpec } from './space.ts';
import { formatValue, trialRequest } from './trials.ts';

/**
 * Chaining (`then`): once a sweep ends with a best trial, Gantry runs the best parameters once
 * more as a full training with the overrides of `then` (more nodes, other data, more epochs…),
 * and that run publishes its model. Pure: the request of that run.
 *
 * Overrides: numNodes, resourcesPerNode, numProcPerNode, datasetUri, modelUri and
 * runDeadlineSeconds replace the template's; args are appended and env merged; hyperparameters
 * override searched parameters (injected where those are) and add others as `--<name>=<value>`
 * arguments. Every value is recorded in the run's hyperparameters.
 */
export function chainedRequest(
  template: RunRequest,
  parameters: readonly ParameterSpec[],
  best: Assignment,
  then: ThenRequest,
): Record<string, unknown> {
  const searched = new Set(parameters.map((p) => p.name));
  const overrides = then.hyperparameters ?? {};
  const assignment: Assignment = { ...best };
  const extra: Assignment = {};
  for (const [name, value] of Object.entries(overrides)) {
    if (searched.has(name)) assignment[name] = value;
    else extra[name] = value;
  }
  const base = trialRequest(template, parameters, assignment);
  const args = [
    ...(base.args ?? []),
    ...Object.entries(extra).map(([name, value]) => `--${name}=${formatValue(value)}`),
    ...(then.args ?? []),
  ];
  const env = { ...(base.env ?? {}), ...(then.env ?? {}) };
  return {
    ...base,
    ...(args.length > 0 ? { args } : {}),
    ...(Object.keys(env).length > 0 ? { env } : {}),
    hyperparameters: { ...(base.hyperparameters ?? {}), ...extra },
    ...(then.numNodes !== undefined ? { numNodes: then.numNodes } : {}),
    ...(then.resourcesPerNode !== undefined ? { resourcesPerNode: then.resourcesPerNode } : {}),
    ...(then.numProcPerNode !== undefined ? { numProcPerNode: then.numProcPerNode } : {}),
    ...(then.datasetUri !== undefined ? { datasetUri: then.datasetUri } : {}),
    ...(then.modelUri !== undefined ? { modelUri: then.modelUri } : {}),
    ...(then.runDeadlineSeconds !== undefined ? { runDeadlineSeconds: then.runDeadlineSeconds } : {}),
  };
}
