import middy from '@middy/core';
import { makeReconciler } from '../lib/orchestration/reconcile.ts';
import type { JobApi } from '../lib/ports.ts';
import { jobApi } from '../lib/trainjob/build.ts';
import { clock, config, env, gateway, records, workflow } from './_deps.ts';
import { log, logLine } from './_log.ts';

function build() {
  const clusters = config().clusters.map((c) => ({
    name: c.name,
    gatewayPromise: gateway(c.name),
    legacy: c.legacyKinds,
  }));
  return Promise.all(clusters.map(async (c) => ({ ...c, gateway: await c.gatewayPromise }))).then(
    (resolved) =>
      makeReconciler({
        clusters: () =>
          resolved.map((c) => ({
            name: c.name,
            gateway: c.gateway,
            // One LIST per kind Gantry creates there: TrainJobs when Trainer is served, plus the
            // configured Training Operator v1 kinds that the cluster serves.
            jobApis: async (): Promise<JobApi[]> => {
              const caps = await c.gateway.capabilities();
              const apis: JobApi[] = [];
              if (caps.trainer && caps.trainer !== 'training-operator-v1') apis.push(jobApi(caps.trainer));
              for (const kind of c.legacy)
                if (caps.legacyKinds.includes(kind)) apis.push(jobApi('training-operator-v1', kind));
              return apis;
            },
          })),
        workflow: workflow(),
        records: records(),
        clock,
        orphanGraceSeconds: env().GANTRY_ORPHAN_GRACE_SECONDS,
        log: (line) => logLine({ service: 'gantry-reconciler', ...line }),
      }),
  );
}

let ready: Promise<ReturnType<typeof makeReconciler>> | undefined;

/** Scheduled (every minute): one reconciler tick over every configured cluster. */
export const handler = middy({ timeoutEarlyInMillis: 2000 }).handler(
  async (_event: unknown, _context, { signal }) => {
    ready ??= build();
    const report = await (await ready).tick({ signal });
    const { jobs: _jobs, ...changes } = report;
    if (Object.values(changes).some((n) => n > 0)) log('info', { msg: 'reconciler tick', ...report });
    return report;
  },
);
