/**
 * The local Step Functions endpoint: the AWS JSON 1.0 protocol over node:http, in front of the
 * engine in ./engine.ts. `@aws-sdk/client-sfn` works against it unchanged with
 * `endpoint: <url>` (any credentials; requests are not authenticated).
 *
 * Requests: `POST /`, `X-Amz-Target: AWSStepFunctions.<Operation>`, a JSON body. Errors: HTTP 400
 * with `{"__type": "<Code>", "message": ...}`, which the SDK raises as the named exception
 * (ExecutionAlreadyExists, InvalidName, TaskTimedOut, ...). Timestamps are epoch seconds.
 */

import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type LocalStepFunctions, SfnApiError } from './engine.ts';

export interface StepFunctionsServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

type ApiMethod =
  | 'startExecution'
  | 'describeExecution'
  | 'stopExecution'
  | 'listExecutions'
  | 'getExecutionHistory'
  | 'sendTaskSuccess'
  | 'sendTaskFailure'
  | 'sendTaskHeartbeat'
  | 'describeStateMachine'
  | 'listStateMachines';

/** Operations served (X-Amz-Target suffix → engine method); the engine validates the fields. */
const operations: Record<string, ApiMethod> = {
  StartExecution: 'startExecution',
  DescribeExecution: 'describeExecution',
  StopExecution: 'stopExecution',
  ListExecutions: 'listExecutions',
  GetExecutionHistory: 'getExecutionHistory',
  SendTaskSuccess: 'sendTaskSuccess',
  SendTaskFailure: 'sendTaskFailure',
  SendTaskHeartbeat: 'sendTaskHeartbeat',
  DescribeStateMachine: 'describeStateMachine',
  ListStateMachines: 'listStateMachines',
};

const TARGET_PREFIX = 'AWSStepFunctions.';
const MAX_BODY_BYTES = 1_048_576; // AWS: 1 MB per API request

/** JSON 1.0 encodes timestamps as epoch seconds (fractional). */
function toWire(value: unknown): unknown {
  if (value instanceof Date) return value.getTime() / 1000;
  if (Array.isArray(value)) return value.map(toWire);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = toWire(v);
    return out;
  }
  return value;
}

function send(res: ServerResponse, status: number, body: unknown, requestId: string): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/x-amz-json-1.0',
    'Content-Length': Buffer.byteLength(text),
    'x-amzn-RequestId': requestId,
  });
  res.end(text);
}

function sendError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  requestId: string,
): void {
  res.setHeader('x-amzn-ErrorType', code);
  send(res, status, { __type: code, message }, requestId);
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function startStepFunctionsServer(opts: {
  engine: LocalStepFunctions;
  port?: number;
  host?: string;
}): Promise<StepFunctionsServer> {
  const { engine } = opts;
  const host = opts.host ?? '127.0.0.1';

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const requestId = randomUUID();
    if (req.method !== 'POST') {
      sendError(res, 400, 'UnknownOperationException', `Method ${req.method} is not supported`, requestId);
      return;
    }
    const target = String(req.headers['x-amz-target'] ?? '');
    const operation = target.startsWith(TARGET_PREFIX)
      ? operations[target.slice(TARGET_PREFIX.length)]
      : undefined;
    const text = await readBody(req);
    if (text === undefined) {
      sendError(res, 413, 'ValidationException', 'Request body exceeds 1 MB', requestId);
      return;
    }
    if (!operation) {
      sendError(res, 400, 'UnknownOperationException', `Unknown operation: '${target}'`, requestId);
      return;
    }
    let body: unknown;
    try {
      body = text.trim() === '' ? {} : JSON.parse(text);
    } catch {
      sendError(res, 400, 'SerializationException', 'Request body is not valid JSON', requestId);
      return;
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      sendError(res, 400, 'SerializationException', 'Request body must be a JSON object', requestId);
      return;
    }
    try {
      const method = engine[operation] as (req: unknown) => Promise<unknown>;
      const result = await method.call(engine, body);
      send(res, 200, toWire(result), requestId);
    } catch (err) {
      if (err instanceof SfnApiError) sendError(res, 400, err.code, err.message, requestId);
      else {
        console.error(`local-stepfunctions: ${target} failed`, err);
        sendError(res, 500, 'InternalFailure', err instanceof Error ? err.message : String(err), requestId);
      }
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      console.error('local-stepfunctions: request failed', err);
      if (!res.headersSent) sendError(res, 500, 'InternalFailure', 'internal error', 'unknown');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
