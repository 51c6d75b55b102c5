import { describe, expect, it } from 'vitest';
import { makeEventBridgeBus } from '../../../lib/adapters/aws/event-bus.ts';
import { makeWebhookSecrets } from '../../../lib/adapters/aws/webhook-secrets.ts';
import { parseConfig } from '../../../lib/config.ts';
import { AwsUnavailableError, ValidationError } from '../../../lib/errors.ts';
import { type LifecycleEvent, runEvents } from '../../../lib/events/event.ts';
import { newRecord } from '../../../lib/run/record.ts';
import { aRunSpec } from '../../helpers/builders.ts';

const NOW = new Date('2026-12-01T10:00:00Z');
const [EVENT] = runEvents(newRecord(aRunSpec({ runId: 'run-a' }), 'fp', NOW)) as [LifecycleEvent];

describe('makeEventBridgeBus', () => {
  it('puts the envelope as detail, the type as detail-type, on the named bus', async () => {
    const inputs: unknown[] = [];
    const bus = makeEventBridgeBus({
      eventBusName: 'ml-events',
      putEvents: async (input) => {
        inputs.push(input);
        return { FailedEntryCount: 0, Entries: [{ EventId: 'e-1' }] };
      },
    });
    await bus.put(EVENT);
    expect(inputs).toEqual([
      {
        Entries: [
          {
            Source: 'gantry',
            DetailType: 'gantry.run.accepted',
            Detail: JSON.stringify(EVENT),
            Time: NOW,
            EventBusName: 'ml-events',
          },
        ],
      },
    ]);
  });

  it.each([
    ['ThrottlingException', AwsUnavailableError],
    ['InternalFailure', AwsUnavailableError],
    ['AccessDeniedException', Error],
  ])('a %s entry failure throws %s (PutEvents answers 200 with per-entry errors)', async (code, cls) => {
    const bus = makeEventBridgeBus({
      eventBusName: 'b',
      putEvents: async () => ({ FailedEntryCount: 1, Entries: [{ ErrorCode: code, ErrorMessage: 'no' }] }),
    });
    const err = await bus.put(EVENT).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(cls);
    expect(String(err)).toContain(code);
  });
});

describe('makeWebhookSecrets', () => {
  const hook = { name: 'h', url: 'https://x.example/h' };

  it('reads secretEnv from the environment; a missing variable names the field', async () => {
    const secrets = makeWebhookSecrets({ env: { S: 'v' }, clock: { now: () => NOW } });
    await expect(secrets({ ...hook, secretEnv: 'S' })).resolves.toBe('v');
    await expect(secrets({ ...hook, secretEnv: 'MISSING' })).rejects.toBeInstanceOf(ValidationError);
  });

  it('reads secretParameter from SSM with decryption, once per cache period', async () => {
    let now = NOW.getTime();
    const calls: unknown[] = [];
    const ssm = {
      send: async (cmd: { input: unknown }) => {
        calls.push(cmd.input);
        return { Parameter: { Value: `secret-${calls.length}` } };
      },
    };
    const secrets = makeWebhookSecrets({
      env: {},
      ssm: () => ssm as never,
      clock: { now: () => new Date(now) },
      cacheSeconds: 60,
    });
    const w = { ...hook, secretParameter: '/gantry/webhooks/h' };
    expect(await secrets(w)).toBe('secret-1');
    now += 59_000;
    expect(await secrets(w)).toBe('secret-1');
    now += 2_000;
    expect(await secrets(w)).toBe('secret-2');
    expect(calls).toEqual([
      { Name: '/gantry/webhooks/h', WithDecryption: true },
      { Name: '/gantry/webhooks/h', WithDecryption: true },
    ]);
  });
});

describe('team webhooks in the configuration', () => {
  const config = (webhooks: unknown) => ({
    clusters: [{ name: 'c', kubeconfig: 'x' }],
    teams: [{ name: 'vision', principals: ['p'], namespaces: ['vision'], imagePrefixes: ['i/'], webhooks }],
  });
  const rules = (webhooks: unknown) => {
    try {
      parseConfig(config(webhooks));
      return [];
    } catch (err) {
      return (err as ValidationError).issues.map((i) => `${i.field}: ${i.rule}`);
    }
  };

  it.each([
    ['one secretEnv webhook', [{ name: 'ci', url: 'https://ci.example/h', secretEnv: 'HOOK_SECRET' }], []],
    ['one SSM webhook', [{ name: 'ci', url: 'http://10.0.0.5/h', secretParameter: '/gantry/ci' }], []],
    [
      'both secrets',
      [{ name: 'ci', url: 'https://ci.example/h', secretEnv: 'S', secretParameter: '/p' }],
      ['teams.0.webhooks.0: give exactly one of secretEnv or secretParameter'],
    ],
    [
      'no secret',
      [{ name: 'ci', url: 'https://ci.example/h' }],
      ['teams.0.webhooks.0: give exactly one of secretEnv or secretParameter'],
    ],
    [
      'an ftp URL',
      [{ name: 'ci', url: 'ftp://ci.example/h', secretEnv: 'S' }],
      ['teams.0.webhooks.0.url: must be an http(s) URL'],
    ],
    [
      'the same name twice',
      [
        { name: 'ci', url: 'https://a.example/h', secretEnv: 'S' },
        { name: 'ci', url: 'https://b.example/h', secretEnv: 'S' },
      ],
      ['teams.0.webhooks: webhook names must be unique'],
    ],
    [
      'a secret value where a variable name goes',
      [{ name: 'ci', url: 'https://a.example/h', secretEnv: 'whsec-123' }],
      ['teams.0.webhooks.0.secretEnv: must be an environment variable name'],
    ],
  ])('%s', (_what, webhooks, expected) => {
    expect(rules(webhooks)).toEqual(expected);
  });
});
