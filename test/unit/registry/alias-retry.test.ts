import { describe, expect, it } from 'vitest';
import { manifestKey } from '../../../lib/artifacts/layout.ts';
import { AliasConflictError, type AliasPointer, makeAliases } from '../../../lib/registry/aliases.ts';
import { memoryStore } from '../../helpers/intake-fakes.ts';

/**
 * A move whose onMoved failed after the pointer moved (the alias-moves queue refused the message):
 * the caller's retry of the same move sends it again with the same seq, instead of a 409 that leaves
 * the move without its event and KServe hand-off. In-memory store (the ObjectStore port's fake).
 */
function setup() {
  const store = memoryStore();
  const sent: AliasPointer[] = [];
  let failures = 0;
  const aliases = makeAliases({
    store,
    clock: { now: () => new Date('2026-12-05T07:00:00Z') },
    onMoved: async (p) => {
      if (failures > 0) {
        failures--;
        throw new Error('SQS SendMessage: ServiceUnavailable');
      }
      sent.push(p);
    },
  });
  const publish = (version: number) =>
    store.putJson(manifestKey('resnet', version), {
      model: 'resnet',
      version,
      storageUri: `s3://b/models/resnet/${version}/`,
      manifestUri: `s3://b/models/resnet/${version}/manifest.json`,
    });
  return { aliases, sent, publish, failNext: () => void failures++ };
}

const move = (version: number, expectedVersion: number | null, reason = 'rollback: bad canary') => ({
  model: 'resnet',
  alias: 'production',
  version,
  expectedVersion,
  movedBy: 'user/alice',
  reason,
});

describe('alias moves retried after their hand-off failed', () => {
  it('sends the move again with the same seq, and writes no second history entry', async () => {
    // Prepare
    const { aliases, sent, publish, failNext } = setup();
    await publish(1);
    await publish(2);
    await aliases.move(move(1, null, 'first'));
    failNext();
    // Act
    await expect(aliases.move(move(2, 1))).rejects.toThrow('ServiceUnavailable');
    const retried = await aliases.move(move(2, 1));
    // Assess
    expect(sent.map((p) => [p.version, p.seq])).toEqual([
      [1, 1],
      [2, 2],
    ]);
    expect(retried).toMatchObject({ version: 2, seq: 2, previousVersion: 1 });
    expect((await aliases.history('resnet', 'production', 10)).map((p) => p.seq)).toEqual([2, 1]);
  });

  it('is still a conflict for another move to the same version', async () => {
    // Prepare
    const { aliases, publish } = setup();
    await publish(1);
    await publish(2);
    await aliases.move(move(1, null, 'first'));
    await aliases.move(move(2, 1));
    // Act + Assess: another reason (or mover) expecting version 1 lost the race.
    await expect(aliases.move(move(2, 1, 'promote after review'))).rejects.toBeInstanceOf(AliasConflictError);
    await expect(aliases.move({ ...move(2, 1), movedBy: 'user/bob' })).rejects.toBeInstanceOf(
      AliasConflictError,
    );
  });
});
