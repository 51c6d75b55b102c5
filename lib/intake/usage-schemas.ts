import * as z from '../zod.ts';
import { PhaseSchema } from './view-schemas.ts';

/** The answers of GET /v1/usage and GET /v1/runs/{id}/queue (lib/usage, lib/queue), for the OpenAPI document. */

export const BudgetSchema = z.strictObject({
  soft: z.described(z.optional(z.number()), 'GPU-hours a month past which submits carry a warning'),
  hard: z.described(
    z.optional(z.number()),
    'GPU-hours a month; once used up, submits are refused until the reset',
  ),
  used: z.described(z.number(), "GPU-hours the team's ended attempts used this month"),
  remaining: z.described(z.optional(z.number()), 'GPU-hours left before hard'),
  state: z.enum(['ok', 'warning', 'exhausted']),
  resetsAt: z.described(z.string(), 'When the monthly usage starts again from 0 (00:00 UTC on the 1st)'),
});

export const UsageViewSchema = z.strictObject({
  team: z.string(),
  model: z.described(z.optional(z.string()), 'Only this model, when asked'),
  period: z.described(z.string(), 'The UTC month (YYYY-MM) or day (YYYY-MM-DD)'),
  granularity: z.enum(['month', 'day']),
  used: z.described(z.number(), 'GPU-hours of the attempts that ended, by the UTC day they ran'),
  lost: z.described(z.number(), 'The part of them lost to infrastructure failures'),
  days: z.described(
    z.array(z.strictObject({ date: z.string(), used: z.number(), lost: z.number() })),
    'Each day of the period with usage, oldest first',
  ),
  inFlight: z.described(
    z.strictObject({ runs: z.number(), gpus: z.number() }),
    "The team's runs and GPUs in flight now: their GPU-hours count when their attempts end",
  ),
  budget: z.described(
    z.optional(BudgetSchema),
    "The team's monthly GPU-hour budget (current month, when configured)",
  ),
});

export const QueuePositionSchema = z.strictObject({
  runId: z.string(),
  phase: PhaseSchema,
  queued: z.described(z.boolean(), 'Whether the run waits in a Kueue LocalQueue now (Pending, with a queue)'),
  queue: z.described(z.optional(z.string()), 'The LocalQueue'),
  namespace: z.optional(z.string()),
  source: z.described(
    z.optional(z.enum(['kueue', 'gantry'])),
    "kueue: Kueue's visibility API (every workload of the LocalQueue); gantry: the team's Gantry runs only",
  ),
  position: z.described(z.optional(z.int().check(z.gte(1))), '1 = next in line in the LocalQueue'),
  ahead: z.described(z.optional(z.int().check(z.gte(0))), 'Workloads ahead of it in the LocalQueue'),
  positionInClusterQueue: z.described(
    z.optional(z.int().check(z.gte(1))),
    "Its place in the ClusterQueue behind the LocalQueue (Kueue's view only)",
  ),
  aheadRuns: z.described(z.optional(z.array(z.string())), "Gantry's view: the runs ahead of it (at most 20)"),
  message: z.described(z.string(), 'One line for people'),
  note: z.described(z.optional(z.string()), "Why the answer is Gantry's view, and what it cannot see"),
  estimate: z.described(
    z.optional(
      z.strictObject({
        earliestSeconds: z.described(
          z.number().check(z.gte(0)),
          'Seconds from asOf: the soonest it may start',
        ),
        likelySeconds: z.described(z.number().check(z.gte(0)), 'Seconds from asOf: when it likely starts'),
        latestSeconds: z.described(z.number().check(z.gte(0)), 'Seconds from asOf: the latest of the range'),
        basis: z.described(z.string(), 'How it was computed: running, ahead, quota, assumptions'),
      }),
    ),
    'When the run may start, from a simulation of its queue: a range, not a promise (absent when its GPUs exceed the quota)',
  ),
  asOf: z.string(),
});

export type UsageView = z.infer<typeof UsageViewSchema>;
