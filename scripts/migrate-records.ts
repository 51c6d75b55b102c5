/**
 * One-off: copy the run, sweep and data-trigger records an S3-only Gantry kept in its bucket into
 * the state table (lib/state/migrate.ts). Safe to run again; changes nothing in S3.
 *
 *   AWS_REGION=eu-west-1 npm run migrate-records -- --bucket <GantryBucketName> --table <StateTableName>
 *
 * Both names are outputs of the deployed stack. Credentials come from the standard AWS chain;
 * GANTRY_S3_ENDPOINT / GANTRY_DYNAMODB_ENDPOINT point it at local servers instead.
 */
import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { makeDynamoStateTable } from '../lib/adapters/aws/dynamodb-table.ts';
import { makeS3ObjectStore } from '../lib/adapters/aws/s3-store.ts';
import { migrateRecords } from '../lib/state/migrate.ts';

const { values } = parseArgs({
  options: { bucket: { type: 'string' }, table: { type: 'string' }, verbose: { type: 'boolean' } },
  strict: true,
});
if (!values.bucket || !values.table) {
  process.stderr.write(
    'usage: npm run migrate-records -- --bucket <bucket> --table <state table> [--verbose]\n',
  );
  process.exit(2);
}
const region = process.env.AWS_REGION ?? 'us-east-1';
const s3 = new S3Client({
  region,
  ...(process.env.GANTRY_S3_ENDPOINT
    ? { endpoint: process.env.GANTRY_S3_ENDPOINT, forcePathStyle: true }
    : {}),
});
const dynamo = new DynamoDBClient({
  region,
  ...(process.env.GANTRY_DYNAMODB_ENDPOINT ? { endpoint: process.env.GANTRY_DYNAMODB_ENDPOINT } : {}),
});
const report = await migrateRecords({
  store: makeS3ObjectStore({ s3, bucket: values.bucket }),
  table: makeDynamoStateTable({ client: DynamoDBDocumentClient.from(dynamo), tableName: values.table }),
  ...(values.verbose ? { log: (line) => process.stderr.write(`${JSON.stringify(line)}\n`) } : {}),
});
process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
s3.destroy();
dynamo.destroy();
