import { EVENT_SOURCE, type LifecycleEvent } from './event.ts';

/**
 * Lifecycle events about a model rather than a run: one per alias move, whoever moved it (a
 * promotion policy at publish, an approval, a promotion or a rollback through the API). Built from
 * the alias pointer as written, so a redelivery names the event the same way (`id`), and receivers
 * deduplicate on it. Delivered like the run events: EventBridge, the team's webhooks, the local sink.
 */

export const MODEL_EVENT_TYPES = ['gantry.model.alias-moved'] as const;
export type ModelEventType = (typeof MODEL_EVENT_TYPES)[number];

/** What a model lifecycle event says about the move. */
export interface AliasMovedData {
  team: string;
  model: string;
  alias: string;
  version: number;
  /** Where the alias pointed before (absent on its first move). */
  previousVersion?: number;
  /** The alias's move number (1, 2, 3…): orders one alias's events. */
  seq: number;
  /** The version's directory (what a serving stage loads) and its manifest. */
  storageUri: string;
  manifestUri: string;
  /** A caller (`user/…`, `role/…`) or `policy:<kind>` when a publish moved it. */
  movedBy: string;
  reason: string;
  /** `rollback` when the alias went back to a version older than the one it left. */
  direction: 'forward' | 'rollback' | 'first';
}

/** A CloudEvents 1.0 envelope like the run events'; `subject` is `model/<model>`. */
export interface ModelLifecycleEvent {
  specversion: '1.0';
  /** `<model>:alias:<alias>:<seq>`. */
  id: string;
  source: typeof EVENT_SOURCE;
  type: ModelEventType;
  subject: string;
  /** When the alias moved. */
  time: string;
  datacontenttype: 'application/json';
  data: AliasMovedData;
}

/** Every lifecycle event the events queue carries. */
export type AnyLifecycleEvent = LifecycleEvent | ModelLifecycleEvent;

/** The pointer fields the event is built from (lib/registry/aliases.ts `AliasPointer`). */
export interface MovedPointer {
  model: string;
  alias: string;
  version: number;
  seq: number;
  previousVersion?: number;
  storageUri: string;
  manifestUri: string;
  movedAt: string;
  movedBy: string;
  reason: string;
}

export function aliasMovedLifecycleEvent(p: MovedPointer, team: string): ModelLifecycleEvent {
  const direction =
    p.previousVersion === undefined ? 'first' : p.version < p.previousVersion ? 'rollback' : 'forward';
  return {
    specversion: '1.0',
    id: `${p.model}:alias:${p.alias}:${p.seq}`,
    source: EVENT_SOURCE,
    type: 'gantry.model.alias-moved',
    subject: `model/${p.model}`,
    time: p.movedAt,
    datacontenttype: 'application/json',
    data: {
      team,
      model: p.model,
      alias: p.alias,
      version: p.version,
      ...(p.previousVersion !== undefined ? { previousVersion: p.previousVersion } : {}),
      seq: p.seq,
      storageUri: p.storageUri,
      manifestUri: p.manifestUri,
      movedBy: p.movedBy,
      reason: p.reason,
      direction,
    },
  };
}
