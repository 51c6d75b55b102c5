import { describe, expect, it } from 'vitest';
import type { Json } from '../../local/simulator/apiserver.ts';
import { ApiError } from '../../local/simulator/errors.ts';
import { containerLogState, logBody, logContainer, trainingLog } from '../../local/simulator/logs.ts';
import { DEFAULT_HYPERPARAMETERS, finalLoss, metricsAt } from '../../local/simulator/objective.ts';

// The pure parts of the simulator's container logs (local/simulator/logs.ts).

const base = {
  pod: 'p-0',
  rank: 0,
  worldSize: 2,
  image: 'img:1',
  hp: { ...DEFAULT_HYPERPARAMETERS, epochs: 4 },
  accuracy: 0.9,
};

describe('trainingLog', () => {
  it('prints a header, one line per percent reached with the metric channel’s values, and the outcome', () => {
    const running = trainingLog({ ...base, progress: 0.256, outcome: 'running' });
    expect(running).toHaveLength(2 + 25);
    expect(running[0]).toBe('[rank 0/2] starting training on pod p-0 (image img:1)');
    expect(running[1]).toBe('[rank 0/2] hyperparameters: lr=0.001 batch_size=32 dropout=0.1 epochs=4');
    const m = metricsAt(0.25, 0.9);
    expect(running.at(-1)).toBe(
      `[rank 0/2] epoch 1/4 step 25/100 loss=${m.loss.toFixed(4)} accuracy=${m.accuracy.toFixed(4)}`,
    );
    const done = trainingLog({ ...base, progress: 1, outcome: 'succeeded' });
    expect(done).toHaveLength(2 + 100 + 1);
    expect(done.at(-2)).toMatch(/^\[rank 0\/2\] epoch 4\/4 step 100\/100 /);
    expect(done.at(-1)).toBe(
      `[rank 0/2] training finished: loss=${finalLoss(0.9).toFixed(4)} accuracy=0.9000`,
    );
    const failed = trainingLog({
      ...base,
      progress: 0.4,
      outcome: 'failed',
      failMessage: 'CUDA out of memory',
    });
    expect(failed.slice(-2)).toEqual([
      'Traceback (most recent call last):',
      'RuntimeError: CUDA out of memory',
    ]);
    expect(failed).toHaveLength(2 + 40 + 2);
    expect(trainingLog({ ...base, progress: 0, outcome: 'crashed' })).toHaveLength(4);
  });
});

const podWith = (containers: string[], statuses: Json[] = []): Json => ({
  metadata: { name: 'p-0' },
  spec: { containers: containers.map((name) => ({ name })) },
  status: { containerStatuses: statuses },
});

describe('logContainer and containerLogState (the apiserver’s and the kubelet’s checks)', () => {
  const message = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      if (e instanceof ApiError) return `${e.code} ${(e.body as { message: string }).message}`;
      throw e;
    }
    return 'no error';
  };

  it.each<[string, Json, string | null, string]>([
    ['the named container', podWith(['a', 'node']), 'node', 'node'],
    ['the only container when none is named', podWith(['node']), null, 'node'],
    [
      'several and none named',
      podWith(['a', 'b']),
      null,
      '400 a container name must be specified for pod p-0, choose one of: [a b]',
    ],
    ['an unknown container', podWith(['node']), 'x', '400 container x is not valid for pod p-0'],
  ])('%s', (_name, pod, container, expected) => {
    let out: string;
    try {
      out = logContainer(pod, container);
    } catch {
      out = message(() => logContainer(pod, container));
    }
    expect(out).toBe(expected);
  });

  it.each<[string, Json[], unknown]>([
    [
      'no status yet',
      [],
      { waiting: 'container "node" in pod "p-0" is waiting to start: ContainerCreating' },
    ],
    [
      'pulling',
      [{ name: 'node', state: { waiting: { reason: 'ErrImagePull' } } }],
      { waiting: 'container "node" in pod "p-0" is waiting to start: image can\'t be pulled' },
    ],
    [
      'backing off a pull',
      [{ name: 'node', state: { waiting: { reason: 'ImagePullBackOff' } } }],
      { waiting: 'container "node" in pod "p-0" is waiting to start: trying and failing to pull image' },
    ],
    [
      'crash-looping: the last run',
      [
        {
          name: 'node',
          state: { waiting: { reason: 'CrashLoopBackOff' } },
          lastState: { terminated: { exitCode: 1 } },
        },
      ],
      'last',
    ],
    ['running', [{ name: 'node', state: { running: {} } }], 'current'],
    ['terminated', [{ name: 'node', state: { terminated: { exitCode: 0 } } }], 'current'],
  ])('%s', (_name, statuses, expected) => {
    expect(containerLogState(podWith(['node'], statuses), 'node')).toEqual(expected);
  });

  it.each<[string[], number | undefined, string]>([
    [['a', 'b', 'c'], undefined, 'a\nb\nc\n'],
    [['a', 'b', 'c'], 2, 'b\nc\n'],
    [['a', 'b', 'c'], 0, ''],
    [[], 5, ''],
  ])('logBody(%j, %s)', (lines, tail, body) => {
    expect(logBody(lines, tail)).toBe(body);
  });
});
