import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseYamlAll } from '../../lib/yaml.ts';
import {
  inferenceServiceStub,
  kueueStubs,
  legacyStubs,
  podGroupStub,
  type TrainerVersion,
  torchRuntimeStub,
  trainerStubs,
} from './stubs.ts';

/**
 * The CRDs (and built-in ClusterTrainingRuntimes) the simulator serves. They are read at start
 * from the shared CRD folder (`<crdRoot>/trainer-v2.x.y/`, `kueue-v0.x.y/`,
 * `training-operator-v1.9.x/`, `scheduler-plugins-*`), never copied into the repository, so
 * discovery and `customresourcedefinitions/<name>` return the real objects. Without the folder
 * the built-in stubs (stubs.ts) stand in.
 */

type Json = Record<string, unknown>;

export type Gang = 'kueue' | 'coscheduling' | 'none';

/** Which optional APIs to serve (a real cluster may have several gang schedulers installed). */
export interface Installed {
  kueue: boolean;
  coscheduling: boolean;
  /** Volcano's PodGroup CRDs (served only; nothing simulates Volcano). Needs the shared CRD folder. */
  volcano: boolean;
  /** JobSet's CRD (served only). Needs the shared CRD folder. */
  jobset: boolean;
  legacy: boolean;
  /** KServe's InferenceService (`kserve-v*` from the CRD folder, else the minimal CRD's stub). */
  kserve: boolean;
}

export interface CrdSelection {
  trainerVersion: TrainerVersion | 'none';
  install: Installed;
  crdRoot?: string | undefined;
}

export interface LoadedCrds {
  crds: Json[];
  runtimes: Json[];
  /** Where each part came from: folder names, or `stub`. */
  sources: Record<string, string>;
}

function versionKey(dir: string): number[] {
  const m = /-v(\d+)\.(\d+)\.(\d+)/.exec(dir);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : [0, 0, 0];
}

/** The newest `<prefix><x.y.z>` folder under root whose version starts with `want` (e.g. `0.19`). */
function pickDir(root: string, prefix: string, want?: string): string | undefined {
  if (!existsSync(root)) return undefined;
  const dirs = readdirSync(root).filter(
    (d) =>
      d.startsWith(prefix) &&
      (want === undefined || d.startsWith(`${prefix}${want}.`) || d === `${prefix}${want}`),
  );
  dirs.sort((a, b) => {
    const ka = versionKey(a);
    const kb = versionKey(b);
    for (let i = 0; i < 3; i++) if (ka[i] !== kb[i]) return ka[i]! - kb[i]!;
    return a.localeCompare(b);
  });
  const last = dirs.at(-1);
  return last ? join(root, last) : undefined;
}

/**
 * Parsed YAML per file (keyed by path and modification time), kept as JSON text: several
 * simulators in one process read each file once, and the text costs a fraction of the objects.
 */
const parsed = new Map<string, { mtimeMs: number; json: string }>();

/**
 * Every document of a YAML stream, read with `js-yaml` (its default core schema: no timestamps or
 * merge keys, as the `yaml` package reads YAML 1.2). On the shared CRD folder it gives the `yaml`
 * package's output at ~1/5 of its time and less than half its peak memory
 * (bench/results/yaml-parsers.md).
 */
export function parseYamlStream(src: string): unknown[] {
  return parseYamlAll(src);
}

/** The documents of a YAML file (fresh objects for each caller). */
function yamlDocs(file: string): Json[] {
  const mtimeMs = statSync(file).mtimeMs;
  let hit = parsed.get(file);
  if (!hit || hit.mtimeMs !== mtimeMs) {
    const docs = parseYamlStream(readFileSync(file, 'utf8'));
    hit = {
      mtimeMs,
      json: JSON.stringify(docs.filter((d) => d !== null && typeof d === 'object' && !Array.isArray(d))),
    };
    parsed.set(file, hit);
  }
  return JSON.parse(hit.json) as Json[];
}

function walkYaml(dir: string, recursive: boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (recursive) out.push(...walkYaml(p, true));
    } else if (/\.ya?ml$/.test(name) && name !== 'kustomization.yaml') out.push(p);
  }
  return out;
}

