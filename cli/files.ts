import { readFile } from 'node:fs/promises';
import { parseYaml } from '../lib/yaml.ts';
import { UsageError } from './args.ts';

/**
 * Request files: a run request or a sweep request, in YAML or JSON. Which one is decided by
 * content: a sweep request is an object with a `template` (the run its trials start from) and
 * its search fields; a run request (lib/run/schema.ts, a strict object) has none of them.
 */

export type RequestKind = 'run' | 'sweep';

/** Fields only a sweep request has (lib/sweep/schema.ts). */
export const SWEEP_FIELDS = [
  'template',
  'parameters',
  'objective',
  'objectives',
  'algorithm',
  'maxTrials',
] as const;

export interface LoadedRequest {
  kind: RequestKind;
  body: Record<string, unknown>;
}

export function kindOf(body: Record<string, unknown>): RequestKind {
  return SWEEP_FIELDS.some((f) => Object.hasOwn(body, f)) ? 'sweep' : 'run';
}

/** Parse a request file's text: JSON for `.json` names, YAML (a superset of JSON) otherwise. */
export function parseRequest(text: string, name: string): LoadedRequest {
  let body: unknown;
  if (/\.json$/i.test(name)) {
    try {
      body = JSON.parse(text);
    } catch (err) {
      throw new UsageError(`${name}: not valid JSON: ${(err as Error).message}`);
    }
  } else {
    try {
      body = parseYaml(text, { maxAliases: 100 });
    } catch (err) {
      throw new UsageError(`${name}: not valid YAML: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new UsageError(`${name}: must hold one object (a run request or a sweep request)`);
  }
  return { kind: kindOf(body as Record<string, unknown>), body: body as Record<string, unknown> };
}

/** Read and parse a request file; `-` reads stdin. */
export async function loadRequest(
  path: string,
  stdin: () => Promise<string> = readStdin,
): Promise<LoadedRequest> {
  let text: string;
  try {
    text = path === '-' ? await stdin() : await readFile(path, 'utf8');
  } catch (err) {
    throw new UsageError(
      `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  return parseRequest(text, path === '-' ? 'stdin' : path);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
