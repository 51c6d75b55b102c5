import { Server } from 'node:net';

/**
 * Start a server that insists on listening on every interface (fauxqs 2.x calls
 * `listen({ host: "0.0.0.0" })` whatever its `host` option says) on the loopback interface only:
 * while `start` runs, a listen on an unspecified address (`0.0.0.0`, `::`, or none) is made on
 * 127.0.0.1. The embedded default has no authentication, so nothing of it may be reachable from
 * another machine. Listens that name an address keep it.
 */
export async function onLoopback<T>(start: () => Promise<T>): Promise<T> {
  const original = Server.prototype.listen;
  const anyAddress = (host: unknown) => host === undefined || host === '0.0.0.0' || host === '::';
  // biome-ignore lint/suspicious/noExplicitAny: Server.listen has many overloads; its arguments are passed through
  Server.prototype.listen = function (this: Server, ...args: any[]) {
    const [first, second] = args;
    if (first !== null && typeof first === 'object' && !('fd' in first) && !('path' in first)) {
      if (anyAddress(first.host)) args[0] = { ...first, host: '127.0.0.1' };
    } else if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
      if (typeof second === 'string') {
        if (anyAddress(second)) args[1] = '127.0.0.1';
      } else {
        args.splice(1, 0, '127.0.0.1');
      }
    }
    return original.apply(this, args as Parameters<typeof original>);
  } as typeof original;
  try {
    return await start();
  } finally {
    Server.prototype.listen = original;
  }
}
