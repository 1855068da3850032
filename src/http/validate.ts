import type { z } from 'zod';
import { validationFailed, type FieldError } from '../errors';

function fieldErrorsOf(issue: z.core.$ZodIssue, where: 'body' | 'query'): FieldError[] {
  const prefix = issue.path.length > 0 ? `${issue.path.join('.')}.` : '';
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => ({ field: `${prefix}${key}`, message: 'is not a known parameter' }));
  }
  const missing = issue.code === 'invalid_type' && /received undefined$/.test(issue.message);
  return [
    {
      field: issue.path.length > 0 ? issue.path.join('.') : where,
      message: missing ? 'is required' : issue.message,
    },
  ];
}

/** Parses input with a route's schema; bad fields are each named in the problem. */
export function parseInput<T extends z.ZodType>(
  schema: T,
  input: unknown,
  where: 'body' | 'query',
): z.infer<T> {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  throw validationFailed(
    result.error.issues.flatMap((issue) => fieldErrorsOf(issue, where)),
    `The request ${where} has invalid fields.`,
  );
}
