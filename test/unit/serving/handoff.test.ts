import { describe, expect, it } from 'vitest';
import { manifestKey } from '../../../lib/artifacts/layout.ts';
import { makeModelOwners } from '../../../lib/artifacts/ownership.ts';
import { parseConfig } from '../../../lib/config.ts';
import { NotFoundError } from '../../../lib/errors.ts';
import type { ModelLifecycleEvent } from '../../../lib/events/model-event.ts';
import { makeAliases } from '../../../lib/registry/aliases.ts';
import {
  type AliasMoveMessage,
  type InferenceServices,
  type IsvcObject,
  makeAliasHandOff,
} from '../../../lib/serving/handoff.ts';
import { type ServingState, servingKey } from '../../../lib/serving/kserve.ts';
import { memoryStore } from '../../helpers/intake-fakes.ts';

/**
 * The hand-off's decisions over an in-memory store (the port's fake) and an InferenceService fake
 * (an object literal standing in for the cluster: the contract tier runs the real adapter against a
 * real kube-apiserver, test/contract/kserve.test.ts).
 */

const NOW = new Date('2026-12-05T00:00:00Z');

function setup() {
  const store = memoryStore();
  const clock = { now: () => NOW };
  const queued: Array<{ message: AliasMoveMessage; delay: number }> = [];
  const events: ModelLifecycleEvent[] = [];
  const objects = new Map<string, IsvcObject & { spec: Record<string, unknown> }>();
  objects.set('team-vision/resnet-prod', {
    metadata: { generation: 1 },
    spec: { predictor: { model: { modelFormat: { name: 'pytorch' } } } },
    status: { observedGeneration: 1, conditions: [{ type: 'Ready', status: 'True' }] },
  });
  const patches: Array<{ at: string; body: unknown }> = [];
  const isvcs: InferenceServices = {
    async patch(ns, name, body) {
      const o = objects.get(`${ns}/${name}`);
      if (!o) throw new NotFoundError(`inferenceservices ${ns}/${name} not found`);
      patches.push({ at: `${ns}/${name}`, body });
      o.spec = structuredClone((body as { spec: Record<string, unknown> }).spec);
      o.metadata = { generation: (o.metadata?.generation ?? 1) + 1 };
      return structuredClone(o);
    },
    async get(ns, name) {
      return structuredClone(objects.get(`${ns}/${name}`));
    },
  };
  const config = parseConfig({
    clusters: [{ name: 'local', kubeconfig: '/dev/null' }],
    teams: [
      {
        name: 'vision',
        principals: ['vision-group'],
        namespaces: ['team-vision'],
        imagePrefixes: ['ghcr.io/acme/'],
        serving: {
          kserve: [
            {
              model: 'resnet',
              alias: 'production',
              inferenceService: 'resnet-prod',
              canaryTrafficPercent: 20,
            },
          ],
        },
      },
      { name: 'nlp', principals: ['nlp-group'], namespaces: ['team-nlp'], imagePrefixes: ['ghcr.io/acme/'] },
    ],
  });
  const handOff = makeAliasHandOff({
    config,
    store,
    owners: makeModelOwners({ store, clock }),
    clock,
    emit: async (e) => events.push(e),
    inferenceServices: async () => isvcs,
    queue: { send: async (message, delay) => void queued.push({ message, delay }) },
    watch: { everySeconds: 5, forSeconds: 60 },
  });
  const moves: AliasMoveMessage[] = [];
  const aliases = makeAliases({
    store,
    clock,
    onMoved: async (p) => void moves.push({ kind: 'moved', model: p.model, alias: p.alias, seq: p.seq }),
  });
  async function publish(model: string, version: number, team = 'vision') {
    await makeModelOwners({ store, clock }).claim(model, team, `run-${version}`);
    await store.putJson(manifestKey(model, version), {
      model,
      version,
      storageUri: `s3://b/models/${model}/${version}/`,
      manifestUri: `s3://b/models/${model}/${version}/manifest.json`,
    });
  }
  const state = async () =>
    (
      await store.getJson<ServingState>(
        servingKey('resnet', 'production', { namespace: 'team-vision', name: 'resnet-prod' }),
      )
    )?.value;
  return { store, aliases, handOff, moves, queued, events, objects, patches, publish, state };
}

