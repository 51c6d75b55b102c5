import type { Json } from './apiserver.ts';

/**
 * Pod statuses the simulated kubelet writes (local/simulator/pods.ts): a pod moving to a stage,
 * a crash-looping container and its back-off message.
 */

const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const obj = (v: unknown): Json => (isObj(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const meta = (o: Json): Json => obj(o.metadata);

export type PodStage = 'pending' | 'running' | 'succeeded' | 'failed';

/** Seconds of the kubelet's container restart back-off: 10 s doubling, capped at 5 min. */
export function crashLoopBackoffSeconds(restarts: number): number {
  return Math.min(300, 10 * 2 ** Math.max(0, restarts - 1));
}

export function notReady(type: string, now: string, containers: Json[]): Json {
  return {
    type,
    status: 'False',
    reason: 'ContainersNotReady',
    message: `containers with unready status: [${containers.map((c) => String(c.name)).join(' ')}]`,
    lastProbeTime: null,
    lastTransitionTime: now,
  };
}

export function crashLooping(cs: Json, restarts: number, message: string, now: string): Json {
  return {
    ...cs,
    ready: false,
    started: false,
    restartCount: restarts,
    state: { waiting: { reason: 'CrashLoopBackOff', message } },
    lastState: {
      terminated: { exitCode: 1, reason: 'Error', startedAt: now, finishedAt: now, containerID: '' },
    },
  };
}

export function backoffMessage(restarts: number, container: string, pod: string, o: Json): string {
  const s = crashLoopBackoffSeconds(restarts);
  const back = s >= 60 ? `${Math.floor(s / 60)}m${s % 60}s` : `${s}s`;
  return `back-off ${back} restarting failed container=${container} pod=${pod}_${String(meta(o).namespace)}(${String(meta(o).uid ?? '')})`;
}

/** A new status for a pod moving to `stage`, from its current one. */
export function stageStatus(st: Json, pod: Json, stage: PodStage, now: string): Json {
  const containers = arr(obj(pod.spec).containers).map(obj);
  const conds = (ready: boolean) => [
    { type: 'PodReadyToStartContainers', status: 'True', lastProbeTime: null, lastTransitionTime: now },
    { type: 'Initialized', status: 'True', lastProbeTime: null, lastTransitionTime: now },
    ready
      ? { type: 'Ready', status: 'True', lastProbeTime: null, lastTransitionTime: now }
      : { ...notReady('Ready', now, containers), reason: 'PodCompleted', message: undefined },
    ready
      ? { type: 'ContainersReady', status: 'True', lastProbeTime: null, lastTransitionTime: now }
      : { ...notReady('ContainersReady', now, containers), reason: 'PodCompleted', message: undefined },
    { type: 'PodScheduled', status: 'True', lastProbeTime: null, lastTransitionTime: now },
  ];
  const clean = (c: Json) => JSON.parse(JSON.stringify(c)) as Json;
  if (stage === 'pending') return st;
  const startedAt = String(st.startTime ?? now);
  if (stage === 'running') {
    return {
      ...st,
      phase: 'Running',
      startTime: startedAt,
      conditions: conds(true).map(clean),
      containerStatuses: containers.map((c) => ({
        name: String(c.name),
        image: String(c.image ?? ''),
        imageID: `${String(c.image ?? '')}@sha256:${'0'.repeat(64)}`,
        containerID: `containerd://${'1'.repeat(64)}`,
        ready: true,
        started: true,
        restartCount: 0,
        state: { running: { startedAt: now } },
      })),
    };
  }
  const ok = stage === 'succeeded';
  return {
    ...st,
    phase: ok ? 'Succeeded' : 'Failed',
    conditions: conds(false).map(clean),
    containerStatuses: containers.map((c) => ({
      name: String(c.name),
      image: String(c.image ?? ''),
      imageID: `${String(c.image ?? '')}@sha256:${'0'.repeat(64)}`,
      containerID: `containerd://${'1'.repeat(64)}`,
      ready: false,
      started: false,
      restartCount: 0,
      state: {
        terminated: {
          exitCode: ok ? 0 : 1,
          reason: ok ? 'Completed' : 'Error',
          startedAt,
          finishedAt: now,
          containerID: `containerd://${'1'.repeat(64)}`,
        },
      },
    })),
  };
}
