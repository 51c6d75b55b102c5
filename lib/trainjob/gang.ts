import { asRecord } from '../admission/interpret.ts';
import { ANNOTATION } from './labels.ts';
import type { K8sObject } from './types.ts';

/**
 * Which PodGroup gates a TrainJob whose runtime asks for gang scheduling. Trainer builds the
 * PodGroup from the runtime's `spec.podGroupPolicy` (`coscheduling` or `volcano`) in its own
 * reconcile of the TrainJob (pkg/runtime/framework/plugins/coscheduling, .../volcano), so for a
 * moment after creation the job exists, is not suspended and has no gate yet. CreateJob writes the
 * expected gate on the job (ANNOTATION.gangGate) so that moment reads as "waiting for the PodGroup",
 * not as admitted.
 */
export type GangGate = 'coscheduling' | 'volcano';

export function runtimeGangGate(runtime: K8sObject): GangGate | undefined {
  const policy = asRecord(asRecord(runtime.spec)?.podGroupPolicy);
  if (policy === undefined) return undefined;
  if (policy.coscheduling !== undefined) return 'coscheduling';
  if (policy.volcano !== undefined) return 'volcano';
  return undefined;
}

/** The gate CreateJob said the job waits for, if any. */
export function expectedGangGate(job: Record<string, unknown>): GangGate | undefined {
  const value = asRecord(asRecord(job.metadata)?.annotations)?.[ANNOTATION.gangGate];
  return value === 'coscheduling' || value === 'volcano' ? value : undefined;
}
