import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApiException } from '@kubernetes/client-node/dist/gen/apis/exception.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { causesOf, httpStatusOf, kubeCall, toGantryError } from '../../../lib/adapters/kubernetes/errors.ts';
import { makeKubernetesGateway } from '../../../lib/adapters/kubernetes/gateway.ts';
import {
  ClusterAccessDeniedError,
  ClusterRejectedError,
  ClusterUnavailableError,
  JobNameConflictError,
  NotFoundError,
} from '../../../lib/errors.ts';

const WHAT = 'create trainjobs.trainer.kubeflow.org team-a/run-1';

/** An error response as client-node 2.x throws it: the body is the raw response text. */
function apiError(code: number, status?: object | string): ApiException<unknown> {
  const body =
    status === undefined ? undefined : typeof status === 'string' ? status : JSON.stringify(status);
  return new ApiException(code, 'Unknown API Status Code!', body, { 'content-type': 'application/json' });
}

function kubeStatus(code: number, reason: string, message: string, causes?: object[]) {
  return { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message, details: { causes } };
}

const INVALID = kubeStatus(422, 'Invalid', 'TrainJob.trainer.kubeflow.org "run-1" is invalid', [
  {
    reason: 'FieldValueTypeInvalid',
    field: 'spec.trainer.numNodes',
    message: 'Invalid value: "string": spec.trainer.numNodes in body must be of type integer: "string"',
  },
  {
    reason: 'FieldValueInvalid',
    field: '<nil>',
    message: 'Invalid value: metadata.name must match RFC 1035 DNS label format',
  },
]);

function errWithCode(message: string, code: string): Error {
  return Object.assign(new Error(message), { code });
}

function abortedByTimeout(): Error {
  return Object.assign(new Error('The operation was aborted'), {
    name: 'AbortError',
    code: 'ABORT_ERR',
    cause: new DOMException('The operation was aborted due to timeout', 'TimeoutError'),
  });
}

describe('toGantryError: HTTP statuses', () => {
  it.each([
    [404, NotFoundError],
    [400, ClusterRejectedError],
    [422, ClusterRejectedError],
    [405, ClusterRejectedError],
    [413, ClusterRejectedError],
    [401, ClusterAccessDeniedError],
    [403, ClusterAccessDeniedError],
    [408, ClusterUnavailableError],
    [409, ClusterUnavailableError],
    [410, ClusterUnavailableError],
    [429, ClusterUnavailableError],
    [500, ClusterUnavailableError],
    [502, ClusterUnavailableError],
    [503, ClusterUnavailableError],
    [504, ClusterUnavailableError],
  ])('HTTP %i → %o', (code, expected) => {
    const cause = apiError(code, kubeStatus(code, 'Reason', 'the message'));

    const err = toGantryError(cause, WHAT);

    expect(err).toBeInstanceOf(expected);
    expect(err.cause).toBe(cause);
    expect(err.message).toBe(`${WHAT}: HTTP ${code} Reason: the message`);
  });

  const DENIED =
    'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.runtimeRef: Invalid value: {"name":"torch-distributed"}: must have dataset-initializer job when trainJob is configured with input datasetConfig';

  it.each([
    [403, 'Forbidden'],
    [400, 'BadRequest'],
    [422, 'Invalid'],
  ])(
    'an admission webhook’s denial (HTTP %i %s) is ClusterRejectedError with the webhook’s message, not access denied',
    (code, reason) => {
      const cause = apiError(code, kubeStatus(code, reason, DENIED));

      const err = toGantryError(cause, WHAT);

      expect(err).toBeInstanceOf(ClusterRejectedError);
      expect(err).not.toBeInstanceOf(ClusterAccessDeniedError);
      expect(err.message).toBe(`${DENIED} (${WHAT}: HTTP ${code})`);
    },
  );

  it.each([
    [
      403,
      'Forbidden',
      'trainjobs.trainer.kubeflow.org is forbidden: User "x" cannot create resource',
      ClusterAccessDeniedError,
    ],
    [
      500,
      'InternalError',
      'Internal error occurred: failed calling webhook "validator.trainjob.trainer.kubeflow.org": connection refused',
      ClusterUnavailableError,
    ],
  ])('HTTP %i %s that is no webhook denial keeps its class', (code, reason, message, expected) => {
    expect(toGantryError(apiError(code, kubeStatus(code, reason, message)), WHAT)).toBeInstanceOf(expected);
  });

  it('keeps retryable / terminal as the state machine expects', () => {
    expect(toGantryError(apiError(503), WHAT)).toMatchObject({
      name: 'ClusterUnavailableError',
      retryable: true,
    });
    expect(toGantryError(apiError(422), WHAT)).toMatchObject({
      name: 'ClusterRejectedError',
      retryable: false,
    });
    expect(toGantryError(apiError(403), WHAT)).toMatchObject({
      name: 'ClusterAccessDeniedError',
      retryable: false,
    });
  });

  it('carries the field causes of a 422, with a root-level CEL rule as field ""', () => {
    const err = toGantryError(apiError(422, INVALID), WHAT) as ClusterRejectedError;

    expect(err.causes).toEqual([
      {
        field: 'spec.trainer.numNodes',
        rule: 'Invalid value: "string": spec.trainer.numNodes in body must be of type integer: "string"',
      },
      { field: '', rule: 'Invalid value: metadata.name must match RFC 1035 DNS label format' },
    ]);
  });

  it('reads the Status whether the body is JSON text, an object, plain text or missing (401)', () => {
    const asObject = new ApiException(422, 'x', INVALID, {});

    expect((toGantryError(asObject, WHAT) as ClusterRejectedError).causes).toHaveLength(2);
    expect(toGantryError(apiError(400, 'not json at all'), WHAT).message).toBe(
      `${WHAT}: HTTP 400: not json at all`,
    );
    expect(toGantryError(new ApiException(401, 'Unauthorized', undefined, {}), WHAT).message).toBe(
      `${WHAT}: HTTP 401`,
    );
    expect(causesOf(undefined)).toEqual([]);
  });

  it('exposes the HTTP status of a raw failure (the gateway checks 409 before translating)', () => {
    expect(httpStatusOf(apiError(409))).toBe(409);
    expect(httpStatusOf(errWithCode('x', 'ECONNREFUSED'))).toBeUndefined();
  });
});

