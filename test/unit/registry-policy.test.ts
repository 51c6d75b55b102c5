import { describe, expect, it } from 'vitest';
import { aliasNamesOf } from '../../lib/registry/layout.ts';
import { decide, type PromotionPolicy, policiesFor } from '../../lib/registry/policy.ts';

const ifBetter = (over: Partial<PromotionPolicy> = {}): PromotionPolicy => ({
  model: 'churn',
  alias: 'production',
  policy: 'if-better',
  metric: 'accuracy',
  direction: 'maximize',
  minMargin: 0.01,
  ...over,
});
const v = (version: number, metrics: Record<string, number | string> = {}) => ({ version, metrics });

describe('promotion policies (lib/registry/policy.ts)', () => {
  it('if-better promotes only past the margin, in the direction given, and says why with both values', () => {
    expect(decide(ifBetter(), v(2, { accuracy: 0.92 }), v(1, { accuracy: 0.9 })).outcome).toBe('promoted');
    const short = decide(ifBetter(), v(2, { accuracy: 0.905 }), v(1, { accuracy: 0.9 }));
    expect(short.outcome).toBe('refused');
    expect(short.reason).toBe(
      'policy if-better: not better: accuracy 0.905 vs 0.9 (version 1, maximize, margin ≥ 0.01)',
    );
    expect(short.comparison).toEqual({
      metric: 'accuracy',
      candidate: 0.905,
      champion: 0.9,
      minMargin: 0.01,
    });
    const loss = ifBetter({ metric: 'eval.loss', direction: 'minimize', minMargin: 0 });
    expect(decide(loss, v(2, { 'eval.loss': 0.3 }), v(1, { 'eval.loss': 0.31 })).outcome).toBe('promoted');
    expect(decide(loss, v(2, { 'eval.loss': 0.31 }), v(1, { 'eval.loss': 0.31 })).outcome).toBe('refused');
  });

  it('if-better: no champion promotes; a missing metric on either side refuses with the reason', () => {
    expect(decide(ifBetter(), v(1, { accuracy: 0.5 }), undefined).outcome).toBe('promoted');
    const none = decide(ifBetter(), v(2, { loss: 1 }), v(1, { accuracy: 0.9 }));
    expect([none.outcome, none.reason]).toEqual([
      'refused',
      'policy if-better: version 2 reported no numeric accuracy',
    ]);
    const theirs = decide(ifBetter(), v(2, { accuracy: 0.95 }), v(1, {}));
    expect(theirs.outcome).toBe('refused');
    expect(theirs.reason).toMatch(/version 1 has no numeric accuracy/);
    // A numeric string (metrics.json may carry them) counts as a number.
    expect(decide(ifBetter(), v(2, { accuracy: '0.95' }), v(1, { accuracy: 0.9 })).outcome).toBe('promoted');
  });

  it('auto promotes, manual waits; neither moves an alias backwards or repeats a move', () => {
    const auto = ifBetter({ policy: 'auto' });
    expect(decide(auto, v(2), v(1)).outcome).toBe('promoted');
    expect(decide(auto, v(2), v(3)).outcome).toBe('unchanged');
    expect(decide(auto, v(2), v(2)).outcome).toBe('unchanged');
    expect(decide(ifBetter({ policy: 'manual' }), v(2), v(1)).outcome).toBe('pending');
  });

  it("a model's own policy wins over a * policy for the same alias", () => {
    const policies = [
      ifBetter({ model: '*', alias: 'production', policy: 'auto' }),
      ifBetter({ model: '*', alias: 'staging', policy: 'auto' }),
      ifBetter({ model: 'churn', alias: 'production' }),
    ];
    expect(policiesFor(policies, 'churn').map((p) => `${p.alias}:${p.policy}`)).toEqual([
      'production:if-better',
      'staging:auto',
    ]);
    expect(policiesFor(policies, 'other').map((p) => `${p.alias}:${p.policy}`)).toEqual([
      'production:auto',
      'staging:auto',
    ]);
  });

  it('lists alias names only from pointers directly under aliases/ (not history or pending)', () => {
    const keys = [
      'models/m/aliases/production.json',
      'models/m/aliases/production/history/0000000001.json',
      'models/m/aliases/canary/pending.json',
      'models/m/aliases/staging.json',
    ];
    expect(aliasNamesOf('m', keys)).toEqual(['production', 'staging']);
  });
});