async function crdsIn(dir: string): Promise<Json[]> {
  const out: Json[] = [];
  for (const f of walkYaml(dir, false))
    for (const d of yamlDocs(f)) if (d.kind === 'CustomResourceDefinition') out.push(d);
  return out;
}

/** Trainer release folder per simulated version, and the Kueue line that targets it. */
const KUEUE_FOR: Record<TrainerVersion, string> = { '2.1': '0.16', '2.2': '0.19', '2.3': '0.19' };
/** The JobSet release each Trainer release pins in its go.mod. */
const JOBSET_FOR: Record<TrainerVersion, string> = { '2.1': '0.10', '2.2': '0.11', '2.3': '0.12' };

export async function loadCrds(sel: CrdSelection): Promise<LoadedCrds> {
  const root = sel.crdRoot;
  const crds: Json[] = [];
  const runtimes: Json[] = [];
  const sources: Record<string, string> = {};

  if (sel.trainerVersion !== 'none') {
    const dir = root ? pickDir(root, 'trainer-v', sel.trainerVersion) : undefined;
    const found = dir ? await crdsIn(dir) : [];
    if (dir && found.length > 0) {
      crds.push(...found);
      const rtDir = join(dir, 'runtimes');
      if (existsSync(rtDir)) {
        for (const f of walkYaml(rtDir, true)) {
          for (const d of yamlDocs(f)) if (d.kind === 'ClusterTrainingRuntime') runtimes.push(d);
        }
      }
      sources.trainer = dir;
    } else {
      crds.push(...trainerStubs(sel.trainerVersion));
      sources.trainer = 'stub';
    }
    if (runtimes.length === 0) runtimes.push(torchRuntimeStub(sel.trainerVersion));
  }

  if (sel.install.kueue) {
    const want = sel.trainerVersion === 'none' ? undefined : KUEUE_FOR[sel.trainerVersion];
    const dir = root ? (pickDir(root, 'kueue-v', want) ?? pickDir(root, 'kueue-v')) : undefined;
    const found = dir ? await crdsIn(dir) : [];
    if (dir && found.length > 0) {
      crds.push(...found);
      sources.kueue = dir;
    } else {
      crds.push(...kueueStubs());
      sources.kueue = 'stub';
    }
  }

  if (sel.install.coscheduling) {
    const dir = root ? pickDir(root, 'scheduler-plugins-v') : undefined;
    const found = dir ? await crdsIn(dir) : [];
    if (dir && found.length > 0) {
      crds.push(...found);
      sources.coscheduling = dir;
    } else {
      crds.push(podGroupStub());
      sources.coscheduling = 'stub';
    }
  }

  for (const [part, prefix, want] of [
    ['volcano', 'volcano-v', undefined],
    ['jobset', 'jobset-v', sel.trainerVersion === 'none' ? undefined : JOBSET_FOR[sel.trainerVersion]],
  ] as const) {
    if (!sel.install[part]) continue;
    const dir = root ? (pickDir(root, prefix, want) ?? pickDir(root, prefix)) : undefined;
    const found = dir ? await crdsIn(dir) : [];
    if (dir && found.length > 0) {
      crds.push(...found);
      sources[part] = dir;
    } else sources[part] = 'absent (no CRD folder)';
  }

  if (sel.install.legacy) {
    const dir = root ? pickDir(root, 'training-operator-v', '1.9') : undefined;
    const found = dir ? await crdsIn(dir) : [];
    if (dir && found.length > 0) {
      crds.push(...found);
      sources.legacy = dir;
    } else {
      crds.push(...legacyStubs());
      sources.legacy = 'stub';
    }
  }
  if (sel.install.kserve) {
    const dir = root ? pickDir(root, 'kserve-v') : undefined;
    const found = dir ? (await crdsIn(dir)).filter((c) => obj(c.spec).group === 'serving.kserve.io') : [];
    if (dir && found.length > 0) {
      crds.push(...found);
      sources.kserve = dir;
    } else {
      crds.push(inferenceServiceStub());
      sources.kserve = 'stub';
    }
  }
  return { crds, runtimes, sources };
}

const obj = (v: unknown): Json => (v !== null && typeof v === 'object' ? (v as Json) : {});
