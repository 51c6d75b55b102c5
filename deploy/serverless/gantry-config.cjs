'use strict';
/**
 * The Gantry configuration file (clusters, teams) that ships inside every function bundle.
 *
 * serverless.yml names it with the `config` stage param (default
 * `deploy/serverless/config/<stage>.json`). This loader validates it with lib/config.ts — the same
 * schema the functions parse at their first call — so a bad file fails `serverless package` /
 * `deploy` with every problem named, never a half-working deployment. It also derives the EKS
 * cluster ARNs the execution roles may DescribeCluster, so IAM follows the file.
 *
 * Each cluster should give `eks.endpoint` and `eks.caData` (see config/dev.json): with them the
 * functions connect without DescribeCluster and esbuild-plugins.cjs leaves the EKS SDK out of the
 * bundles; a cluster without them is accepted, with a warning (each cold start then calls
 * DescribeCluster).
 */
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const ROOT = path.resolve(__dirname, '../..');
const cache = new Map();

async function load(resolveVariable) {
  const stage = await resolveVariable('sls:stage');
  const file = await resolveVariable('param:config');
  if (typeof file !== 'string' || file === '') {
    throw new Error('the `config` param must name the Gantry configuration file (JSON)');
  }
  if (!cache.has(file)) cache.set(file, validate(file, stage));
  return cache.get(file);
}

async function validate(file, stage) {
  const abs = path.resolve(ROOT, file);
  const rel = path.relative(ROOT, abs);
  if (rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new Error(
      `the Gantry config ${file} must be inside the service directory (it ships in the bundles)`,
    );
  }
  if (!fs.existsSync(abs)) {
    throw new Error(
      `no Gantry config for stage "${stage}": create ${rel} (see deploy/serverless/config/dev.json) ` +
        'or pass --param="config=<path inside the service directory>"',
    );
  }
  let document;
  try {
    document = JSON.parse(fs.readFileSync(abs, 'utf8'));
  } catch (err) {
    throw new Error(`the Gantry config ${rel} is not JSON: ${err.message}`);
  }
  const { parseConfig } = await import(pathToFileURL(path.join(ROOT, 'lib/config.ts')).href);
  // The rules' templates too (lib/datatrigger/check.ts): only the data trigger checks them at run time.
  const { checkDataTriggers } = await import(pathToFileURL(path.join(ROOT, 'lib/datatrigger/check.ts')).href);
  let config;
  try {
    config = checkDataTriggers(parseConfig(document));
  } catch (err) {
    const issues = (err.issues ?? []).map((i) => `  - ${i.field || '(root)'}: ${i.rule}`).join('\n');
    throw new Error(`the Gantry config ${rel} is invalid:\n${issues || err.message}`);
  }
  const local = config.clusters.filter((c) => c.kubeconfig).map((c) => c.name);
  if (local.length > 0) {
    throw new Error(
      `the Gantry config ${rel} has kubeconfig clusters (${local.join(', ')}): those are for local use; ` +
        'the deployed functions reach EKS clusters, configured as eks: { clusterName, region, endpoint, caData }',
    );
  }
  const described = config.clusters
    .filter((c) => c.eks && !(c.eks.endpoint && c.eks.caData))
    .map((c) => c.name);
  if (described.length > 0) {
    console.warn(
      `Gantry config ${rel}: clusters ${described.join(', ')} give no eks.endpoint / eks.caData, so the ` +
        'functions call DescribeCluster at each cold start and bundle the EKS SDK ' +
        "(aws eks describe-cluster --query 'cluster.[endpoint,certificateAuthority.data]')",
    );
  }
  return { path: rel.split(path.sep).join('/'), config };
}

/** `arn:<partition>:eks:<region>:<account>:cluster/<name>` for every EKS cluster in the file. */
function clusterArn(eks) {
  return {
    'Fn::Join': [
      '',
      [
        'arn:',
        { Ref: 'AWS::Partition' },
        `:eks:${eks.region}:`,
        { Ref: 'AWS::AccountId' },
        `:cluster/${eks.clusterName}`,
      ],
    ],
  };
}

/**
 * With auth=jwt the stack pins the issuer (`jwtIssuerUrl`); the config's auth.jwt.issuer, when
 * given, must be the same one (the functions refuse to serve otherwise).
 */
async function jwtChecked(resolveVariable) {
  const { config, path: rel } = await load(resolveVariable);
  const jwt = config.auth.jwt;
  if ((await resolveVariable('param:auth')) === 'jwt') {
    const issuer = await resolveVariable('param:jwtIssuerUrl');
    if (typeof issuer !== 'string' || issuer === '') {
      throw new Error('auth=jwt needs the jwtIssuerUrl param (the issuer every token must come from)');
    }
    if (jwt.issuer && jwt.issuer !== issuer) {
      throw new Error(
        `the Gantry config ${rel} pins auth.jwt.issuer ${jwt.issuer}, but the jwtIssuerUrl param is ${issuer}`,
      );
    }
  }
  return jwt;
}

module.exports = {
  load,
  clusterArn,
  /** The validated file's path relative to the service directory (for `package.patterns`). */
  path: async ({ resolveVariable }) => (await load(resolveVariable)).path,
  /** Where the file is inside the Lambda bundle (`GANTRY_CONFIG_FILE`). */
  lambdaPath: async ({ resolveVariable }) => `/var/task/${(await load(resolveVariable)).path}`,
  /** The scopes of the GET routes' JWT authorizer: the read scope, or the write scope (it grants read). */
  jwtReadScopes: async ({ resolveVariable }) => {
    const jwt = await jwtChecked(resolveVariable);
    return [jwt.readScope, jwt.writeScope];
  },
  /** The scopes of the POST routes' JWT authorizer: the write scope. */
  jwtWriteScopes: async ({ resolveVariable }) => [(await jwtChecked(resolveVariable)).writeScope],
};
