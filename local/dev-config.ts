import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { compact } from '../lib/compact.ts';
import { configSchemas, type TeamConfig } from '../lib/config.ts';
import { dataTriggerRuleSchema } from '../lib/datatrigger/rules.ts';
import { ValidationError } from '../lib/errors.ts';
import { RFC1035_LABEL } from '../lib/run/limits.ts';
import { parseWith } from '../lib/run/validate.ts';
import { parseYaml } from '../lib/yaml.ts';
import * as z from '../lib/zod.ts';
import type { EmbeddedOptions } from './embedded.ts';
import { DEMO_QUEUE } from './embedded.ts';
import { JWT_CLAIMS_HEADER, localPrincipalOf, PRINCIPAL_HEADER } from './http-api.ts';
import { DEMO_TEAM } from './stack.ts';

/**
 * The configuration file of `npm run dev -- --config FILE` (YAML or JSON): the teams, clusters and
 * data-trigger rules of the embedded default, validated field by field with the service's own
 * schemas (lib/config.ts, lib/datatrigger/rules.ts). Teams and rules are exactly what the
 * service's configuration holds; a cluster is either the cluster simulator (with its Kueue queues
 * and quotas) or a kubeconfig. `examples/dev-config.yaml` shows every section.
 */

const name = z.string().check(z.regex(RFC1035_LABEL, 'must be an RFC 1035 label'), z.maxLength(63));

/** A Kueue LocalQueue → ClusterQueue of the simulator, and the ClusterQueue's nominal quota. */
export const SimulatorQueueSchema = z.strictObject({
  /** LocalQueue name (a run's `queue`). */
  name,
  /** The ClusterQueue it feeds; default `<name>-cq`. */
  clusterQueue: z.optional(name),
  /** Nominal quota of flavor `default-flavor`, e.g. `{ nvidia.com/gpu: 8, cpu: 64, memory: 256Gi }`. */
  quota: z
    .record(z.string().check(z.minLength(1)), z.union([z.number().check(z.gte(0)), z.string()]))
    .check(z.refine((q) => Object.keys(q).length > 0, 'must name at least one resource')),
  /** Namespaces that get the LocalQueue; default every namespace. */
  namespaces: z.optional(z.array(name)),
  /** ClusterQueue `preemption.withinClusterQueue` (default Never, as Kueue defaults it). */
  preemption: z.optional(z.enum(['Never', 'LowerPriority'])),
});

/** The cluster simulator's settings (local/simulator/README.md). */
export const SimulatorSettingsSchema = z.strictObject({
  /** The Kueue queues and quotas; default the demo's `demo-queue` (8 GPUs). */
  queues: z.optional(z.array(SimulatorQueueSchema)),
  /** Simulated seconds a job trains once its pods run (default 1800: 3 s at the default speed). */
  defaultDurationSeconds: z.optional(z.number().check(z.int(), z.gte(1), z.lte(30 * 86_400))),
  /** The Trainer release the simulator serves (default 2.2, with Kueue 0.19). */
  trainerVersion: z.optional(z.enum(['2.1', '2.2', '2.3'])),
});

const { ClusterConfigSchema, JwtConfigSchema, TeamConfigSchema } = configSchemas();
const clusterShape = ClusterConfigSchema.shape;

export const DevClusterSchema = z
  .strictObject({
    name,
    /** A kubeconfig (a path, relative to the configuration file, or inline YAML): a real cluster. */
    kubeconfig: z.optional(z.string().check(z.minLength(1))),
    /** The cluster simulator (the default when no kubeconfig is given). */
    simulator: z.optional(SimulatorSettingsSchema),
    legacyKinds: clusterShape.legacyKinds,
    kueueManagedKinds: clusterShape.kueueManagedKinds,
    kueueWorkloadGraceSeconds: clusterShape.kueueWorkloadGraceSeconds,
  })
  .check(
    z.refine((c) => !(c.kubeconfig && c.simulator), {
      message: 'give kubeconfig (a real cluster) or simulator settings, not both',
      path: ['simulator'],
    }),
  );

/** Speed of the embedded default; the environment (GANTRY_SIM_SPEED, GANTRY_SFN_SPEED) wins. */
export const SpeedSchema = z.strictObject({
  /** Simulated seconds per real second in the cluster simulator (default 600). */
  simulator: z.optional(z.number().check(z.gte(0), z.lte(1_000_000))),
  /** Time compression of the state machine's deadlines and heartbeats (default 60). */
  stepFunctions: z.optional(z.number().check(z.gt(0), z.lte(10_000))),
});

