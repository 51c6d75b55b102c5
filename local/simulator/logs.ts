import { isObj, asObj as obj } from '../../lib/json.ts';
import type { Json } from './apiserver.ts';
import { badRequest } from './errors.ts';
import { finalLoss, type Hyperparameters, metricsAt } from './objective.ts';

/**
 * Container logs of the simulated pods (`GET /api/v1/namespaces/{ns}/pods/{name}/log`): what a
 * training script prints, derived from the same simulated progress the metric channel and
 * `trainerStatus` report — a header, one line per percent of progress (epoch, step, loss,
 * accuracy: the values the metric channel has for that percent), and the outcome. The checks before
 * it are the apiserver's (container name, a node assigned) and the kubelet's (a container waiting
 * to start has no log; a crash-looping one shows its last run's).
 */

const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** Steps a simulated run prints: one per percent of progress. */
export const LOG_STEPS = 100;

export interface TrainingLogInput {
  pod: string;
  /** The node's rank and the job's number of nodes. */
  rank: number;
  worldSize: number;
  image: string;
  hp: Hyperparameters;
  /** Progress reached by this run of the pod, 0–1. */
  progress: number;
  /** The run's final accuracy (objective.ts). */
  accuracy: number;
  outcome: 'running' | 'succeeded' | 'failed' | 'crashed';
  failMessage?: string;
  /** Progress (0–1) of the checkpoint this run resumed from (a later attempt); its steps are not printed again. */
  resumedFrom?: number;
}

const fmt = (n: number) => n.toFixed(4);

/** The lines the simulated training script has printed so far. */
export function trainingLog(i: TrainingLogInput): string[] {
  const epochs = i.hp.epochs ?? 10;
  const who = `[rank ${i.rank}/${i.worldSize}]`;
  const lines = [
    `${who} starting training on pod ${i.pod} (image ${i.image})`,
    `${who} hyperparameters: lr=${i.hp.lr} batch_size=${i.hp.batchSize} dropout=${i.hp.dropout} epochs=${epochs}${i.hp.width === undefined ? '' : ` width=${i.hp.width}`}`,
  ];
  if (i.outcome === 'crashed') {
    lines.push(
      'Traceback (most recent call last):',
      `RuntimeError: ${i.failMessage ?? 'the training script exited with code 1'}`,
    );
    return lines;
  }
  const steps = Math.min(LOG_STEPS, Math.floor(i.progress * LOG_STEPS + 1e-9));
  const first = Math.floor((i.resumedFrom ?? 0) * LOG_STEPS + 1e-9);
  if (first > 0) lines.push(`${who} resuming from checkpoint at step ${first}/${LOG_STEPS}`);
  for (let k = first + 1; k <= steps; k++) {
    const p = k / LOG_STEPS;
    const m = p >= 1 ? { loss: finalLoss(i.accuracy), accuracy: i.accuracy } : metricsAt(p, i.accuracy);
    const epoch = Math.max(1, Math.ceil((k * epochs) / LOG_STEPS));
    lines.push(
      `${who} epoch ${epoch}/${epochs} step ${k}/${LOG_STEPS} loss=${fmt(m.loss)} accuracy=${fmt(m.accuracy)}`,
    );
  }
  if (i.outcome === 'succeeded') {
    lines.push(`${who} training finished: loss=${fmt(finalLoss(i.accuracy))} accuracy=${fmt(i.accuracy)}`);
  } else if (i.outcome === 'failed') {
    lines.push('Traceback (most recent call last):', `RuntimeError: ${i.failMessage ?? 'training failed'}`);
  }
  return lines;
}

/** The container a log request names, checked as the apiserver does (LogLocation). */
export function logContainer(pod: Json, container: string | null): string {
  const name = String(obj(pod.metadata).name ?? '');
  const containers = arr(obj(pod.spec).containers).map((c) => String(obj(c).name ?? ''));
  if (container === null || container === '') {
    if (containers.length === 1) return containers[0] as string;
    if (containers.length === 0) throw badRequest(`a container name must be specified for pod ${name}`);
    throw badRequest(
      `a container name must be specified for pod ${name}, choose one of: [${containers.join(' ')}]`,
    );
  }
  if (!containers.includes(container))
    throw badRequest(`container ${container} is not valid for pod ${name}`);
  return container;
}

/**
 * What the kubelet says about the container's log: `waiting` (400, the kubelet's message) when
 * it has never run, `last` when it waits to restart after a crash (its last run's log is served),
 * else `current`.
 */
export function containerLogState(pod: Json, container: string): { waiting: string } | 'last' | 'current' {
  const statuses = arr(obj(pod.status).containerStatuses).map(obj);
  const cs = statuses.find((c) => c.name === container);
  const waiting = obj(obj(cs?.state).waiting);
  if (!cs || Object.keys(obj(cs.state)).length === 0 || isObj(obj(cs.state).waiting)) {
    if (isObj(obj(cs?.lastState).terminated)) return 'last';
    const podName = String(obj(pod.metadata).name ?? '');
    const reason = String(waiting.reason ?? 'ContainerCreating');
    const why =
      reason === 'ErrImagePull'
        ? "image can't be pulled"
        : reason === 'ImagePullBackOff'
          ? 'trying and failing to pull image'
          : reason;
    return { waiting: `container "${container}" in pod "${podName}" is waiting to start: ${why}` };
  }
  return 'current';
}

/** The last `tailLines` lines (all when undefined), as the log body: each line ends with a newline. */
export function logBody(lines: readonly string[], tailLines: number | undefined): string {
  const tail = tailLines === undefined ? lines : tailLines === 0 ? [] : lines.slice(-tailLines);
  return tail.map((l) => `${l}\n`).join('');
}
