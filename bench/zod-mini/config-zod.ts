// Gantry's cluster/team configuration and runtime environment (lib/config.ts, without data
// triggers) in classic zod: one half of bench/zod-mini.mjs's comparison.
import { z } from 'zod';

const RFC1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const name = z.string().regex(RFC1035_LABEL, 'must be an RFC 1035 label').max(63);

const ClusterConfigSchema = z
  .strictObject({
    name,
    eks: z
      .strictObject({
        clusterName: z.string().min(1).max(100),
        region: z.string().min(1),
        endpoint: z.string().startsWith('https://').optional(),
        caData: z.string().min(1).optional(),
      })
      .refine((e) => Boolean(e.endpoint) === Boolean(e.caData), 'give both endpoint and caData, or neither')
      .optional(),
    kubeconfig: z.string().min(1).optional(),
    legacyKinds: z.array(z.enum(['PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'JAXJob'])).default([]),
  })
  .refine(
    (c) => Boolean(c.eks) !== Boolean(c.kubeconfig),
    'a cluster needs exactly one of eks or kubeconfig',
  );

const TeamConfigSchema = z.strictObject({
  name,
  principals: z.array(z.string().min(1)).min(1),
  namespaces: z.array(name).min(1),
  queues: z.array(name).default([]),
  runtimes: z.array(z.string().min(1)).default([]),
  imagePrefixes: z.array(z.string().min(1)).min(1),
  maxNodes: z.number().int().min(1).default(16),
  maxGpusPerRun: z.number().int().min(0).default(64),
  cluster: name.optional(),
});

const GantryConfigSchema = z.strictObject({
  clusters: z.array(ClusterConfigSchema).min(1, 'at least one cluster'),
  teams: z.array(TeamConfigSchema).default([]),
  defaultCluster: name.optional(),
});

const RuntimeEnvSchema = z.object({
  GANTRY_BUCKET: z.string().min(3),
  GANTRY_STATE_MACHINE_ARN: z.string().startsWith('arn:'),
  GANTRY_RUNS_QUEUE_URL: z.string().startsWith('http').optional(),
  GANTRY_CONFIG_FILE: z.string().optional(),
  AWS_REGION: z.string().default('us-east-1'),
  GANTRY_ORPHAN_GRACE_SECONDS: z.coerce.number().int().min(0).default(300),
  GANTRY_S3_ENDPOINT: z.string().url().optional(),
});

export const parseConfig = (doc: unknown) => GantryConfigSchema.parse(doc);
export const parseEnv = (env: unknown) => RuntimeEnvSchema.parse(env);
