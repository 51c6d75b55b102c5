import { GetParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';
import type { WebhookConfig } from '../../config.ts';
import { ValidationError } from '../../errors.ts';
import type { CallOptions, Clock } from '../../ports.ts';
import { translateAwsError } from './errors.ts';

/**
 * Webhook signing secrets: an environment variable of the events function (`secretEnv`), or an
 * SSM SecureString parameter (`secretParameter`), read with decryption and kept for `cacheSeconds`
 * so a rotated secret is picked up within that time. A missing secret is a configuration error:
 * the delivery fails (and is retried, so fixing the configuration delivers it).
 */
export function makeWebhookSecrets(deps: {
  env: NodeJS.ProcessEnv;
  ssm?: () => SSMClient;
  clock: Clock;
  cacheSeconds?: number;
}) {
  const cache = new Map<string, { value: string; until: number }>();
  const ttl = (deps.cacheSeconds ?? 300) * 1000;
  return async (webhook: WebhookConfig, opts?: CallOptions): Promise<string> => {
    if (webhook.secretEnv) {
      const value = deps.env[webhook.secretEnv];
      if (!value) {
        throw new ValidationError([
          { field: `webhooks.${webhook.name}.secretEnv`, rule: `${webhook.secretEnv} is not set` },
        ]);
      }
      return value;
    }
    const name = webhook.secretParameter as string;
    const now = deps.clock.now().getTime();
    const hit = cache.get(name);
    if (hit && hit.until > now) return hit.value;
    if (!deps.ssm) throw new Error(`webhook ${webhook.name}: no SSM client to read ${name}`);
    let value: string | undefined;
    try {
      const out = await deps
        .ssm()
        .send(
          new GetParameterCommand({ Name: name, WithDecryption: true }),
          opts?.signal ? { abortSignal: opts.signal } : {},
        );
      value = out.Parameter?.Value;
    } catch (err) {
      throw translateAwsError(err, `read webhook secret ${name}`);
    }
    if (!value) throw new Error(`webhook ${webhook.name}: parameter ${name} is empty`);
    cache.set(name, { value, until: now + ttl });
    return value;
  };
}
