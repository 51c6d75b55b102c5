import { ApiException } from '@kubernetes/client-node/dist/gen/apis/exception.js';
import { describe, expect, it } from 'vitest';
import {
  type KubeHttpRequest,
  type KubeHttpResponse,
  makeCustomObjectsApi,
} from '../../../lib/adapters/kubernetes/custom-objects.ts';

const SERVER = 'https://k8s.example:6443/';
const JOB = { group: 'trainer.kubeflow.org', version: 'v1alpha1', plural: 'trainjobs' };
const JSON_HEADERS = { 'content-type': 'application/json' };

/** A transport that records each request and answers with `reply`. */
function recording(reply: Partial<KubeHttpResponse> & { text?: string } = {}) {
  const sent: KubeHttpRequest[] = [];
  const api = makeCustomObjectsApi(SERVER, async (request) => {
    sent.push(request);
    return {
      status: reply.status ?? 200,
      headers: reply.headers ?? JSON_HEADERS,
      body: Buffer.from(reply.text ?? '{}', 'utf8'),
    };
  });
  return { api, sent };
}

describe('custom-objects client: the requests of client-node 2.x CustomObjectsApi', () => {
  const signal = new AbortController().signal;
  it.each([
    {
      call: 'getAPIResources',
      run: (a: ReturnType<typeof recording>['api']) => a.getAPIResources(JOB),
      method: 'GET',
      url: 'https://k8s.example:6443/apis/trainer.kubeflow.org/v1alpha1',
    },
    {
      call: 'getNamespacedCustomObject',
      run: (a: ReturnType<typeof recording>['api']) =>
        a.getNamespacedCustomObject({ ...JOB, namespace: 'team-a', name: 'run-1' }),
      method: 'GET',
      url: 'https://k8s.example:6443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/run-1',
    },
    {
      call: 'getClusterCustomObject',
      run: (a: ReturnType<typeof recording>['api']) =>
        a.getClusterCustomObject({
          group: 'apiextensions.k8s.io',
          version: 'v1',
          plural: 'customresourcedefinitions',
          name: 'trainjobs.trainer.kubeflow.org',
        }),
      method: 'GET',
      url: 'https://k8s.example:6443/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trainjobs.trainer.kubeflow.org',
    },
    {
      call: 'createNamespacedCustomObject',
      run: (a: ReturnType<typeof recording>['api']) =>
        a.createNamespacedCustomObject({
          ...JOB,
          namespace: 'team-a',
          body: { kind: 'TrainJob' },
          fieldManager: 'gantry',
          fieldValidation: 'Strict',
        }),
      method: 'POST',
      url: 'https://k8s.example:6443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs?fieldManager=gantry&fieldValidation=Strict',
      contentType: 'application/json',
      body: '{"kind":"TrainJob"}',
    },
    {
      call: 'patchNamespacedCustomObject',
      run: (a: ReturnType<typeof recording>['api']) =>
        a.patchNamespacedCustomObject(
          { ...JOB, namespace: 'team-a', name: 'run-1', body: { metadata: {} }, fieldManager: 'gantry' },
          { contentType: 'application/merge-patch+json' },
        ),
      method: 'PATCH',
      url: 'https://k8s.example:6443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/run-1?fieldManager=gantry',
      contentType: 'application/merge-patch+json',
      body: '{"metadata":{}}',
    },
    {
      call: 'deleteNamespacedCustomObject',
      run: (a: ReturnType<typeof recording>['api']) =>
        a.deleteNamespacedCustomObject({
          ...JOB,
          namespace: 'team-a',
          name: 'run-1',
          propagationPolicy: 'Background',
        }),
      method: 'DELETE',
      url: 'https://k8s.example:6443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/run-1?propagationPolicy=Background',
      contentType: 'application/json',
    },
    {
      call: 'listCustomObjectForAllNamespaces',
      run: (a: ReturnType<typeof recording>['api']) =>
        a.listCustomObjectForAllNamespaces({
          group: JOB.group,
          version: JOB.version,
          resourcePlural: JOB.plural,
          labelSelector: 'app.kubernetes.io/managed-by=gantry',
          limit: 500,
          _continue: 'abc',
        }),
      method: 'GET',
      url: 'https://k8s.example:6443/apis/trainer.kubeflow.org/v1alpha1/trainjobs?continue=abc&labelSelector=app.kubernetes.io%2Fmanaged-by%3Dgantry&limit=500',
    },
    {
      call: 'listNamespacedCustomObject',
      run: (a: ReturnType<typeof recording>['api']) =>
        a.listNamespacedCustomObject({ ...JOB, namespace: 'team-a', limit: 500 }),
      method: 'GET',
      url: 'https://k8s.example:6443/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs?limit=500',
    },
    {
      call: 'listClusterCustomObject',
      run: (a: ReturnType<typeof recording>['api']) =>
        a.listClusterCustomObject({ ...JOB, plural: 'clustertrainingruntimes', limit: 500 }),
      method: 'GET',
      url: 'https://k8s.example:6443/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes?limit=500',
    },
  ])('$call: $method $url', async ({ run, method, url, contentType, body }) => {
    // Prepare
    const { api, sent } = recording();
    // Act
    await run(api);
    // Assess
    expect(sent).toHaveLength(1);
    const [request] = sent as [KubeHttpRequest];
    expect(request.method).toBe(method);
    expect(request.url.toString()).toBe(url);
    expect(request.headers).toEqual({
      Accept: 'application/json, */*;q=0.8',
      ...(contentType ? { 'Content-Type': contentType } : {}),
    });
    expect(request.body).toBe(body);
    expect(request.signal).toBeUndefined();
  });

  it("passes the caller's signal to the transport", async () => {
    const { api, sent } = recording();
    await api.getNamespacedCustomObject({ ...JOB, namespace: 'a', name: 'b' }, { signal });
    expect(sent[0]?.signal).toBe(signal);
  });

  it('encodes path segments', async () => {
    const { api, sent } = recording();
    await api.getNamespacedCustomObject({ ...JOB, namespace: 'a/b', name: 'c d' });
    expect(sent[0]?.url.pathname).toBe(
      '/apis/trainer.kubeflow.org/v1alpha1/namespaces/a%2Fb/trainjobs/c%20d',
    );
  });
});

