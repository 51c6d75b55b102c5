import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  goModRequires,
  graphContradictions,
  JOBSET_MODULE,
  KUEUE_MODULE,
  TRAINER_MODULE,
  VERSION_SETS,
  versionSet,
} from '../helpers/realcp-heavy.ts';
import { tierAvailable } from '../helpers/tiers.ts';

/**
 * Every controller binary of every version set is compiled against exactly the dependency versions
 * its own project's go.mod asks for (as its release image is): the wrapper module it is built in
 * selects, for each requirement of that go.mod, the same version. Reads go.mod files from the Go
 * module cache (downloads them from the proxy on a fresh machine); builds nothing.
 */

function goMissing(): string[] {
  try {
    execFileSync('go', ['version'], { stdio: 'ignore' });
    return [];
  } catch {
    return ['go (not on PATH)'];
  }
}

describe.runIf(tierAvailable('e2e-real (version sets)', goMissing()))('version sets', () => {
  const rows = VERSION_SETS.flatMap((name) => {
    const set = versionSet(name);
    return [
      [name, 'JobSet', set.jobset, set.jobsetComponent, JOBSET_MODULE],
      [name, 'Trainer', set.trainer, set.trainerComponent, TRAINER_MODULE],
      [name, 'Kueue', set.kueue, set.kueueComponent, KUEUE_MODULE],
    ] as const;
  });

  it.each(rows)(
    '%s: %s %s (%s) is built on the module graph of its own go.mod',
    (_s, _w, version, c, m) => {
      expect(version).toMatch(/^v\d+\.\d+\.\d+$/);
      expect(graphContradictions(c, m)).toEqual([]);
    },
    120_000,
  );

  it('scheduler-plugins (Coscheduling) is built on its own go.mod, which pins the control plane’s Kubernetes', () => {
    const module = 'sigs.k8s.io/scheduler-plugins';
    expect(graphContradictions('scheduler-plugins', module)).toEqual([]);
    const kube = /^\s*k8s\.io\/kubernetes (v\S+)/m.exec(
      readFileSync(new URL('../../tools/realcp-heavy/kube/go.mod', import.meta.url), 'utf8'),
    )?.[1];
    expect(kube).toBe('v1.35.4');
    expect(goModRequires(module, 'v0.35.4-devel').get('k8s.io/kubernetes')).toBe(kube);
  }, 120_000);

  it('the check sees a shared graph: Trainer v2.2.0 in kueue-v0.17.1 (MVS raised to Kueue v0.17.1’s versions)', () => {
    const raised = graphContradictions('kueue-v0.17.1', TRAINER_MODULE);
    expect(raised.length).toBeGreaterThan(0);
    expect(raised).toContain('k8s.io/api: go.mod wants v0.35.2, graph selects v0.35.3');
  }, 120_000);

  // What each project's go.mod asks for, against what the set installs next to it. The one skew is
  // v2.3: no Kueue release requires Trainer v2.3.0 yet, so v0.19.2 (as released) runs next to it.
  it.each([
    ['v2.1', 'v2.1.0', 'v0.10.1'],
    ['v2.2', 'v2.2.0', 'v0.11.1'],
    ['v2.3', 'v2.2.1', 'v0.12.0'],
  ] as const)(
    '%s: Kueue asks for Trainer %s and JobSet %s; Trainer asks for the set’s JobSet',
    (name, kueueTrainer, kueueJobset) => {
      const set = versionSet(name);
      const kueue = goModRequires(KUEUE_MODULE, set.kueue);
      expect(kueue.get(TRAINER_MODULE)).toBe(kueueTrainer);
      expect(kueue.get(JOBSET_MODULE)).toBe(kueueJobset);
      expect(goModRequires(TRAINER_MODULE, set.trainer).get(JOBSET_MODULE)).toBe(set.jobset);
      expect(set.jobset).toBe(kueueJobset);
    },
    120_000,
  );
});
