'use strict';
/**
 * esbuild plugins for serverless-esbuild (`custom.esbuild.plugins`), also used by
 * bench/function-bundles.mjs so the bench measures what ships.
 *
 * `kubernetesOnlyWhereUsed`: the functions that do not talk to a cluster (iam.cjs FUNCTIONS without
 * `k8s: true`) must not ship @kubernetes/client-node. The Kubernetes adapter is reached through
 * dynamic imports (functions/_deps.ts `gateway()`), which esbuild inlines; a shared wiring module
 * (e.g. one that builds every step's use cases) would otherwise pull the client into every bundle.
 * For those functions the adapter modules and the client resolve to a module that throws when it is
 * loaded: an `await import()` of it rejects with a clear message, and a static named import of it
 * fails the build.
 *
 * `kubeconfigForLocalUseOnly`: kubeconfig clusters are for local use (ARCHITECTURE.md; gantry-config.cjs
 * refuses them in a deployed config), so the deployed bundles replace client-node's KubeConfig module
 * (dist/config.js: auth providers, js-yaml, undici, …; reached only by lib/adapters/kubernetes/
 * kubeconfig.ts's dynamic import) with a module that throws when loaded.
 *
 * `zodEnglishOnly`: zod 4's `z` namespace re-exports every locale (`z.locales`, ≈ 260 KB of classic
 * zod's ≈ 450 KB in a bundle); Gantry reports errors in English only and never calls `z.locales.*`, so
 * the locale index is reduced to `en`. Gantry's schemas now use zod/mini through lib/zod.ts, which
 * imports `en` directly and whose unused `locales` namespace esbuild drops anyway: this stays as a
 * guard should anything bundled reach the locale index.
 *
 * `eksSdkOnlyWithoutEndpoint`: when every cluster of the packaged Gantry config gives `eks.endpoint`
 * and `eks.caData` (deploy/serverless/config/dev.json shows it), the functions connect without
 * DescribeCluster (lib/adapters/kubernetes/for-cluster.ts imports the EKS SDK only when a cluster
 * lacks them), so the bundles replace @aws-sdk/client-eks (≈ 100 KB, with the parts of the SDK core
 * only it uses ≈ 300 KB minified, parsed at every cold start) with a module that throws when loaded.
 *
 * `undiciSideEffectFree`: @kubernetes/client-node imports undici (≈ 0.7 MB minified) for its default
 * fetch transport, which Gantry's gateway replaces with node:https; undici's package.json does not
 * declare itself side-effect free, so esbuild keeps it unless told (bench/gateway-coldstart.mjs and
 * bench/results/gateway-coldstart.md measured this). Where something does use undici, esbuild keeps it.
 */
const path = require('node:path');

const KUBERNETES = /(^@kubernetes\/client-node(\/|$))|([\\/]lib[\\/]adapters[\\/]kubernetes[\\/])/;
const NAMESPACE = 'gantry-without-kubernetes';

/** `functions/steps/create-job.handler` → `functions/steps/create-job` */
const entryOfHandler = (handler) => handler.slice(0, handler.lastIndexOf('.'));
const entryOfFile = (file) =>
  path
    .relative(process.cwd(), path.resolve(String(file)))
    .replace(/\\/g, '/')
    .replace(/\.[cm]?[jt]s$/, '');

/**
 * @param {Set<string>} kubernetesEntries entry files (without extension, relative to the service
 *   directory) that may bundle the Kubernetes client
 */
function kubernetesOnlyWhereUsed(kubernetesEntries) {
  return {
    name: 'gantry-kubernetes-only-where-used',
    setup(build) {
      const entries = []
        .concat(build.initialOptions.entryPoints ?? [])
        .map((e) => (typeof e === 'string' ? e : e.in));
      if (entries.some((e) => kubernetesEntries.has(entryOfFile(e)))) return;
      const entry = entries.map(entryOfFile).join(', ');
      build.onResolve({ filter: /kubernetes/ }, (args) => {
        const target = args.path.startsWith('.') ? path.resolve(args.resolveDir, args.path) : args.path;
        if (!KUBERNETES.test(target)) return undefined;
        return { path: target, namespace: NAMESPACE };
      });
      build.onLoad({ filter: /.*/, namespace: NAMESPACE }, (args) => ({
        contents: `throw new Error(${JSON.stringify(
          `${entry} is packaged without the Kubernetes client (${path.basename(args.path)}): ` +
            'mark it k8s in deploy/serverless/iam.cjs if it talks to a cluster',
        )});\nexport {};\n`,
        loader: 'js',
      }));
    },
  };
}

