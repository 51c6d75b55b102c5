import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Json } from '../../lib/json.ts';
import { parseYaml } from '../../lib/yaml.ts';
import { summarize } from './decode.ts';
import type { DeleteOptions } from './deletion.ts';
import { ApiError, badRequest, invalid, unsupportedMediaType } from './errors.ts';
import type { ResourceDef } from './registry.ts';

/**
 * The wire format of the simulated apiserver: reading request bodies (JSON or YAML objects,
 * patches, DeleteOptions) with the real server's error wording, and writing JSON answers,
 * `Warning` headers and Status errors.
 */

const MAX_BODY = 3 * 1024 * 1024;

export async function readObject(
  req: IncomingMessage,
  def: ResourceDef,
): Promise<{ value: unknown; raw: string }> {
  const ct = (req.headers['content-type'] ?? 'application/json').split(';')[0]!.trim().toLowerCase();
  const raw = await readBody(req);
  const malformed = (detail: string) =>
    badRequest(
      `the object provided is unrecognized (must be of type ${def.kind}): couldn't get version/kind; json parse error: ${detail} (${summarize(raw)})`,
    );
  if (ct === 'application/json' || ct === '') {
    try {
      return { value: JSON.parse(raw), raw };
    } catch {
      throw malformed(goJsonError(raw));
    }
  }
  if (ct === 'application/yaml' || ct === 'application/x-yaml' || ct === 'text/yaml') {
    try {
      return { value: parseYaml(raw), raw };
    } catch (e) {
      throw malformed(`error converting YAML to JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  throw unsupportedMediaType(['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf']);
}

const PROPAGATION_POLICIES = ['Background', 'Foreground', 'Orphan'] as const;
function isPropagationPolicy(p: string): p is (typeof PROPAGATION_POLICIES)[number] {
  return (PROPAGATION_POLICIES as readonly string[]).includes(p);
}

export async function readDeleteOptions(req: IncomingMessage, q: URLSearchParams): Promise<DeleteOptions> {
  const raw = await readBody(req);
  const out: DeleteOptions = {};
  let body: Json = {};
  if (raw.trim()) {
    try {
      const v = JSON.parse(raw) as unknown;
      if (v && typeof v === 'object' && !Array.isArray(v)) body = v as Json;
    } catch {
      throw badRequest('the body of the request could not be decoded as DeleteOptions');
    }
  }
  const policy = (body.propagationPolicy as string | undefined) ?? q.get('propagationPolicy') ?? undefined;
  if (policy !== undefined) {
    if (!isPropagationPolicy(policy)) {
      throw invalid('meta.k8s.io', 'DeleteOptions', '', [
        {
          type: 'FieldValueNotSupported',
          field: 'propagationPolicy',
          value: policy,
          detail: 'supported values: "Foreground", "Background", "Orphan", "nil"',
        },
      ]);
    }
    out.propagationPolicy = policy;
  } else if (body.orphanDependents === true || q.get('orphanDependents') === 'true') {
    out.propagationPolicy = 'Orphan';
  }
  const pre = body.preconditions as Json | undefined;
  if (pre && typeof pre === 'object') {
    out.preconditions = {};
    if (typeof pre.uid === 'string') out.preconditions.uid = pre.uid;
    if (typeof pre.resourceVersion === 'string') out.preconditions.resourceVersion = pre.resourceVersion;
  }
  const dry = Array.isArray(body.dryRun) ? (body.dryRun as string[]) : q.getAll('dryRun');
  if (dry.includes('All')) out.dryRun = true;
  return out;
}

/** A PATCH body, decoded per its Content-Type (YAML for apply, JSON otherwise; others left undefined). */
export async function readPatch(req: IncomingMessage): Promise<{ ct: string; text: string; body: unknown }> {
  const ct = req.headers['content-type'] ?? '';
  const text = await readBody(req);
  let body: unknown;
  const type = ct.split(';')[0]!.trim().toLowerCase();
  if (type === 'application/apply-patch+yaml') {
    try {
      body = parseYaml(text);
    } catch (e) {
      throw badRequest(`error decoding YAML: ${e instanceof Error ? e.message : String(e)}`);
    }
  } else if (
    [
      'application/json-patch+json',
      'application/merge-patch+json',
      'application/strategic-merge-patch+json',
    ].includes(type)
  ) {
    try {
      body = JSON.parse(text);
    } catch {
      throw badRequest(`error decoding patch: ${goJsonError(text)}`);
    }
  }
  return { ct, text, body };
}

/** Go's encoding/json wording for the common malformed bodies (the real server quotes it). */
function goJsonError(raw: string): string {
  const t = raw.trim();
  if (t === '') return 'unexpected end of JSON input';
  try {
    JSON.parse(t);
    return 'invalid JSON';
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    if (/Unexpected end of JSON input|Unterminated string/i.test(msg)) return 'unexpected end of JSON input';
    const tok = /Unexpected token '(.)'/.exec(msg);
    if (tok) return `invalid character '${tok[1]}' looking for beginning of value`;
    const pos = /at position (\d+)/.exec(msg);
    const ch = pos ? t[Number(pos[1])] : undefined;
    if (ch === undefined) return 'unexpected end of JSON input';
    if (/Expected property name/i.test(msg))
      return `invalid character '${ch}' looking for beginning of object key string`;
    if (/after JSON/i.test(msg)) return `invalid character '${ch}' after top-level value`;
    if (/after property value|after array element/i.test(msg))
      return `invalid character '${ch}' after object key:value pair`;
    return `invalid character '${ch}' looking for beginning of value`;
  }
}

export const isTrue = (v: string | null): boolean => v === 'true' || v === '1';

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(
          new ApiError(413, {
            kind: 'Status',
            apiVersion: 'v1',
            metadata: {},
            status: 'Failure',
            message: `Request entity too large: limit is ${MAX_BODY}`,
            reason: 'RequestEntityTooLarge',
            code: 413,
          }),
        );
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function send(res: ServerResponse, code: number, body: unknown, warnings: string[] = []): void {
  const text = JSON.stringify(body);
  const headers: Record<string, string | string[]> = {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(text)),
  };
  if (warnings.length > 0) headers.Warning = warnings.map((w) => `299 - ${JSON.stringify(w)}`);
  res.writeHead(code, headers);
  res.end(text);
}

export function sendError(res: ServerResponse, e: ApiError): void {
  if (typeof e.body === 'string') {
    res.writeHead(e.code, {
      'Content-Type': 'text/plain; charset=utf-8',
      'X-Content-Type-Options': 'nosniff',
      ...e.headers,
    });
    res.end(e.body);
    return;
  }
  const text = JSON.stringify(e.body);
  res.writeHead(e.code, {
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(text)),
    ...e.headers,
  });
  res.end(text);
}
