import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../lib/errors.ts';
import { shardScope } from '../../../lib/orchestration/shards.ts';

const clusters = ['gpu-west', 'cpu', 'gpu-east', 'spot'].map((name) => ({ name }));
const names = (s: { clusters: { name: string }[] }) => s.clusters.map((c) => c.name);

describe('reconciler shards', () => {
  it.each([
    // shards, shard, clusters (sorted by name: cpu, gpu-east, gpu-west, spot), advances sweeps
    [1, 0, ['cpu', 'gpu-east', 'gpu-west', 'spot'], true],
    [2, 0, ['cpu', 'gpu-west'], true],
    [2, 1, ['gpu-east', 'spot'], false],
    [4, 3, ['spot'], false],
    [4, 0, ['cpu'], true],
    [6, 5, [], false],
  ])('%i shards, shard %i reconciles %j (sweeps: %s)', (shards, shard, expected, sweeps) => {
    const scope = shardScope({ shard }, shards, clusters);
    expect(names(scope)).toEqual(expected);
    expect(scope.sweeps).toBe(sweeps);
  });

  it('gives every cluster to exactly one shard, and one each when shards = clusters', () => {
    for (const shards of [1, 2, 3, 4, 7]) {
      const all = Array.from({ length: shards }, (_, k) =>
        names(shardScope({ shard: k }, shards, clusters)),
      ).flat();
      expect(all.sort()).toEqual(clusters.map((c) => c.name).sort());
    }
    const each = [0, 1, 2, 3].map((k) => names(shardScope({ shard: k }, 4, clusters)));
    expect(each.every((c) => c.length === 1)).toBe(true);
  });

  it('an event without a shard (a manual invoke) reconciles everything and the sweeps', () => {
    for (const event of [{}, undefined, null, 'tick']) {
      const scope = shardScope(event, 3, clusters);
      expect(names(scope).sort()).toEqual(clusters.map((c) => c.name).sort());
      expect(scope.sweeps).toBe(true);
    }
  });

  it.each([[3], [-1], [1.5], ['0'], [null]])('rejects shard %j of 3, naming the field', (shard) => {
    const call = () => shardScope({ shard }, 3, clusters);
    expect(call).toThrow(ValidationError);
    expect(call).toThrow(/shard: must be an integer from 0 to 2/);
  });
});
