import { archiveTarget } from '../../logs/archive.ts';
import type { CallOptions } from '../../ports.ts';
import type { EvaluationState } from '../../registry/evaluation.ts';
import type { RunSpec } from '../../run/spec.ts';
import type { JobRef } from '../job-ref.ts';
import type { CleanupDeps } from '../step-deps.ts';

/** The state machine's Cleanup task: the run's job deleted once the run ends. */

export function makeCleanup(deps: CleanupDeps) {
  /** Delete the job so its quota is freed. Missing job refs (CreateJob failed) are fine. */
  async function cleanup(
    state: { run: RunSpec; job?: JobRef; evaluation?: EvaluationState },
    opts?: CallOptions,
  ): Promise<{ deleted: boolean }> {
    // A run that fails while its evaluation waits: the evaluation jobs go too (they carry no run id
    // label, so the reconciler's orphan removal does not find them).
    await deleteEvaluationJobs(state, opts);
    if (!state.job) return { deleted: false };
    // The pods' logs go with the job: keep their tail first (never throws, bounded in time).
    await deps.archiveLogs?.(archiveTarget(state.run, state.job), opts);
    await (await deps.gateway(state.job.cluster)).deleteJob(
      state.job.api,
      state.job.namespace,
      state.job.name,
      opts,
    );
    return { deleted: true };
  }

  async function deleteEvaluationJobs(
    state: { run: RunSpec; evaluation?: EvaluationState },
    opts?: CallOptions,
  ): Promise<void> {
    const e = state.evaluation;
    const api = (e?.job as { api?: JobRef['api'] } | undefined)?.api;
    if (e?.status !== 'waiting' || !api) return;
    const gateway = await deps.gateway(state.run.cluster);
    for (const v of e.versions ?? []) await gateway.deleteJob(api, state.run.namespace, v.job, opts);
  }

  return cleanup;
}
