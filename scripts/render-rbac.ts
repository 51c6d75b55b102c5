/**
 * Print the per-namespace RoleBindings of deploy/k8s (lib/rbac.ts) for one cluster of a Gantry
 * configuration file: `npm run rbac -- deploy/serverless/config/dev.json training | kubectl apply -f -`.
 */
import { readFileSync } from 'node:fs';
import { parseConfig } from '../lib/config.ts';
import { renderRoleBindings } from '../lib/rbac.ts';

const [file, cluster] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: npm run rbac -- <gantry config.json> [cluster]\n');
  process.exit(2);
}
const config = parseConfig(JSON.parse(readFileSync(file, 'utf8')));
const name = cluster ?? config.defaultCluster ?? (config.clusters[0]?.name as string);
if (!config.clusters.some((c) => c.name === name)) {
  process.stderr.write(`no cluster named ${name} in ${file}\n`);
  process.exit(2);
}
process.stdout.write(renderRoleBindings(config, name));
