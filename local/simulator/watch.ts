import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Json } from '../../lib/json.ts';
import type { ApiServer, WatchEvent } from './apiserver.ts';
import { apiVersionOf, type ResourceDef } from './registry.ts';
import { matchesFields, matchesLabels, parseFieldSelector, parseLabelSelector } from './selectors.ts';

/** What a request path names: a kind at a version, optionally a namespace, an object and a subresource. */
export interface Route {
  def: ResourceDef;
  version: string;
  namespace?: string;
  name?: string;
  subresource?: string;
}

/**
 * A watch stream: the backlog (every matching object, or the events since `resourceVersion`, or
 * 410 Expired when that is older than the kept history), then each matching event as it happens,
 * until the client goes, `timeoutSeconds` passes or the simulator closes (`watches` holds the
 * stream's end).
 */
export function watch(
  api: ApiServer,
  watches: Set<() => void>,
  r: Route,
  q: URLSearchParams,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  const labels = parseLabelSelector(q.get('labelSelector') ?? '');
  const fieldSel = q.get('fieldSelector');
  const fields = fieldSel ? parseFieldSelector(fieldSel, ['metadata.name', 'metadata.namespace']) : [];
  const av = apiVersionOf(r.def.group, r.version);
  const match = (e: WatchEvent) =>
    e.def === r.def &&
    (r.namespace === undefined || (e.object.metadata as Json).namespace === r.namespace) &&
    matchesLabels(labels, (e.object.metadata as Json).labels as Record<string, string> | undefined) &&
    matchesFields(fields, e.object);
  const rvParam = q.get('resourceVersion');
  let backlog: WatchEvent[];
  if (!rvParam || rvParam === '0') {
    backlog = api
      .peekAll(r.def, r.namespace)
      .map((o) => ({
        type: 'ADDED' as const,
        def: r.def,
        object: o,
        rv: Number((o.metadata as Json).resourceVersion),
      }))
      .filter(match);
  } else {
    const since = api.eventsSince(Number(rvParam));
    if (!since) {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      res.end(
        `${JSON.stringify({
          type: 'ERROR',
          object: {
            kind: 'Status',
            apiVersion: 'v1',
            metadata: {},
            status: 'Failure',
            message: `too old resource version: ${rvParam} (${api.currentRv()})`,
            reason: 'Expired',
            code: 410,
          },
        })}\n`,
      );
      return;
    }
    backlog = since.filter(match);
  }
  res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  res.flushHeaders(); // the client's request resolves on the headers, before any event
  const write = (e: WatchEvent) => {
    const object = e.object.apiVersion === av ? e.object : { ...e.object, apiVersion: av };
    res.write(`${JSON.stringify({ type: e.type, object })}\n`);
  };
  for (const e of backlog) write(e);
  const off = api.onEvent((e) => {
    if (match(e)) write(e);
  });
  const timeout = Number(q.get('timeoutSeconds') ?? 0);
  let timer: NodeJS.Timeout | undefined;
  const end = () => {
    off();
    if (timer) clearTimeout(timer);
    watches.delete(end);
    if (!res.writableEnded) res.end();
  };
  watches.add(end);
  if (timeout > 0) timer = setTimeout(end, timeout * 1000);
  req.on('close', end);
}
