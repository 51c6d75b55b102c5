import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../cli/args.ts';
import {
  LOCAL_DEFAULT_PRINCIPAL,
  LOCAL_PRINCIPAL_HEADER,
  parseProfiles,
  profilesPath,
  regionOfEndpoint,
  resolveTarget,
} from '../../../cli/profiles.ts';
import { PRINCIPAL_HEADER } from '../../../local/http-api.ts';
import { DEMO_TEAM } from '../../../local/stack.ts';

const FILE = parseProfiles(
  `default: prod
profiles:
  dev:
    endpoint: http://127.0.0.1:9000/
    auth: local
    principal: local:demo
  prod:
    endpoint: https://abc123.execute-api.eu-west-1.amazonaws.com
    auth: iam
    awsProfile: ml
  web:
    endpoint: https://gantry.example.com
    auth: jwt
    tokenEnv: WEB_TOKEN
`,
  'profiles.yaml',
);

describe('profiles', () => {
  it('the built-in local profile calls the embedded default as its demo team', () => {
    expect(LOCAL_PRINCIPAL_HEADER).toBe(PRINCIPAL_HEADER);
    expect(LOCAL_DEFAULT_PRINCIPAL).toBe(DEMO_TEAM.principals[0]);
    expect(resolveTarget({ env: {} })).toEqual({
      profile: 'local',
      endpoint: 'http://127.0.0.1:8080',
      auth: { type: 'local', principal: LOCAL_DEFAULT_PRINCIPAL },
    });
    expect(resolveTarget({ env: { GANTRY_PORT: '9999', GANTRY_PRINCIPAL: 'local:demo' } })).toEqual({
      profile: 'local',
      endpoint: 'http://127.0.0.1:9999',
      auth: { type: 'local', principal: 'local:demo' },
    });
  });

  it('--principal wins over GANTRY_PRINCIPAL and the profile, and only on a local target', () => {
    expect(
      resolveTarget({
        principal: 'local:vision',
        env: { GANTRY_PRINCIPAL: 'local:nlp', GANTRY_PROFILE: 'dev' },
        file: FILE,
      }).auth,
    ).toEqual({ type: 'local', principal: 'local:vision' });
    expect(
      resolveTarget({ env: { GANTRY_PRINCIPAL: 'local:nlp', GANTRY_PROFILE: 'dev' }, file: FILE }).auth,
    ).toEqual({
      type: 'local',
      principal: 'local:nlp',
    });
    expect(() => resolveTarget({ principal: 'local:vision', env: {}, file: FILE })).toThrow(
      /--principal is for the local host \(auth: local\); profile prod authenticates with iam/,
    );
  });

  it.each<[string, Parameters<typeof resolveTarget>[0], unknown]>([
    [
      "the file's default",
      { env: { AWS_REGION: 'us-east-1' }, file: FILE },
      {
        profile: 'prod',
        endpoint: 'https://abc123.execute-api.eu-west-1.amazonaws.com',
        // The endpoint's region wins over AWS_REGION: a signature for another region is refused.
        auth: { type: 'iam', region: 'eu-west-1', awsProfile: 'ml' },
      },
    ],
    [
      'GANTRY_PROFILE over the default',
      { env: { GANTRY_PROFILE: 'dev' }, file: FILE },
      { profile: 'dev', endpoint: 'http://127.0.0.1:9000', auth: { type: 'local', principal: 'local:demo' } },
    ],
    [
      '--profile over GANTRY_PROFILE, --endpoint over the profile',
      { profile: 'dev', endpoint: 'http://127.0.0.1:7000', env: { GANTRY_PROFILE: 'prod' }, file: FILE },
      { profile: 'dev', endpoint: 'http://127.0.0.1:7000', auth: { type: 'local', principal: 'local:demo' } },
    ],
    [
      'GANTRY_ENDPOINT over the profile',
      { env: { GANTRY_ENDPOINT: 'http://127.0.0.1:6000' } },
      {
        profile: 'local',
        endpoint: 'http://127.0.0.1:6000',
        auth: { type: 'local', principal: LOCAL_DEFAULT_PRINCIPAL },
      },
    ],
    [
      'a JWT from the env variable the profile names',
      { profile: 'web', env: { WEB_TOKEN: 'eyJ.a.b' }, file: FILE },
      { profile: 'web', endpoint: 'https://gantry.example.com', auth: { type: 'jwt', token: 'eyJ.a.b' } },
    ],
    [
      'GANTRY_TOKEN over it, a "Bearer " prefix dropped',
      { profile: 'web', env: { WEB_TOKEN: 'eyJ.a.b', GANTRY_TOKEN: 'Bearer eyJ.c.d' }, file: FILE },
      { profile: 'web', endpoint: 'https://gantry.example.com', auth: { type: 'jwt', token: 'eyJ.c.d' } },
    ],
  ])('resolves %s', (_, input, target) => {
    expect(resolveTarget(input)).toEqual(target);
  });

  it.each<[string, Parameters<typeof resolveTarget>[0], RegExp]>([
    [
      'an unknown profile',
      { profile: 'nope', env: {}, file: FILE },
      /^no profile "nope"; known: local, dev, prod, web$/,
    ],
    [
      'a profile without a file',
      { profile: 'prod', env: { HOME: '/h' } },
      /^no profile "prod" \(no profiles file at \/h\/\.config\/gantry\/profiles\.yaml\)/,
    ],
    [
      'a JWT profile without a token',
      { profile: 'web', env: {}, file: FILE },
      /^profile web: no bearer token \(set GANTRY_TOKEN or WEB_TOKEN/,
    ],
    [
      'an IAM profile without a region',
      {
        env: {},
        file: parseProfiles('profiles: { p: { endpoint: "https://api.example.com", auth: iam } }', 'f'),
        profile: 'p',
      },
      /^profile p: no region/,
    ],
    ['a bad --endpoint', { endpoint: 'ftp://x', env: {} }, /^endpoint must be an http\(s\) URL/],
  ])('refuses %s', (_, input, message) => {
    expect(() => resolveTarget(input)).toThrow(UsageError);
    expect(() => resolveTarget(input)).toThrow(message);
  });

  it.each([
    [
      'profiles: { p: { endpoint: "https://x", auth: basic } }',
      /^f: profiles\.p\.auth: auth must be local, iam or jwt$/,
    ],
    ['profiles: { p: { auth: local } }', /^f: profiles\.p\.endpoint: is required$/],
    [
      'profiles: { p: { endpoint: "x", auth: local, extra: 1 } }',
      /profiles\.p\.endpoint: must be an http\(s\) URL.*profiles\.p\.extra: unknown field/,
    ],
    ['profiles: [', /^f: not valid YAML/],
  ])('names what is wrong in a profiles file: %s', (text, message) => {
    expect(() => parseProfiles(text, 'f')).toThrow(message);
  });

  it('finds the profiles file', () => {
    expect(profilesPath({ GANTRY_PROFILES: '/etc/g.yaml', HOME: '/h' })).toBe('/etc/g.yaml');
    expect(profilesPath({ XDG_CONFIG_HOME: '/x', HOME: '/h' })).toBe('/x/gantry/profiles.yaml');
    expect(profilesPath({ HOME: '/h' })).toBe('/h/.config/gantry/profiles.yaml');
  });

  it.each([
    ['https://abc.execute-api.eu-west-1.amazonaws.com', 'eu-west-1'],
    ['https://abc.execute-api.cn-north-1.amazonaws.com.cn/v1', 'cn-north-1'],
    ['https://gantry.example.com', undefined],
  ])('regionOfEndpoint(%s) = %s', (endpoint, region) => {
    expect(regionOfEndpoint(endpoint)).toBe(region);
  });
});
