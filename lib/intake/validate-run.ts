import type { ModelOwners } from '../artifacts/ownership.ts';
import type { GantryConfig, TeamConfig } from '../config.ts';
import { UnsupportedApiError } from '../errors.ts';
import type { CallOptions, Clock, ClusterGateway } from '../ports.ts';
import type { RunRequest } from '../run/schema.ts';
import { chooseShape, type ShapeChoice } from '../trainjob/capabilities.ts';
import { describeDelivery, initializerJobs } from '../trainjob/initializers.ts';
import { runtimeShapeProblem } from '../trainjob/runtime-jobs.ts';
import { budgetOf, expectedGpuHours } from '../usage/budget.ts';
import { monthOf } from '../usage/ledger.ts';
import { clusterRuntimes } from './runtimes.ts';
import { acceptRequest, checkModelOwner, type SubmitRunInput } from './submit-run.ts';
import { requestedTotals } from './tenancy.ts';
import type { Check } from './view-schemas.ts';

/** Kueue's resource names for what a request asks for. */
export const QUOTA_RESOURCES = { cpu: 'cpu', memory: 'memory', gpu: 'nvidia.com/gpu' } as const;

/**
 * The nominal quota behind a LocalQueue: its ClusterQueue and, per resource name (`cpu` in cores,
 * `memory` in bytes, `nvidia.com/gpu`), the largest nominal quota of any flavor. Undefined when
 * the LocalQueue does not exist.
 */
export interface QueueQuota {
  clusterQueue: string;
  nominal: Record<string, number>;
}

export interface ValidateRunDeps {
  config: GantryConfig;
  bucket: string;
  /** Model ownership; absent → not checked. Another team's model name is a 403, as at submit. */
  owners?: Pick<ModelOwners, 'ownerOf'>;
  /** The cluster gateway, loaded lazily; absent → the runtime check is skipped. */
  gateway?: (cluster: string) => Promise<ClusterGateway>;
  /** Reads a LocalQueue's ClusterQueue quota; absent → the quota check is skipped (and says so). */
  quotaFor?: (
    where: { cluster: string; namespace: string; queue: string },
    opts?: CallOptions,
  ) => Promise<QueueQuota | undefined>;
  /** Micro-GPU-hours the team used in a month (lib/usage/usage.ts); absent → the budget check is skipped. */
  usedInMonth?: (team: string, month: string, opts?: CallOptions) => Promise<number>;
  clock?: Clock;
}

export interface ValidateResult {
  valid: boolean;
  runId?: string;
  checks: Check[];
  expectedGpuHours?: number;
}

/**
 * A dry run of submit. Schema, identity and tenancy problems throw as submit's do (400 / 403);
 * what needs the cluster is reported as checks: the runtime exists, and the request can ever fit
 * the nominal quota of its queue's ClusterQueue (borrowing from a cohort is not counted, so a
 * request that only fits by borrowing is reported as not fitting).
 */
