/**
 * For the embedded default, its tests and benches: a ClusterTrainingRuntime like Trainer's `torch-distributed` whose batch Job has
 * `backoffLimit: 0`: the first failed pod (a disruption's pods count as failed at once) fails the
 * Job, so JobSet fails the TrainJob and Gantry starts a new attempt. Trainer's own runtimes set no
 * `backoffLimit` (the Job API's default 6 applies: the Job controller replaces a disrupted pod and
 * the run goes on in the same job).
 */
export const NO_RETRY_RUNTIME = 'torch-distributed-no-retry';

export function noRetryRuntime(name = NO_RETRY_RUNTIME): Record<string, unknown> {
  return {
    apiVersion: 'trainer.kubeflow.org/v1alpha1',
    kind: 'ClusterTrainingRuntime',
    metadata: { name, labels: { 'trainer.kubeflow.org/framework': 'torch' } },
    spec: {
      mlPolicy: { numNodes: 1, torch: {} },
      template: {
        spec: {
          replicatedJobs: [
            {
              name: 'node',
              template: {
                metadata: { labels: { 'trainer.kubeflow.org/trainjob-ancestor-step': 'trainer' } },
                spec: {
                  backoffLimit: 0,
                  template: { spec: { containers: [{ name: 'node', image: 'pytorch/pytorch' }] } },
                },
              },
            },
          ],
        },
      },
    },
  };
}

/** Create it on a cluster (the simulator or a real API server) at `url`, by its REST API. */
export async function createRuntime(
  url: string,
  runtime: Record<string, unknown>,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${url}/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(runtime),
  });
  if (!res.ok && res.status !== 409)
    throw new Error(`creating the runtime: HTTP ${res.status} ${await res.text()}`);
}
