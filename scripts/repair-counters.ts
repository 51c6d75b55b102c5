/**
 * Recompute each team's counters of runs and GPUs in flight (`count#<team>` items of the state
 * table) from its run records, and fix those that differ (lib/state/repair-counters.ts). Safe to
 * run at any time, and again: a team whose runs start or end while it is read is left as it is
 * and reported `unsettled`. Prints one line per team: what was counted, what the records say,
 * whether it was fixed. See docs/team-counters.md.
 *
 *   AWS_REGION=eu-west-1 npm exec -- node scripts/repair-counters.ts --table <StateTableName> --team vision --team nlp [--dry-run]
 *
 * Credentials come from the standard AWS chain; GANTRY_DYNAMODB_ENDPOINT points it at a local
 * server instead (the embedded default prints its state table's endpoint at start).
 */
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { makeDynamoStateTable } from '../lib/adapters/aws/dynamodb-table.ts';
import { repairCounters } from '../lib/state/repair-counters.ts';

const { values } = parseArgs({
  options: {
    table: { type: 'string' },
    team: { type: 'string', multiple: true },
    'dry-run': { type: 'boolean' },
  },
  strict: true,
});
if (!values.table || !values.team?.length) {
  process.stderr.write(
    'usage: node scripts/repair-counters.ts --table <state table> --team <name> [--team <name> …] [--dry-run]\n',
  );
  process.exit(2);
}
const region = process.env.AWS_REGION ?? 'us-east-1';
const dynamo = new DynamoDBClient({
  region,
  ...(process.env.GANTRY_DYNAMODB_ENDPOINT ? { endpoint: process.env.GANTRY_DYNAMODB_ENDPOINT } : {}),
});
try {
  const report = await repairCounters({
    table: makeDynamoStateTable({ client: DynamoDBDocumentClient.from(dynamo), tableName: values.table }),
    teams: values.team,
    dryRun: values['dry-run'] ?? false,
  });
  for (const r of report) process.stdout.write(`${JSON.stringify(r)}\n`);
  if (report.some((r) => r.unsettled)) process.exitCode = 3;
} finally {
  dynamo.destroy();
}
