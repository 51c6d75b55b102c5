import type { RunPhase } from '../run/phases.ts';
import type { PromotionNote } from '../run/record.ts';
import type { SweepRequest } from './schema.ts';
import type { Assignment } from './space.ts';
import type { SweepPlacement } from './trials.ts';
import type { WarmStart } from './warm-start.ts';

/**
 * The sweep record's shape: its phases, its trials and what the advancer reads of their runs. Its
 * decisions are in record.ts, which re-exports all of this (the names importers use).
 */

export const SWEEP_PHASES = ['Running', 'Completing', 'Succeeded', 'Failed', 'Cancelled'] as const;
export type SweepPhase = (typeof SWEEP_PHASES)[number];
export type SweepOutcome = { phase: 'Succeeded' | 'Failed' | 'Cancelled'; reason: string; message: string };

/**
 * A trial's phase. `Stopping`: Gantry decided to stop it (early stopping, the sweep ended) and
 * waits for its run to say Cancelled; it still holds a slot until then.
 */
export const TRIAL_PHASES = [
  'Queued',
  'Pending',
  'Running',
  'Stopping',
  'Succeeded',
  'Failed',
  'EarlyStopped',
  'Cancelled',
] as const;
export type TrialPhase = (typeof TRIAL_PHASES)[number];
const TRIAL_TERMINAL: readonly TrialPhase[] = ['Succeeded', 'Failed', 'EarlyStopped', 'Cancelled'];
export const isTrialTerminal = (p: TrialPhase) => TRIAL_TERMINAL.includes(p);

/** Why Gantry stops a trial's run; the run record ends Cancelled with this reason. */
export type StopReason = 'EarlyStopped' | 'SweepEnded' | 'Cancelled';

export interface Trial {
  index: number;
  runId: string;
  parameters: Assignment;
  phase: TrialPhase;
  /** The objective metric's final value (Succeeded trials). */
  objective?: number;
  /** A multi-objective sweep's trial: every objective's final value, in the request's order. */
  objectives?: number[];
  reason?: string;
  /** What its run said when it ended Failed or Cancelled (the pruner's message, the failure's cause). */
  message?: string;
  /** Why it is being stopped (phase Stopping). */
  stopReason?: StopReason;
  /** Objective samples over progress, [percent, value] (kept only when early stopping is on). */
  curve?: Array<[number, number]>;
  /** The run was waiting for quota (Kueue/gang scheduler) when last seen. */
  waitingForQuota?: boolean;
  releasedAt: string;
  endedAt?: string;
  /** GPU-hours its run spent Running (GPUs × hours), once it ended. */
  gpuHours?: number;
  /** Retries after infrastructure failures: 1 or 2 (absent: its first run). */
  attempt?: number;
  /** The run this one retries with the same parameters, and why that one was lost. */
  retryOf?: string;
  retryReason?: string;
  /** GPU-hours of the runs lost to infrastructure before this one. */
  lostGpuHours?: number;
}

/** Retries of a trial lost to infrastructure (same parameters, a new run) before it counts as Failed. */
export const MAX_TRIAL_RETRIES = 2;

export interface BestTrial {
  trialIndex: number;
  runId: string;
  objective: number;
  /** A multi-objective sweep: every objective's value (the trial its `select` picked). */
  objectives?: number[];
  parameters: Assignment;
}

export interface PublishedModel {
  runId: string;
  model: string;
  published: boolean;
  version?: number;
  modelUri?: string;
  manifestUri?: string;
  notified?: boolean;
  /** What the version did to the model's aliases (lib/registry/policy.ts). */
  promotions?: PromotionNote[];
}

export interface ChainedRun {
  runId: string;
  phase: RunPhase;
  reason?: string;
  submittedAt: string;
  /** The model the full run published (once Succeeded). */
  model?: { name: string; version?: string; modelUri?: string };
}

export interface SweepRecord {
  sweepId: string;
  team: string;
  phase: SweepPhase;
  reason?: string;
  message?: string;
  /** Decided when the sweep stops releasing trials; the phase becomes it once nothing is in flight. */
  outcome?: SweepOutcome;
  /** The accepted request, the seed filled in (so the sweep can be reproduced). */
  request: SweepRequest;
  fingerprint: string;
  placement: SweepPlacement;
  /** Every trial, by index (read from the trial items; not part of the sweep item). */
  trials: Trial[];
  /**
   * Trials per phase as the sweep item's counters say (lists read these instead of the trials;
   * live: a late add of an advance cut off may be missing or arrive after the end). Not stored in the
   * document.
   */
  counts?: Record<string, number>;
  /** Trials per phase when the sweep ended, exactly (what lists show for a final sweep). */
  finalCounts?: Record<string, number>;
  best?: BestTrial;
  published?: PublishedModel;
  /** The chained full run (`then`), once submitted: its run id and what its record last said. */
  chained?: ChainedRun;
  /** The earlier sweeps' finished trials that seed the sampler (`warmStartFrom`). */
  warmStart?: WarmStart;
  /**
   * Set when the request left the algorithm to `auto`: which one it chose at creation (then stored
   * in request.algorithm) and why (lib/sweep/auto.ts).
   */
  algorithmChoice?: { algorithm: string; reason: string };
  createdAt: string;
  updatedAt: string;
  endedAt?: string;
}

/** What a trial's run record says, as the advancer read it (undefined: no record yet). */
export interface RunObservation {
  phase: RunPhase;
  reason?: string;
  message?: string;
  metrics?: Record<string, number | string>;
  percent?: number;
  waitingForQuota?: boolean;
  /** When the run ended (terminal phases). */
  endedAt?: string;
  /** GPU-hours the run spent Running (terminal phases). */
  gpuHours?: number;
}

/**
 * How long after a trial's run ended its own advance may still be releasing its successor: longer
 * than that advance may take (TRIAL_HOOK_BUDGET_MS in lib/orchestration/steps/outcome.ts). Past this,
 * any advance releases it.
 */
export const OWN_RELEASE_MS = 10_000;

export interface StepResult {
  record: SweepRecord;
  changed: boolean;
  /** New trials to enqueue. */
  release: Trial[];
  /** Trials whose runs must be stopped. */
  stop: Array<{ trial: Trial; reason: StopReason; message?: string }>;
}