const KUBECONFIG_MODULE = /^@kubernetes\/client-node\/dist\/config(\.js)?$/;
const kubeconfigForLocalUseOnly = {
  name: 'gantry-kubeconfig-for-local-use-only',
  setup(build) {
    build.onResolve({ filter: KUBECONFIG_MODULE }, (args) => ({
      path: args.path,
      namespace: 'gantry-no-kubeconfig',
    }));
    build.onLoad({ filter: /.*/, namespace: 'gantry-no-kubeconfig' }, () => ({
      contents: `throw new Error(${JSON.stringify(
        'kubeconfig clusters are for local use: the deployed functions reach EKS clusters (eks: { clusterName, region })',
      )});\nexport {};\n`,
      loader: 'js',
    }));
  },
};

const ZOD_LOCALES = /[\\/]node_modules[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/;
const zodEnglishOnly = {
  name: 'gantry-zod-english-only',
  setup(build) {
    build.onLoad({ filter: ZOD_LOCALES }, (args) => ({
      contents: "export { default as en } from './en.js';\n",
      loader: 'js',
      resolveDir: path.dirname(args.path),
    }));
  },
};

/** True when every cluster of a Gantry config document is EKS with endpoint and CA given. */
function eksEndpointsConfigured(config) {
  const clusters = config?.clusters ?? [];
  return clusters.length > 0 && clusters.every((c) => c?.eks?.endpoint && c.eks.caData);
}

function eksSdkOnlyWithoutEndpoint(config) {
  return {
    name: 'gantry-eks-sdk-only-without-endpoint',
    setup(build) {
      if (!eksEndpointsConfigured(config)) return;
      build.onResolve({ filter: /^@aws-sdk\/client-eks$/ }, (args) => ({
        path: args.path,
        namespace: 'gantry-no-eks-sdk',
      }));
      build.onLoad({ filter: /.*/, namespace: 'gantry-no-eks-sdk' }, () => ({
        // Named exports so kubeconfig.ts's static import still builds; loading the module throws.
        contents: `throw new Error(${JSON.stringify(
          'the EKS SDK is not packaged: the Gantry config gives every cluster eks.endpoint and eks.caData ' +
            '(a cluster without them needs DescribeCluster: add them, or package with a config that lacks them)',
        )});\nexport const EKSClient = undefined, DescribeClusterCommand = undefined;\n`,
        loader: 'js',
      }));
    },
  };
}

/** The Gantry config document `serverless package` ships (GANTRY_CONFIG_FILE), or undefined. */
function packagedConfig(serverless) {
  const file = serverless?.service?.provider?.environment?.GANTRY_CONFIG_FILE;
  if (typeof file !== 'string' || !file.startsWith('/var/task/')) return undefined;
  const dir = serverless.serviceDir ?? serverless.config?.servicePath ?? process.cwd();
  try {
    return JSON.parse(
      require('node:fs').readFileSync(path.join(dir, file.slice('/var/task/'.length)), 'utf8'),
    );
  } catch {
    return undefined; // gantry-config.cjs has already refused a missing or malformed file
  }
}

const undiciSideEffectFree = {
  name: 'undici-side-effect-free',
  setup(build) {
    build.onResolve({ filter: /^undici$/ }, async (args) => {
      if (args.pluginData?.undici) return undefined;
      const resolved = await build.resolve(args.path, {
        kind: args.kind,
        resolveDir: args.resolveDir,
        importer: args.importer,
        pluginData: { undici: true },
      });
      return { ...resolved, sideEffects: false };
    });
  },
};

/** The entry files of the functions marked `k8s` in iam.cjs, from serverless.yml's handlers. */
function kubernetesEntries(functions) {
  const { K8S_FUNCTIONS } = require('./iam.cjs');
  return new Set(
    K8S_FUNCTIONS.map((key) => {
      const fn = functions[key];
      if (!fn?.handler)
        throw new Error(
          `iam.cjs marks "${key}" as a Kubernetes function, but serverless.yml has no handler for it`,
        );
      return entryOfHandler(fn.handler);
    }),
  );
}

/**
 * The plugins for a service's functions (serverless.yml `functions`, handlers as written) and the
 * Gantry config document that ships with them.
 */
const pluginsFor = (functions, config) => [
  kubernetesOnlyWhereUsed(kubernetesEntries(functions)),
  kubeconfigForLocalUseOnly,
  eksSdkOnlyWithoutEndpoint(config),
  zodEnglishOnly,
  undiciSideEffectFree,
];

module.exports = (serverless) => pluginsFor(serverless.service.functions, packagedConfig(serverless));
module.exports.pluginsFor = pluginsFor;
module.exports.undiciSideEffectFree = undiciSideEffectFree;
module.exports.zodEnglishOnly = zodEnglishOnly;
module.exports.entryOfHandler = entryOfHandler;
module.exports.eksEndpointsConfigured = eksEndpointsConfigured;