export const DevConfigSchema = z
  .strictObject({
    /** The teams (lib/config.ts TeamConfigSchema); default the demo team. */
    teams: z.optional(z.array(TeamConfigSchema).check(z.minLength(1, 'at least one team'))),
    /** The clusters; the first is the default. Default one simulator cluster named `local`. */
    clusters: z.optional(z.array(DevClusterSchema).check(z.minLength(1, 'at least one cluster'))),
    /** Retraining on new data (lib/datatrigger/rules.ts): objects under a prefix of the local bucket → runs. */
    dataTriggers: z._default(z.array(dataTriggerRuleSchema()), []),
    /** How JWT callers are read (`auth.jwt` of the service's configuration). */
    jwt: z.optional(JwtConfigSchema),
    speed: z.optional(SpeedSchema),
  })
  .check(
    z.superRefine((c, ctx) => {
      const clusters = c.clusters ?? [{ name: 'local', kubeconfig: undefined }];
      const names = new Set<string>();
      clusters.forEach((cl, i) => {
        if (names.has(cl.name)) {
          ctx.addIssue({
            code: 'custom',
            path: ['clusters', i, 'name'],
            message: `duplicate cluster ${cl.name}`,
          });
        }
        names.add(cl.name);
      });
      const simulated = clusters.filter((cl) => !cl.kubeconfig);
      if (simulated.length > 1) {
        ctx.addIssue({
          code: 'custom',
          path: ['clusters'],
          message: `at most one cluster can be the simulator (${simulated.map((s) => s.name).join(', ')} have no kubeconfig)`,
        });
      }
      const teams: TeamConfig[] = c.teams ?? [DEMO_TEAM];
      const teamNames = new Set<string>();
      teams.forEach((t, i) => {
        if (teamNames.has(t.name)) {
          ctx.addIssue({ code: 'custom', path: ['teams', i, 'name'], message: `duplicate team ${t.name}` });
        }
        teamNames.add(t.name);
        if (t.cluster && !names.has(t.cluster)) {
          ctx.addIssue({
            code: 'custom',
            path: ['teams', i, 'cluster'],
            message: `no cluster named ${t.cluster}`,
          });
        }
      });
      c.dataTriggers.forEach((r, i) => {
        if (!teamNames.has(r.team)) {
          ctx.addIssue({
            code: 'custom',
            path: ['dataTriggers', i, 'team'],
            message: `no team named ${r.team}`,
          });
        }
      });
    }),
  );

export type DevConfig = z.output<typeof DevConfigSchema>;
export type DevCluster = z.output<typeof DevClusterSchema>;

/** Parse a configuration document (already read from YAML or JSON). Throws a ValidationError naming each bad field. */
export function parseDevConfig(document: unknown): DevConfig {
  return parseWith(DevConfigSchema, document ?? {});
}

/**
 * Read and validate a configuration file: YAML (which includes JSON). A kubeconfig path in it is
 * resolved against the file's folder. Errors name the file and each bad field.
 */
export function loadDevConfig(file: string): DevConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ValidationError([
      { field: '--config', rule: `cannot read ${file}: ${(err as Error).message}` },
    ]);
  }
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (err) {
    throw new ValidationError([
      { field: '--config', rule: `${file} is not YAML or JSON: ${(err as Error).message}` },
    ]);
  }
  const config = parseDevConfig(document);
  for (const cluster of config.clusters ?? []) {
    if (cluster.kubeconfig && !looksLikeYaml(cluster.kubeconfig)) {
      cluster.kubeconfig = resolve(dirname(file), cluster.kubeconfig);
    }
  }
  return config;
}

/** Inline kubeconfig YAML (several lines, an apiVersion) rather than a path. */
function looksLikeYaml(s: string): boolean {
  return s.includes('\n') && /(^|\n)\s*apiVersion:/.test(s);
}

/** A kubeconfig value (path or inline YAML) as YAML text. */
export function kubeconfigText(kubeconfig: string): string {
  if (looksLikeYaml(kubeconfig)) return kubeconfig;
  try {
    return readFileSync(kubeconfig, 'utf8');
  } catch (err) {
    throw new ValidationError([
      { field: 'kubeconfig', rule: `cannot read ${kubeconfig}: ${(err as Error).message}` },
    ]);
  }
}

/**
 * What the embedded default runs for a configuration: its teams and rules, its primary cluster
 * (the simulator cluster, else the first; `kubeconfig` — the `--kubeconfig` option — replaces the
 * simulator with that cluster) and the other clusters as kubeconfig clusters.
 */
export interface DevPlan {
  teams: TeamConfig[];
  dataTriggers: DevConfig['dataTriggers'];
  jwt?: DevConfig['jwt'];
  primary: DevCluster;
  /** The kubeconfig YAML of the primary cluster when it is a real one; undefined: the simulator. */
  primaryKubeconfig?: string;
  /** The other clusters, as the service's configuration lists them. */
  others: Array<z.output<typeof ClusterConfigSchema>>;
  /** Namespaces the simulator creates: every team's. */
  namespaces: string[];
  /** Simulator queues (QueueConfig of local/simulator). */
  queues: Array<{
    name: string;
    clusterQueue: string;
    quota: Record<string, number | string>;
    namespaces?: string[];
    preemption?: 'Never' | 'LowerPriority';
  }>;
  defaultDurationSeconds?: number;
  trainerVersion?: '2.1' | '2.2' | '2.3';
}

