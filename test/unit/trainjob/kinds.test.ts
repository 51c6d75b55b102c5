import { describe, expect, it } from 'vitest';
import { jobApiOf } from '../../../lib/adapters/kubernetes/gateway.ts';
import { jobApi } from '../../../lib/trainjob/build.ts';
import { JOB_KIND_REGISTRY, type JobKind, jobKindInfo } from '../../../lib/trainjob/kinds.ts';
import { loadCrd } from '../../helpers/crd-schema.ts';
import { crdDir, tierAvailable } from '../../helpers/tiers.ts';

const CRD_OF: Record<JobKind, string> = {
  TrainJob: 'trainer-v2.3.0/trainer.kubeflow.org_trainjobs.yaml',
  PyTorchJob: 'training-operator-v1.9.4/kubeflow.org_pytorchjobs.yaml',
  TFJob: 'training-operator-v1.9.4/kubeflow.org_tfjobs.yaml',
  MPIJob: 'training-operator-v1.9.4/kubeflow.org_mpijobs.yaml',
  XGBoostJob: 'training-operator-v1.9.4/kubeflow.org_xgboostjobs.yaml',
  JAXJob: 'training-operator-v1.9.4/kubeflow.org_jaxjobs.yaml',
};
const kinds = Object.keys(JOB_KIND_REGISTRY) as JobKind[];
const crdsPresent = tierAvailable(
  'unit: the job-kind registry against the real CRDs',
  ['trainer-v2.3.0', 'training-operator-v1.9.4']
    .filter((d) => !crdDir(d))
    .map((d) => `CRDs ../shared/k8s/crds/${d}`),
);

describe('the job-kind registry', () => {
  it.each(kinds)('%s: the builders and the gateway use its API', (kind) => {
    const info = JOB_KIND_REGISTRY[kind];
    const api = kind === 'TrainJob' ? jobApi('trainer-v2.3') : jobApi('training-operator-v1', kind);
    expect(api).toEqual({ group: info.group, version: info.version, plural: info.plural, kind });
    expect(jobApiOf({ apiVersion: `${info.group}/${info.version}`, kind })).toEqual(api);
    expect(jobKindInfo(kind)).toBe(info);
  });

  it('knows no other kind', () => {
    expect(jobKindInfo('PaddleJob')).toBeUndefined();
    expect(jobKindInfo('toString')).toBeUndefined();
  });

  it.runIf(crdsPresent).each(kinds)(
    '%s: group, served version, kind and plural match the real CRD',
    (kind) => {
      const info = JOB_KIND_REGISTRY[kind];
      const crd = loadCrd(CRD_OF[kind]);
      expect(crd.spec.group).toBe(info.group);
      expect(crd.spec.names).toMatchObject({ kind, plural: info.plural });
      expect(crd.spec.versions.find((v) => v.name === info.version)?.served).toBe(true);
    },
  );
});
