import type { SQSClient } from '@aws-sdk/client-sqs';
import { invokeLocal, type LambdaHandler } from './lambda.ts';
import { startSqsPoller } from './sqs-poller.ts';
import type { StackQueues } from './stack-queues.ts';

/**
 * The local stack's loops (stack.ts): the queue consumers that play Lambda's event source mappings,
 * and the reconciler loop that plays the EventBridge schedule.
 */

/** A handler module loaded on first use, as Lambda loads a function at its first invocation. */
const lazyHandler =
  (load: () => Promise<unknown>) => async (event: never, context: Parameters<LambdaHandler>[1]) => {
    const mod = (await load()) as { handler: LambdaHandler };
    return mod.handler(event, context);
  };

/** The consumers of the runs, data-events, metrics, alias-moves and (when `eventsOn`) lifecycle-events queues. */
export function makeConsumers(sqs: SQSClient, q: StackQueues, eventsOn: boolean) {
  const consumerHandler = lazyHandler(() => import('../functions/intake/queue.ts'));
  const metricsHandler = lazyHandler(() => import('../functions/intake/metrics.ts'));
  const dataHandler = lazyHandler(() => import('../functions/intake/data.ts'));
  const eventsHandler = lazyHandler(() => import('../functions/events/deliver.ts'));
  const aliasMovesHandler = lazyHandler(() => import('../functions/serving/alias-moved.ts'));
  let aliasMovesPoller: ReturnType<typeof startSqsPoller> | undefined;
  let eventsPoller: ReturnType<typeof startSqsPoller> | undefined;
  let poller: ReturnType<typeof startSqsPoller> | undefined;
  let dataPoller: ReturnType<typeof startSqsPoller> | undefined;
  let metricsPoller: ReturnType<typeof startSqsPoller> | undefined;
  const startConsumer = () => {
    poller ??= startSqsPoller({
      sqs,
      queueUrl: q.queueUrl,
      queueArn: q.queueArn,
      handler: consumerHandler,
      // serverless.yml's consumerMaxConcurrency (the runs queue's event source mapping).
      concurrency: 5,
    });
    dataPoller ??= startSqsPoller({
      sqs,
      queueUrl: q.dataEventsQueueUrl,
      queueArn: q.dataEventsQueueArn,
      handler: dataHandler,
      concurrency: 2,
      functionName: 'gantry-data-intake',
    });
    metricsPoller ??= startSqsPoller({
      sqs,
      queueUrl: q.metricsQueueUrl,
      queueArn: q.metricsQueueArn,
      handler: metricsHandler,
      concurrency: 2,
      functionName: 'gantry-metrics-intake',
    });
    aliasMovesPoller ??= startSqsPoller({
      sqs,
      queueUrl: q.aliasMovesQueueUrl,
      queueArn: q.aliasMovesQueueArn,
      handler: aliasMovesHandler,
      concurrency: 2,
      functionName: 'gantry-alias-moved',
    });
    if (eventsOn) {
      eventsPoller ??= startSqsPoller({
        sqs,
        queueUrl: q.eventsQueueUrl,
        queueArn: q.eventsQueueArn,
        handler: eventsHandler,
        concurrency: 2,
        functionName: 'gantry-events',
      });
    }
  };
  const stopConsumer = async () => {
    await Promise.all([
      poller?.stop(),
      dataPoller?.stop(),
      metricsPoller?.stop(),
      eventsPoller?.stop(),
      aliasMovesPoller?.stop(),
    ]);
    eventsPoller = undefined;
    aliasMovesPoller = undefined;
    poller = undefined;
    dataPoller = undefined;
    metricsPoller = undefined;
  };
  return { startConsumer, stopConsumer };
}

/**
 * The reconciler loop: a tick every `everyMs` (default 500; 0 = paused, tests tick by hand), or,
 * with `wakeGapMs`, woken by a job change no sooner than the gap after the last tick started.
 */
export async function startReconcileLoop(opts: {
  everyMs?: number | undefined;
  wakeGapMs?: number | undefined;
}) {
  const reconcilerModule = await import('../functions/reconciler.ts');
  const reconcilerHandler = (reconcilerModule as { handler: LambdaHandler }).handler;
  const reconcile = () => invokeLocal('gantry-reconciler', reconcilerHandler, {}, 55_000);
  let closed = false;
  let paused = opts.everyMs === 0;
  const stopLoop = new AbortController();
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        stopLoop.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      stopLoop.signal.addEventListener('abort', done, { once: true });
    });
  const loop = (async () => {
    while (!closed) {
      const started = Date.now();
      if (!paused) await reconcile().catch((err) => console.error('reconciler tick failed:', err));
      const period = opts.everyMs || 500;
      if (opts.wakeGapMs === undefined || paused) await pause(period);
      else if ((await reconcilerModule.waitForJobChange(period, stopLoop.signal)) === 'changed') {
        // As runPasses: the next tick no sooner than the gap after the last one started.
        const rest = started + opts.wakeGapMs - Date.now();
        if (rest > 0) await pause(rest);
      }
    }
  })();
  return {
    reconcile,
    pauseReconciler: (p: boolean) => {
      paused = p;
    },
    stop: async () => {
      closed = true;
      stopLoop.abort();
      await loop;
    },
  };
}
