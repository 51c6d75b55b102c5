import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AnyLifecycleEvent } from '../events/model-event.ts';

/** The embedded default's event sink: one JSON line per delivered lifecycle event, appended. */
export function makeJsonlSink(file: string) {
  let ready: Promise<unknown> | undefined;
  return {
    async append(event: AnyLifecycleEvent): Promise<void> {
      ready ??= mkdir(dirname(file), { recursive: true });
      await ready;
      await appendFile(file, `${JSON.stringify(event)}\n`);
    },
  };
}
