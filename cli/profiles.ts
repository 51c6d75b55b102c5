import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ValidationError } from '../lib/errors.ts';
import { parseWith } from '../lib/run/validate.ts';
import { parseYaml } from '../lib/yaml.ts';
import * as z from '../lib/zod.ts';
import { UsageError } from './args.ts';

/**
 * Where the CLI sends its calls and who it says it is. A profile names an endpoint and an auth:
 * `local` (the embedded default: the identity is a header, no authentication), `iam` (SigV4
 * signed with the standard AWS credential chain) or `jwt` (a bearer token). Profiles live in
 * `$GANTRY_PROFILES`, else `$XDG_CONFIG_HOME/gantry/profiles.yaml`, else
 * `~/.config/gantry/profiles.yaml`; the built-in `local` profile needs no file.
 */

/** The embedded default's identity header (local/http-api.ts) and its demo team's principal (local/stack.ts). */
export const LOCAL_PRINCIPAL_HEADER = 'x-gantry-principal';
export const LOCAL_DEFAULT_PRINCIPAL = 'arn:aws:iam::000000000000:user/demo';
export const LOCAL_DEFAULT_PORT = 8080;

export type Auth =
  | { type: 'local'; principal: string }
  | { type: 'iam'; region: string; awsProfile?: string }
  | { type: 'jwt'; token: string };

export interface Target {
  profile: string;
  endpoint: string;
  auth: Auth;
}

const Url = z
  .string()
  .check(
    z.regex(/^https?:\/\/[^\s/]+(\/[^\s]*)?$/, 'must be an http(s) URL such as https://api.example.com'),
  );

const ProfileSchema = z.strictObject({
  endpoint: Url,
  auth: z.enum(['local', 'iam', 'jwt'], { error: 'auth must be local, iam or jwt' }),
  principal: z.optional(z.string().check(z.minLength(1))),
  region: z.optional(
    z.string().check(z.regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'must be an AWS region such as eu-west-1')),
  ),
  awsProfile: z.optional(z.string().check(z.minLength(1))),
  token: z.optional(z.string().check(z.minLength(1))),
  tokenEnv: z.optional(
    z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')),
  ),
});
export type Profile = z.infer<typeof ProfileSchema>;

export const ProfilesFileSchema = z.strictObject({
  default: z.optional(z.string().check(z.minLength(1))),
  profiles: z._default(
    z.record(z.string().check(z.regex(/^[A-Za-z0-9_.-]+$/, 'must be a profile name')), ProfileSchema),
    {},
  ),
});
export type ProfilesFile = z.infer<typeof ProfilesFileSchema>;

export function profilesPath(env: Record<string, string | undefined>): string {
  if (env.GANTRY_PROFILES) return env.GANTRY_PROFILES;
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'gantry', 'profiles.yaml');
}

/** Parse a profiles file (YAML); every broken rule is named by its field. */
export function parseProfiles(text: string, name: string): ProfilesFile {
  let raw: unknown;
  try {
    raw = parseYaml(text, { maxAliases: 100 }) ?? {};
  } catch (err) {
    throw new UsageError(`${name}: not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  try {
    return parseWith(ProfilesFileSchema, raw);
  } catch (err) {
    if (err instanceof ValidationError) {
      throw new UsageError(
        `${name}: ${err.issues.map((i) => `${i.field || '(file)'}: ${i.rule}`).join('; ')}`,
      );
    }
    throw err;
  }
}

/** The profiles file, or undefined when there is none. */
export async function loadProfiles(
  env: Record<string, string | undefined>,
): Promise<ProfilesFile | undefined> {
  const path = profilesPath(env);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' && !env.GANTRY_PROFILES) return undefined;
    throw new UsageError(`cannot read profiles file ${path}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  return parseProfiles(text, path);
}

/** The region of an API Gateway endpoint (`<id>.execute-api.<region>.amazonaws.com`). */
export function regionOfEndpoint(endpoint: string): string | undefined {
  return /\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?(:\d+)?(\/|$)/.exec(endpoint)?.[1];
}

/**
 * The target of this call: `--profile`, else `GANTRY_PROFILE`, else the file's `default`, else
 * the built-in `local`; `--endpoint` (or `GANTRY_ENDPOINT`) replaces the profile's endpoint. On a
 * local target the identity is `--principal`, else `GANTRY_PRINCIPAL`, else the profile's
 * `principal`, else the demo team's user.
 */
export function resolveTarget(input: {
  profile?: string;
  endpoint?: string;
  /** `--principal`: the identity on the local host; wins over GANTRY_PRINCIPAL and the profile's. */
  principal?: string;
  env: Record<string, string | undefined>;
  file?: ProfilesFile;
}): Target {
  const { env, file } = input;
  const name = input.profile ?? env.GANTRY_PROFILE ?? file?.default ?? 'local';
  let profile: Profile | undefined = file?.profiles[name];
  if (!profile) {
    if (name !== 'local') {
      const known = Object.keys(file?.profiles ?? {});
      throw new UsageError(
        `no profile ${JSON.stringify(name)}${file ? '' : ` (no profiles file at ${profilesPath(env)})`}; known: ${['local', ...known].join(', ')}`,
      );
    }
    profile = { endpoint: `http://127.0.0.1:${env.GANTRY_PORT || LOCAL_DEFAULT_PORT}`, auth: 'local' };
  }
  const endpoint = (input.endpoint ?? env.GANTRY_ENDPOINT ?? profile.endpoint).replace(/\/+$/, '');
  if (!/^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(endpoint)) {
    throw new UsageError(`endpoint must be an http(s) URL (got ${JSON.stringify(endpoint)})`);
  }
  if (input.principal !== undefined && profile.auth !== 'local') {
    throw new UsageError(
      `--principal is for the local host (auth: local); profile ${name} authenticates with ${profile.auth}`,
    );
  }
  switch (profile.auth) {
    case 'local':
      return {
        profile: name,
        endpoint,
        auth: {
          type: 'local',
          principal: input.principal || env.GANTRY_PRINCIPAL || profile.principal || LOCAL_DEFAULT_PRINCIPAL,
        },
      };
    case 'iam': {
      const region = profile.region ?? regionOfEndpoint(endpoint) ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
      if (!region) {
        throw new UsageError(`profile ${name}: no region (set region in the profile, or AWS_REGION)`);
      }
      return {
        profile: name,
        endpoint,
        auth: { type: 'iam', region, ...(profile.awsProfile ? { awsProfile: profile.awsProfile } : {}) },
      };
    }
    case 'jwt': {
      const token =
        env.GANTRY_TOKEN || (profile.tokenEnv ? env[profile.tokenEnv] : undefined) || profile.token;
      if (!token) {
        throw new UsageError(
          `profile ${name}: no bearer token (set GANTRY_TOKEN${profile.tokenEnv ? ` or ${profile.tokenEnv}` : ''}, or token in the profile)`,
        );
      }
      return { profile: name, endpoint, auth: { type: 'jwt', token: token.replace(/^Bearer\s+/i, '') } };
    }
  }
}