export function makeValidateRun(deps: ValidateRunDeps) {
  return async function validateRun(input: SubmitRunInput, opts?: CallOptions): Promise<ValidateResult> {
    const accepted = await acceptRequest(input, deps);
    const { request, placement } = accepted;
    if (deps.owners) await checkModelOwner(deps.owners, request, opts);
    const checks: Check[] = [
      { name: 'schema', status: 'passed', message: 'the request matches the RunRequest schema' },
      {
        name: 'tenancy',
        status: 'passed',
        message: `team ${placement.team.name} may run it in namespace ${placement.namespace} on cluster ${placement.cluster}${placement.queue ? ` through queue ${placement.queue}` : ''}`,
      },
      await runtimeCheck(request, placement.cluster, opts),
      await quotaCheck(request, placement, opts),
    ];
    const expected = expectedGpuHours(request, request.runDeadlineSeconds);
    const budget = await budgetCheck(placement.team, expected, opts);
    if (budget) checks.push(budget);
    return {
      valid: checks.every((c) => c.status !== 'failed'),
      ...(accepted.key !== undefined ? { runId: accepted.runId } : {}),
      checks,
      ...(expected > 0 ? { expectedGpuHours: expected } : {}),
    };
  };

  /** The team's monthly GPU-hour budget against what it used: a used-up hard budget fails, as submit would. */
  async function budgetCheck(
    team: TeamConfig,
    expected: number,
    opts?: CallOptions,
  ): Promise<Check | undefined> {
    if (!team.gpuHourBudget) return undefined;
    if (!deps.usedInMonth) {
      return { name: 'budget', status: 'skipped', message: 'the usage ledger is not readable here' };
    }
    const now = (deps.clock ?? { now: () => new Date() }).now();
    const view = budgetOf(team, await deps.usedInMonth(team.name, monthOf(now), opts), now);
    if (!view) return undefined;
    const of = `${view.used} of ${[view.soft !== undefined ? `soft ${view.soft}` : '', view.hard !== undefined ? `hard ${view.hard}` : ''].filter(Boolean).join(', ')} GPU-hours used this month (resets ${view.resetsAt})`;
    if (view.state === 'exhausted') {
      return {
        name: 'budget',
        status: 'failed',
        message: `gpuHourBudget.hard is used up: ${of}; a submit would be refused`,
      };
    }
    const past = view.remaining !== undefined && expected > view.remaining;
    return {
      name: 'budget',
      status: 'passed',
      message: `${of}; this run may use up to ${expected}${past ? `, more than the ${view.remaining} left (it would not be stopped)` : ''}${view.state === 'warning' ? '; past the soft threshold: the submit will carry a warning' : ''}`,
    };
  }

  async function runtimeCheck(request: RunRequest, cluster: string, opts?: CallOptions): Promise<Check> {
    const name = request.runtime.name;
    const uris = Boolean(request.datasetUri || request.modelUri);
    // Where datasetUri / modelUri go, as CreateJob will decide it (lib/trainjob/initializers.ts).
    const v1Env = [
      ...(request.datasetUri ? ['datasetUri as DATASET_URI'] : []),
      ...(request.modelUri ? ['modelUri as MODEL_URI'] : []),
    ];
    const v1Note = uris
      ? `; ${v1Env.join(' and ')} ${v1Env.length > 1 ? 'reach' : 'reaches'} the containers as env (Training Operator v1 jobs have no initializers)`
      : '';
    if (request.target !== 'auto' && request.target !== 'TrainJob') {
      return {
        name: 'runtime',
        status: 'skipped',
        message: `${request.target} does not use a training runtime${v1Note}`,
      };
    }
    if (request.runtime.kind !== 'ClusterTrainingRuntime') {
      return {
        name: 'runtime',
        status: 'skipped',
        message: `namespaced TrainingRuntimes are not looked up by the dry run${
          uris ? '; datasetUri / modelUri go to its initializers as requested' : ''
        }`,
      };
    }
    if (!deps.gateway) {
      return { name: 'runtime', status: 'skipped', message: 'no cluster access in this deployment' };
    }
    let runtimes: Awaited<ReturnType<typeof clusterRuntimes>>;
    let gateway: ClusterGateway;
    try {
      gateway = await deps.gateway(cluster);
      runtimes = await clusterRuntimes(gateway, opts);
    } catch (err) {
      // A dry run still answers when the cluster is down; the check says it was not made.
      if (!(err instanceof Error && err.name === 'ClusterUnavailableError')) throw err;
      return {
        name: 'runtime',
        status: 'skipped',
        message: `cluster ${cluster} is unavailable: ${err.message}`,
      };
    }
    const runtime = runtimes.find((r) => r.metadata.name === name);
    if (runtime) {
      // The shape CreateJob needs (a `node` job), checked here so a dry run finds what the run would fail on.
      const problem = runtimeShapeProblem(runtime);
      if (problem) return { name: 'runtime', status: 'failed', message: `${problem} (cluster ${cluster})` };
      const exists = `ClusterTrainingRuntime ${name} exists on ${cluster}`;
      if (!uris) return { name: 'runtime', status: 'passed', message: exists };
      // The initializer rules differ by Trainer release (v2.3 also wants the `initializer` volume).
      let shape: ShapeChoice['shape'];
      try {
        shape = chooseShape(request.target, await gateway.capabilities(opts)).shape;
      } catch (err) {
        if (err instanceof Error && err.name === 'ClusterUnavailableError') {
          return { name: 'runtime', status: 'passed', message: `${exists} (${err.message})` };
        }
        if (!(err instanceof UnsupportedApiError)) throw err;
        return { name: 'runtime', status: 'failed', message: err.message };
      }
      const delivery = describeDelivery(
        request,
        initializerJobs(runtime, shape),
        `ClusterTrainingRuntime ${name}`,
      );
      return { name: 'runtime', status: 'passed', message: `${exists}; ${delivery}` };
    }
    if (runtimes.length === 0 && request.target === 'auto') {
      return {
        name: 'runtime',
        status: 'skipped',
        message: `cluster ${cluster} serves no ClusterTrainingRuntimes; the run will use a Training Operator v1 kind if it serves one${v1Note}`,
      };
    }
    return {
      name: 'runtime',
      status: 'failed',
      message: `ClusterTrainingRuntime ${name} does not exist on cluster ${cluster}`,
    };
  }

  async function quotaCheck(
    request: RunRequest,
    placement: { cluster: string; namespace: string; queue?: string },
    opts?: CallOptions,
  ): Promise<Check> {
    const { queue, cluster, namespace } = placement;
    if (queue === undefined) {
      return { name: 'quota', status: 'skipped', message: 'the run has no queue, so no Kueue quota applies' };
    }
    if (!deps.quotaFor) {
      return {
        name: 'quota',
        status: 'skipped',
        message: 'quota lookup is not available in this deployment; admission is decided by Kueue',
      };
    }
    const quota = await deps.quotaFor({ cluster, namespace, queue }, opts);
    if (!quota) {
      return { name: 'quota', status: 'failed', message: `LocalQueue ${namespace}/${queue} does not exist` };
    }
    const totals = requestedTotals(request);
    const short: string[] = [];
    for (const [what, resource] of Object.entries(QUOTA_RESOURCES) as Array<
      [keyof typeof QUOTA_RESOURCES, string]
    >) {
      const wanted = totals[what];
      if (wanted <= 0) continue;
      const nominal = quota.nominal[resource] ?? 0;
      if (wanted > nominal) short.push(`${resource}: requests ${wanted}, nominal quota ${nominal}`);
    }
    if (short.length > 0) {
      return {
        name: 'quota',
        status: 'failed',
        message: `the run can never fit ClusterQueue ${quota.clusterQueue} (${short.join('; ')})`,
      };
    }
    return {
      name: 'quota',
      status: 'passed',
      message: `the run fits the nominal quota of ClusterQueue ${quota.clusterQueue}`,
    };
  }
}