describe('custom-objects client: outcomes as client-node 2.x reports them', () => {
  it.each([
    { status: 200, contentType: 'application/json; charset=utf-8', text: '{"a":1}', expected: { a: 1 } },
    { status: 201, contentType: 'application/json', text: '{"b":2}', expected: { b: 2 } },
    { status: 202, contentType: 'application/merge-patch+json', text: '[1]', expected: [1] },
    { status: 200, contentType: 'text/plain', text: 'ok', expected: 'ok' },
  ])('$status $contentType → the parsed body', async ({ status, contentType, text, expected }) => {
    const { api } = recording({ status, headers: { 'content-type': contentType }, text });
    await expect(api.getNamespacedCustomObject({ ...JOB, namespace: 'a', name: 'b' })).resolves.toEqual(
      expected,
    );
  });

  it('refuses a 2xx body without a Content-Type', async () => {
    const { api } = recording({ headers: {} });
    await expect(api.getNamespacedCustomObject({ ...JOB, namespace: 'a', name: 'b' })).rejects.toThrow(
      'Cannot parse content. No Content-Type defined.',
    );
  });

  it('throws ApiException 401 without a body', async () => {
    const { api } = recording({ status: 401, text: '{"kind":"Status"}' });
    const err = await api.getNamespacedCustomObject({ ...JOB, namespace: 'a', name: 'b' }).catch((e) => e);
    expect(err).toBeInstanceOf(ApiException);
    expect(err).toMatchObject({ code: 401, body: undefined, headers: JSON_HEADERS });
  });

  it.each([404, 409, 422, 429, 500, 503])(
    'throws ApiException %i with the raw response text',
    async (status) => {
      const text = JSON.stringify({ kind: 'Status', code: status, reason: 'X' });
      const { api } = recording({ status, text });
      const err = await api
        .deleteNamespacedCustomObject({ ...JOB, namespace: 'a', name: 'b' })
        .catch((e) => e);
      expect(err).toBeInstanceOf(ApiException);
      expect(err).toMatchObject({ code: status, body: text, headers: JSON_HEADERS });
      expect((err as Error).message).toContain('Unknown API Status Code!');
    },
  );
});
