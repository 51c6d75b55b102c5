import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';

/** The state table of a local stack, through the production adapter. */
export { tableOfStack as tableOf } from '../../local/state-table.ts';

/** Every item key with this prefix (`run#`, `sweep#`, `doc#`), sorted: a test's view of what was stored. */
export async function itemKeys(
  state: { stateTable: { name: string; client: DynamoDBDocumentClient } },
  prefix = 'run#',
): Promise<string[]> {
  const keys: string[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await state.stateTable.client.send(
      new ScanCommand({
        TableName: state.stateTable.name,
        ProjectionExpression: 'pk',
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const item of page.Items ?? []) if (String(item.pk).startsWith(prefix)) keys.push(String(item.pk));
    start = page.LastEvaluatedKey;
  } while (start);
  return keys.sort();
}