describe('toGantryError: network failures, timeouts and aborts', () => {
  it.each([
    ['ECONNREFUSED', errWithCode('connect ECONNREFUSED 10.0.0.1:443', 'ECONNREFUSED'), 'ECONNREFUSED'],
    ['ECONNRESET', errWithCode('socket hang up', 'ECONNRESET'), 'ECONNRESET'],
    ['ETIMEDOUT', errWithCode('connect ETIMEDOUT', 'ETIMEDOUT'), 'ETIMEDOUT'],
    ['ENOTFOUND (DNS)', errWithCode('getaddrinfo ENOTFOUND x.eks.amazonaws.com', 'ENOTFOUND'), 'ENOTFOUND'],
    [
      'fetch failed wrapping a socket error',
      new TypeError('fetch failed', { cause: errWithCode('other side closed', 'UND_ERR_SOCKET') }),
      'UND_ERR_SOCKET',
    ],
    [
      'undici connect timeout',
      errWithCode('Connect Timeout Error', 'UND_ERR_CONNECT_TIMEOUT'),
      'UND_ERR_CONNECT_TIMEOUT',
    ],
    ['abort by the fetch timeout', abortedByTimeout(), 'timed out'],
    ['AbortSignal.timeout reason thrown directly', new DOMException('timeout', 'TimeoutError'), 'timed out'],
    ['abort by the caller', new DOMException('This operation was aborted', 'AbortError'), 'aborted'],
    [
      'TLS: unknown CA',
      errWithCode('self-signed certificate', 'DEPTH_ZERO_SELF_SIGNED_CERT'),
      'DEPTH_ZERO_SELF_SIGNED_CERT',
    ],
  ])('%s → ClusterUnavailableError', (_label, cause, reason) => {
    const err = toGantryError(cause, WHAT);

    expect(err).toBeInstanceOf(ClusterUnavailableError);
    expect(err.message).toContain(`${WHAT}: ${reason}`);
    expect(err.cause).toBe(cause);
  });
});

