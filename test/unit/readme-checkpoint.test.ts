import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointUri } from '../../lib/run/checkpoint.ts';
import { ROOT, tierAvailable } from '../helpers/tiers.ts';

/**
 * docs/training-code.md "Checkpoints and resuming": its Python snippet, run as printed (imported as a module, with
 * a directory standing in for the S3 prefix of GANTRY_CHECKPOINT_URI). One process trains, saves,
 * and is killed while saving; the next one — the next attempt, same URI — resumes from the last
 * complete checkpoint and ends where an uninterrupted run ends.
 */

const page = readFileSync(resolve(ROOT, 'docs/training-code.md'), 'utf8');
const section = page.slice(page.indexOf('## Checkpoints and resuming'));
const snippet = /```python\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
const python = spawnSync('python3', ['--version']).status === 0;

/** The test's store: put/get of bytes in a directory named after the URI's bucket and prefix. */
const HARNESS = `
import os, pathlib, sys
from urllib.parse import urlparse
import ckpt

class DirStore:
    def __init__(self, uri, root):
        u = urlparse(uri)
        self.dir = pathlib.Path(root) / u.netloc / u.path.lstrip("/")
        self.dir.mkdir(parents=True, exist_ok=True)

    def put(self, key, body):
        # The node is lost while saving: after the checkpoint, before its pointer.
        if key == "latest" and body.decode() == os.environ.get("LOSE_BEFORE_POINTER_TO"):
            os._exit(137)
        (self.dir / key).write_bytes(body)

    def get(self, key):
        p = self.dir / key
        return p.read_bytes() if p.exists() else None

state = ckpt.train(DirStore(ckpt.CHECKPOINTS, sys.argv[1]), total_steps=20, save_every=5)
print(f"weights {state['weights']}")
`;

describe('docs/training-code.md: saving and resuming checkpoints (Python snippet)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gantry-ckpt-'));
  writeFileSync(join(dir, 'ckpt.py'), snippet);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const run = (root: string, extra: Record<string, string> = {}) =>
    spawnSync('python3', ['-c', HARNESS, root], {
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH ?? '',
        PYTHONPATH: dir,
        GANTRY_CHECKPOINT_URI: checkpointUri('gantry-bucket', 'run-aaaaaaaaaaaaaaaaaaaa'),
        ...extra,
      },
    });

  it('prints a snippet that saves, resumes and reads GANTRY_CHECKPOINT_URI', () => {
    expect(snippet).toContain('GANTRY_CHECKPOINT_URI');
    expect(snippet).toContain('def resume(');
  });

  it('a process lost while saving step 10 is resumed by the next attempt at step 5, with the same result', (ctx) => {
    if (!tierAvailable('unit (README checkpoint snippet)', python ? [] : ['python3'])) {
      ctx.skip();
      return;
    }
    // Prepare: the result of a run that was never interrupted.
    const clean = run(join(dir, 'clean'));
    expect(clean.stderr).toBe('');
    expect(clean.stdout).toBe('resuming at step 0\nweights 10.0\n');

    // Act: attempt 1 dies while saving step 10; attempt 2 starts the same code on the same URI.
    const root = join(dir, 'attempts');
    const first = run(root, { LOSE_BEFORE_POINTER_TO: 'step-000000000010.json' });
    const second = run(root);

    // Assess
    expect(first.status).toBe(137);
    expect(first.stdout).toBe('resuming at step 0\n');
    expect(second.status).toBe(0);
    expect(second.stdout).toBe('resuming at step 5\nweights 10.0\n');
  });
});
