import { describe, expect, it } from 'vitest';
import { makeModelOwners } from '../../../lib/artifacts/ownership.ts';
import { ValidationError } from '../../../lib/errors.ts';
import { makeSubmitSweep } from '../../../lib/intake/submit-sweep.ts';
import { makeRunRecords } from '../../../lib/run/records.ts';
import { makeSweeps } from '../../../lib/sweep/sweeps.ts';
import {
  BUCKET,
  iam,
  intakeConfig,
  memoryStore,
  memoryTable,
  recordingQueue,
  VISION_ARN,
} from '../../helpers/intake-fakes.ts';

/**
 * Submitting a multi-objective sweep through the sweep intake (in-memory fakes of the ports, as
 * test/unit/sweep/intake.test.ts): auto picks NSGA-II and says why; the rules are 400s naming the field.
 */

const clock = { now: () => new Date('2026-12-02T10:00:00Z') };
const body = (over: Record<string, unknown> = {}) => ({
  template: {
    modelName: 'resnet',
    team: 'vision',
    runtime: { name: 'torch-distributed' },
    image: 'ghcr.io/acme/train:1',
    resourcesPerNode: { gpu: 1 },
  },
  parameters: [
    { name: 'lr', type: 'continuous', min: 1e-4, max: 1e-1, scale: 'log' },
    { name: 'width', type: 'integer', min: 32, max: 512, step: 32 },
  ],
  objectives: [
    { metric: 'accuracy', direction: 'maximize' },
    { metric: 'latency_ms', direction: 'minimize' },
  ],
  maxTrials: 120,
  parallelTrials: 4,
  ...over,
});

function submitter() {
  const table = memoryTable();
  const records = makeRunRecords({ table, clock });
  const sweeps = makeSweeps({ table, records, clock, bucket: BUCKET });
  const owners = makeModelOwners({ store: memoryStore(), clock });
  const queue = recordingQueue();
  const submit = makeSubmitSweep({
    sweeps,
    owners,
    config: intakeConfig(),
    bucket: BUCKET,
    clock,
    caps: { queue },
    newSeed: () => 42,
  });
  return { submit, sweeps, queue };
}

describe('submitting a multi-objective sweep', () => {
  it('picks NSGA-II under auto, stores the objectives and select, and releases its first trials', async () => {
    const { submit, sweeps } = submitter();
    const select = { constraint: { metric: 'latency_ms', max: 20 }, optimize: 'accuracy' };
    const { record } = await submit({ caller: iam(VISION_ARN), body: body({ select }) });
    expect(record.request.algorithm).toEqual({ name: 'nsga2', seed: 42, popSize: 12 });
    expect(record.algorithmChoice?.reason).toMatch(/^2 objectives: NSGA-II, 12 trials per generation/);
    const stored = await sweeps.get(record.sweepId);
    expect(stored?.request.objectives?.map((o) => o.metric)).toEqual(['accuracy', 'latency_ms']);
    expect(stored?.request.select).toEqual(select);
    expect(stored?.trials).toHaveLength(4);
  });

  it.each<[string, Record<string, unknown>, string, RegExp]>([
    [
      'both objective and objectives',
      { objective: { metric: 'accuracy', direction: 'maximize' } },
      'objectives',
      /exactly one of objective/,
    ],
    ['early stopping', { earlyStopping: { rule: 'asha' } }, 'earlyStopping', /one objective/],
    ['gp', { algorithm: { name: 'gp' } }, 'algorithm.name', /gp ranks trials by one objective/],
    [
      'select on an unknown metric',
      { select: { optimize: 'loss' } },
      'select.optimize',
      /objectives' metrics/,
    ],
    ['negative weights', { select: { weights: { accuracy: -1 } } }, 'select.weights.accuracy', /negative/],
  ])('refuses %s with a 400 naming the field', async (_, over, field, rule) => {
    const { submit } = submitter();
    const err = await submit({ caller: iam(VISION_ARN), body: body(over) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    const issue = (err as ValidationError).issues.find((i) => i.field === field);
    expect(issue?.rule, JSON.stringify((err as ValidationError).issues)).toMatch(rule);
  });
});