describe('toGantryError: what it leaves alone', () => {
  it("passes Gantry's own errors through", () => {
    const own = new JobNameConflictError('taken');

    expect(toGantryError(own, WHAT)).toBe(own);
  });

  it('rethrows a programming error as is (a bug is not a cluster outage)', () => {
    const bug = new TypeError("Cannot read properties of undefined (reading 'metadata')");

    expect(toGantryError(bug, WHAT)).toBe(bug);
  });

  it('wraps a thrown non-error value', () => {
    expect(toGantryError('boom', WHAT)).toMatchObject({ message: `${WHAT}: boom` });
  });
});

describe('kubeCall', () => {
  it('returns the value of a call that succeeds', async () => {
    await expect(kubeCall(WHAT, async () => 42)).resolves.toBe(42);
  });

  it('translates the failure of a call at the edge', async () => {
    await expect(
      kubeCall(WHAT, async () => {
        throw apiError(404, kubeStatus(404, 'NotFound', 'trainjobs "run-1" not found'));
      }),
    ).rejects.toMatchObject({
      name: 'NotFoundError',
      message: `${WHAT}: HTTP 404 NotFound: trainjobs "run-1" not found`,
    });
  });
});

describe('the gateway translates at the edge (a local HTTP server playing the apiserver)', () => {
  const TRAINJOBS = {
    group: 'trainer.kubeflow.org',
    version: 'v1alpha1',
    plural: 'trainjobs',
    kind: 'TrainJob',
  };
  let server: Server;
  let base: string;
  let reply: (res: ServerResponse) => void;

  beforeAll(async () => {
    server = createServer((_req, res) => reply(res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  function gateway(fetchTimeoutMs?: number) {
    return makeKubernetesGateway({
      kubeConfig: { getCurrentCluster: () => ({ server: base }), applyToHTTPSOptions: async () => {} },
      ...(fetchTimeoutMs ? { fetchTimeoutMs } : {}),
    });
  }
  const json = (code: number, body: object) => (res: ServerResponse) => {
    res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  };

  it.each([
    [429, 'ClusterUnavailableError'],
    [503, 'ClusterUnavailableError'],
    [403, 'ClusterAccessDeniedError'],
    [404, 'NotFoundError'],
  ])('HTTP %i from the server → %s', async (code, name) => {
    reply = json(code, kubeStatus(code, 'R', 'm'));

    await expect(gateway().annotateJob(TRAINJOBS, 'ns', 'run-1', { a: 'b' })).rejects.toMatchObject({ name });
  });

  it('a 422 carries its causes', async () => {
    reply = json(422, INVALID);

    const err = await gateway()
      .createJob({
        apiVersion: 'trainer.kubeflow.org/v1alpha1',
        kind: 'TrainJob',
        metadata: { name: 'x', namespace: 'ns' },
      })
      .catch((e: unknown) => e);

    expect(err).toBeInstanceOf(ClusterRejectedError);
    expect((err as ClusterRejectedError).causes).toHaveLength(2);
  });

  it('a server that never answers: the per-call timeout ends the call as ClusterUnavailableError', async () => {
    reply = () => {}; // hold the request open

    const err = await gateway(100)
      .getJob(TRAINJOBS, 'ns', 'run-1')
      .catch((e: unknown) => e);

    expect(err).toBeInstanceOf(ClusterUnavailableError);
    expect((err as Error).message).toContain('timed out');
  });

  it("a server that never answers: the caller's AbortSignal ends the call", async () => {
    reply = () => {};
    const started = Date.now();

    const err = await gateway()
      .listManagedJobs(TRAINJOBS, { signal: AbortSignal.timeout(100) })
      .catch((e: unknown) => e);

    expect(err).toBeInstanceOf(ClusterUnavailableError);
    expect(Date.now() - started).toBeLessThan(5_000); // not the 30 s default
  });

  it('nothing listening → ClusterUnavailableError (ECONNREFUSED)', async () => {
    const closed = makeKubernetesGateway({
      kubeConfig: {
        getCurrentCluster: () => ({ server: 'http://127.0.0.1:1' }),
        applyToHTTPSOptions: async () => {},
      },
    });

    await expect(closed.getJob(TRAINJOBS, 'ns', 'x')).rejects.toMatchObject({
      name: 'ClusterUnavailableError',
      message: expect.stringContaining('ECONNREFUSED'),
    });
  });
});
