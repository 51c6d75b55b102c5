import { CreateQueueCommand, GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { ACCOUNT, REGION } from './definition.ts';

/** The local stack's queues on fauxqs, as serverless.yml declares them (stack.ts). */
export interface StackQueues {
  queueUrl: string;
  queueArn: string;
  dlqUrl: string;
  dataEventsQueueUrl: string;
  dataEventsQueueArn: string;
  dataEventsDlqUrl: string;
  metricsQueueUrl: string;
  metricsQueueArn: string;
  metricsDlqUrl: string;
  eventsQueueUrl: string;
  eventsQueueArn: string;
  eventsDlqUrl: string;
  servingQueueUrl: string | undefined;
  aliasMovesQueueUrl: string;
  aliasMovesQueueArn: string;
}

/**
 * The runs, data-events, metrics, lifecycle-events and alias-moves queues with their DLQs, and (unless
 * `servingQueue` is false) the serving hand-off queue.
 */
export async function createQueues(
  sqs: SQSClient,
  opts: { eventsMaxReceiveCount?: number | undefined; servingQueue?: boolean | undefined },
): Promise<StackQueues> {
  const dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'gantry-runs-dlq' })))
    .QueueUrl as string;
  const dlqArn = (
    await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }))
  ).Attributes?.QueueArn as string;
  const queueUrl = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: 'gantry-runs',
        Attributes: {
          VisibilityTimeout: '30',
          RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 5 }),
        },
      }),
    )
  ).QueueUrl as string;
  const queueArn = `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-runs`;
  const dataEventsDlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'gantry-data-events-dlq' })))
    .QueueUrl as string;
  const dataEventsQueueUrl = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: 'gantry-data-events',
        Attributes: {
          VisibilityTimeout: '30',
          RedrivePolicy: JSON.stringify({
            deadLetterTargetArn: `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-data-events-dlq`,
            maxReceiveCount: 5,
          }),
        },
      }),
    )
  ).QueueUrl as string;
  const dataEventsQueueArn = `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-data-events`;
  const metricsDlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'gantry-metrics-dlq' })))
    .QueueUrl as string;
  const metricsQueueUrl = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: 'gantry-metrics',
        Attributes: {
          VisibilityTimeout: '30',
          RedrivePolicy: JSON.stringify({
            deadLetterTargetArn: `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-metrics-dlq`,
            maxReceiveCount: 5,
          }),
        },
      }),
    )
  ).QueueUrl as string;
  const metricsQueueArn = `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-metrics`;
  const eventsDlqUrl = (
    await sqs.send(
      new CreateQueueCommand({ QueueName: 'gantry-events-dlq.fifo', Attributes: { FifoQueue: 'true' } }),
    )
  ).QueueUrl as string;
  const eventsQueueUrl = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: 'gantry-events.fifo',
        Attributes: {
          FifoQueue: 'true',
          VisibilityTimeout: '30',
          RedrivePolicy: JSON.stringify({
            deadLetterTargetArn: `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-events-dlq.fifo`,
            maxReceiveCount: opts.eventsMaxReceiveCount ?? 10,
          }),
        },
      }),
    )
  ).QueueUrl as string;
  const eventsQueueArn = `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-events.fifo`;
  const servingQueueUrl =
    opts.servingQueue === false
      ? undefined
      : ((await sqs.send(new CreateQueueCommand({ QueueName: 'gantry-serving' }))).QueueUrl as string);
  await sqs.send(new CreateQueueCommand({ QueueName: 'gantry-alias-moves-dlq' }));
  const aliasMovesQueueUrl = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: 'gantry-alias-moves',
        Attributes: {
          VisibilityTimeout: '30',
          RedrivePolicy: JSON.stringify({
            deadLetterTargetArn: `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-alias-moves-dlq`,
            maxReceiveCount: 5,
          }),
        },
      }),
    )
  ).QueueUrl as string;
  const aliasMovesQueueArn = `arn:aws:sqs:${REGION}:${ACCOUNT}:gantry-alias-moves`;
  return {
    queueUrl,
    queueArn,
    dlqUrl,
    dataEventsQueueUrl,
    dataEventsQueueArn,
    dataEventsDlqUrl,
    metricsQueueUrl,
    metricsQueueArn,
    metricsDlqUrl,
    eventsQueueUrl,
    eventsQueueArn,
    eventsDlqUrl,
    servingQueueUrl,
    aliasMovesQueueUrl,
    aliasMovesQueueArn,
  };
}
