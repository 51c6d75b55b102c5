import { type Issue, ValidationError } from '../errors.ts';
import * as z from '../zod.ts';

function describeInput(input: unknown): string {
  if (input === undefined) return 'nothing';
  if (input === null) return 'null';
  return Array.isArray(input) ? 'array' : typeof input;
}

/** zod issues → Gantry issues: a dotted field path and the rule, in words. One issue per field. */
export function toIssues(error: z.core.$ZodError): Issue[] {
  const byField = new Map<string, Issue>();
  for (const i of error.issues) {
    const field = i.path.map(String).join('.');
    let issue: Issue;
    if (i.code === 'unrecognized_keys') {
      for (const key of i.keys) {
        const f = [field, key].filter(Boolean).join('.');
        if (!byField.has(f)) byField.set(f, { field: f, rule: 'unknown field' });
      }
      continue;
    } else if (i.code === 'invalid_key') {
      issue = { field, rule: i.issues.map((inner) => inner.message).join('; ') };
    } else if (i.code === 'invalid_type' && i.message.startsWith('Invalid input')) {
      issue = {
        field,
        rule: i.input === undefined ? 'is required' : `must be ${i.expected}, got ${describeInput(i.input)}`,
      };
    } else {
      issue = { field, rule: i.message };
    }
    if (!byField.has(field)) byField.set(field, issue);
  }
  return [...byField.values()];
}

/** Parse an untrusted value with a schema, or throw a `ValidationError` naming every bad field. */
export function parseWith<S extends z.core.$ZodType>(schema: S, input: unknown): z.output<S> {
  const result = z.safeParse(schema, input, { reportInput: true });
  if (!result.success) throw new ValidationError(toIssues(result.error));
  return result.data;
}