describe('the alias hand-off', () => {
  it('sends one lifecycle event per move and patches the InferenceService to each, rollback included', async () => {
    // Prepare
    const t = setup();
    await t.publish('resnet', 1);
    await t.publish('resnet', 2);
    // Act: promote 1, then 2, then roll back to 1
    for (const v of [1, 2, 1]) {
      await t.aliases.move({
        model: 'resnet',
        alias: 'production',
        version: v,
        movedBy: 'user/alice',
        reason: 'test',
      });
      await t.handOff.handle(t.moves.at(-1) as AliasMoveMessage);
    }
    // Assess
    expect(t.events.map((e) => [e.id, e.data.version, e.data.direction])).toEqual([
      ['resnet:alias:production:1', 1, 'first'],
      ['resnet:alias:production:2', 2, 'forward'],
      ['resnet:alias:production:3', 1, 'rollback'],
    ]);
    expect(t.patches.map((p) => p.body)).toEqual(
      [1, 2, 1].map((v) => ({
        spec: {
          predictor: { model: { storageUri: `s3://b/models/resnet/${v}/` }, canaryTrafficPercent: 20 },
        },
      })),
    );
    expect(await t.state()).toMatchObject({
      seq: 3,
      version: 1,
      patchedGeneration: 4,
      ready: 'Unknown',
      reason: 'NotObservedYet',
    });
    // Not Ready yet: a delayed check follows each move.
    expect(t.queued.at(-1)).toEqual({
      message: {
        kind: 'check',
        model: 'resnet',
        alias: 'production',
        seq: 3,
        until: '2026-12-05T00:01:00.000Z',
      },
      delay: 5,
    });
  });

  it('a late message of an older move patches nothing back; a check reports the Ready the cluster wrote', async () => {
    // Prepare
    const t = setup();
    await t.publish('resnet', 1);
    await t.publish('resnet', 2);
    await t.aliases.move({ model: 'resnet', alias: 'production', version: 1, movedBy: 'u', reason: 'r' });
    await t.aliases.move({ model: 'resnet', alias: 'production', version: 2, movedBy: 'u', reason: 'r' });
    // Act: the newer move's message first, then the older one's
    await t.handOff.handle(t.moves[1] as AliasMoveMessage);
    await t.handOff.handle(t.moves[0] as AliasMoveMessage);
    const o = t.objects.get('team-vision/resnet-prod') as IsvcObject;
    o.status = { observedGeneration: 2, conditions: [{ type: 'Ready', status: 'True' }] };
    const queuedBefore = t.queued.length;
    const out = await t.handOff.handle({ kind: 'check', model: 'resnet', alias: 'production', seq: 2 });
    // Assess
    expect(t.events.map((e) => e.data.version)).toEqual([2, 1]);
    expect(t.patches).toHaveLength(1);
    expect(await t.state()).toMatchObject({ seq: 2, version: 2, ready: 'True', observedGeneration: 2 });
    expect(out.settled).toBe(true);
    expect(t.queued.length).toBe(queuedBefore);
  });

  it('records a missing InferenceService without retrying, and never patches for an alias of another team', async () => {
    // Prepare
    const t = setup();
    t.objects.clear();
    await t.publish('resnet', 1);
    await t.publish('bert', 1, 'nlp');
    // Act
    await t.aliases.move({ model: 'resnet', alias: 'production', version: 1, movedBy: 'u', reason: 'r' });
    await t.handOff.handle(t.moves[0] as AliasMoveMessage);
    await t.aliases.move({ model: 'bert', alias: 'production', version: 1, movedBy: 'u', reason: 'r' });
    await t.handOff.handle(t.moves[1] as AliasMoveMessage);
    // Assess
    expect(await t.state()).toMatchObject({
      ready: 'Unknown',
      reason: 'InferenceServiceNotFound',
      version: 1,
    });
    expect(t.patches).toEqual([]);
    expect(t.events.map((e) => [e.data.model, e.data.team])).toEqual([
      ['resnet', 'vision'],
      ['bert', 'nlp'],
    ]);
  });
});
