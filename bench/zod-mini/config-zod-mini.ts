// The same schemas as config-zod.ts in zod/mini (tree-shakable functions instead of methods).
import * as z from 'zod/mini';

const RFC1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const name = z.string().check(z.regex(RFC1035_LABEL, 'must be an RFC 1035 label'), z.maxLength(63));
const nonEmpty = () => z.string().check(z.minLength(1));

const ClusterConfigSchema = z
  .strictObject({
    name,
    eks: z.optional(
      z
        .strictObject({
          clusterName: z.string().check(z.minLength(1), z.maxLength(100)),
          region: nonEmpty(),
          endpoint: z.optional(z.string().check(z.startsWith('https://'))),
          caData: z.optional(nonEmpty()),
        })
        .check(
          z.refine(
            (e) => Boolean(e.endpoint) === Boolean(e.caData),
            'give both endpoint and caData, or neither',
          ),
        ),
    ),
    kubeconfig: z.optional(nonEmpty()),
    legacyKinds: z._default(z.array(z.enum(['PyTorchJob', 'TFJob', 'MPIJob', 'XGBoostJob', 'JAXJob'])), []),
  })
  .check(
    z.refine(
      (c) => Boolean(c.eks) !== Boolean(c.kubeconfig),
      'a cluster needs exactly one of eks or kubeconfig',
    ),
  );

const TeamConfigSchema = z.strictObject({
  name,
  principals: z.array(nonEmpty()).check(z.minLength(1)),
  namespaces: z.array(name).check(z.minLength(1)),
  queues: z._default(z.array(name), []),
  runtimes: z._default(z.array(nonEmpty()), []),
  imagePrefixes: z.array(nonEmpty()).check(z.minLength(1)),
  maxNodes: z._default(z.number().check(z.int(), z.minimum(1)), 16),
  maxGpusPerRun: z._default(z.number().check(z.int(), z.minimum(0)), 64),
  cluster: z.optional(name),
});

const GantryConfigSchema = z.strictObject({
  clusters: z.array(ClusterConfigSchema).check(z.minLength(1, 'at least one cluster')),
  teams: z._default(z.array(TeamConfigSchema), []),
  defaultCluster: z.optional(name),
});

const RuntimeEnvSchema = z.object({
  GANTRY_BUCKET: z.string().check(z.minLength(3)),
  GANTRY_STATE_MACHINE_ARN: z.string().check(z.startsWith('arn:')),
  GANTRY_RUNS_QUEUE_URL: z.optional(z.string().check(z.startsWith('http'))),
  GANTRY_CONFIG_FILE: z.optional(z.string()),
  AWS_REGION: z._default(z.string(), 'us-east-1'),
  GANTRY_ORPHAN_GRACE_SECONDS: z._default(z.coerce.number().check(z.int(), z.minimum(0)), 300),
  GANTRY_S3_ENDPOINT: z.optional(z.url()),
});

export const parseConfig = (doc: unknown) => GantryConfigSchema.parse(doc);
export const parseEnv = (env: unknown) => RuntimeEnvSchema.parse(env);
