import type { z } from 'zod';
import { validationFailed } from '../errors';

/** Parses input with a route's schema; unknown fields are dropped, bad ones named in the problem. */
export function parseInput<T extends z.ZodType>(
  schema: T,
  input: unknown,
  where: 'body' | 'query',
): z.infer<T> {
  const result = schema.safeParse(input ?? {});
  if (result.success) return result.data;
  throw validationFailed(
    result.error.issues.map((issue) => ({
      field: issue.path.length > 0 ? issue.path.join('.') : where,
      message: issue.code === 'invalid_type' && issue.input === undefined ? 'is required' : issue.message,
    })),
    `The request ${where} has invalid fields.`,
  );
}