export function planDev(config: DevConfig, opts: { kubeconfig?: string } = {}): DevPlan {
  const clusters: DevCluster[] = config.clusters ?? [
    {
      name: 'local',
      legacyKinds: ['PyTorchJob'],
      kueueManagedKinds: ['TrainJob'],
      kueueWorkloadGraceSeconds: 120,
    },
  ];
  const primary = clusters.find((c) => !c.kubeconfig) ?? (clusters[0] as DevCluster);
  const kubeconfig = opts.kubeconfig ?? primary.kubeconfig;
  const teams: TeamConfig[] = config.teams ?? [DEMO_TEAM];
  const sim = primary.simulator ?? {};
  return {
    teams,
    dataTriggers: config.dataTriggers,
    ...(config.jwt ? { jwt: config.jwt } : {}),
    primary,
    ...(kubeconfig ? { primaryKubeconfig: kubeconfigText(kubeconfig) } : {}),
    others: clusters
      .filter((c) => c !== primary)
      .map((c) => ({
        name: c.name,
        kubeconfig: c.kubeconfig as string,
        legacyKinds: c.legacyKinds,
        kueueManagedKinds: c.kueueManagedKinds,
        kueueWorkloadGraceSeconds: c.kueueWorkloadGraceSeconds,
      })),
    namespaces: [...new Set(teams.flatMap((t) => t.namespaces))],
    queues: (sim.queues ?? [DEMO_QUEUE]).map((q) =>
      compact({ ...q, clusterQueue: q.clusterQueue ?? `${q.name}-cq` }),
    ),
    ...(sim.defaultDurationSeconds ? { defaultDurationSeconds: sim.defaultDurationSeconds } : {}),
    ...(sim.trainerVersion ? { trainerVersion: sim.trainerVersion } : {}),
  };
}

/** The `startEmbedded` options of a plan whose primary cluster is the simulator. */
export function embeddedOptions(
  plan: DevPlan,
  base: Pick<EmbeddedOptions, 'simSpeed' | 'sfnSpeed' | 'port'> & { stack?: EmbeddedOptions['stack'] } = {},
): EmbeddedOptions {
  return {
    ...base,
    simulator: {
      namespaces: plan.namespaces,
      queues: plan.queues,
      ...(plan.defaultDurationSeconds ? { defaultDurationSeconds: plan.defaultDurationSeconds } : {}),
      ...(plan.trainerVersion ? { trainerVersion: plan.trainerVersion } : {}),
    },
    cluster: {
      name: plan.primary.name,
      legacyKinds: plan.primary.legacyKinds,
      kueueManagedKinds: plan.primary.kueueManagedKinds,
      kueueWorkloadGraceSeconds: plan.primary.kueueWorkloadGraceSeconds,
    },
    stack: {
      ...base.stack,
      teams: plan.teams,
      dataTriggers: plan.dataTriggers,
      ...(plan.jwt ? { jwt: plan.jwt } : {}),
      ...(plan.others.length > 0 ? { otherClusters: plan.others } : {}),
    },
  };
}

/**
 * The header a member of the team calls the local API with: its `local:` principal, else its first
 * IAM principal (a trailing `*` filled in; the host presents a role as a session of it), with the
 * CLI's `--principal` for it; else JWT claims naming its first principal, with the configured
 * issuer and write scope — without an issuer JWT callers are refused (401), which the note says.
 */
export function identityHeaderOf(
  team: TeamConfig,
  jwt: Partial<z.output<typeof JwtConfigSchema>> = {},
): { header: string; principal?: string; note?: string } {
  const fill = (p: string) => (p.endsWith('*') ? `${p.slice(0, -1)}me` : p);
  const principal = localPrincipalOf(team);
  if (principal) return { header: `${PRINCIPAL_HEADER}: ${principal}`, principal };
  const claims = {
    ...(jwt.issuer ? { iss: jwt.issuer } : {}),
    [jwt.principalClaim ?? 'sub']: fill(team.principals[0] as string),
    scope: jwt.writeScope ?? 'gantry/write',
  };
  return {
    header: `${JWT_CLAIMS_HEADER}: ${JSON.stringify(claims)}`,
    ...(jwt.issuer
      ? {}
      : {
          note: `team ${team.name} has no IAM principal, and JWT callers need jwt.issuer in the configuration`,
        }),
  };
}
