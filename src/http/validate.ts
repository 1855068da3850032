import type { z } from 'zod';
import { validationFailed, type FieldError } from '../errors';
import { FIELD_ERROR_LIMITS } from './schemas';

function fieldErrorsOf(issue: z.core.$ZodIssue, where: 'body' | 'query' | 'path'): FieldError[] {
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

declare global {
  interface String {
    /** ES2024, present in Node 20; the project's `lib` setting stops at ES2023. */
    isWellFormed(): boolean;
  }
}

const ILL_FORMED = 'must be well-formed Unicode text (it has a lone UTF-16 surrogate)';

/**
 * Every string anywhere in the input, keys included, must be well-formed UTF-16. A lone surrogate
 * cannot be stored: it is written as U+FFFD, so "victim\ud800" and "victim\udfff" would become the
 * same user id. Walked without recursion, since a 16 kB body can nest thousands of levels deep.
 */
function illFormedFields(input: unknown, where: 'body' | 'query' | 'path'): FieldError[] {
  const errors: FieldError[] = [];
  const pending: { value: unknown; path: string[] }[] = [{ value: input, path: [] }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value, path } = next;
    if (typeof value === 'string') {
      if (!value.isWellFormed()) errors.push({ field: path.join('.') || where, message: ILL_FORMED });
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, child] of Object.entries(value)) {
        if (!key.isWellFormed()) {
          errors.push({ field: [...path, key].join('.'), message: `${ILL_FORMED} in its name` });
        }
        pending.push({ value: child, path: [...path, key] });
      }
    }
  }
  return errors.reverse();
}

const cut = (value: string, length: number) =>
  value.length > length ? `${value.slice(0, length - 1)}…` : value;

/** As many as the problem promises to carry: a hostile 16 kB body can hold thousands of bad fields. */
function bounded(errors: FieldError[]): FieldError[] {
  return errors.slice(0, FIELD_ERROR_LIMITS.count).map(({ field, message }) => ({
    field: cut(field, FIELD_ERROR_LIMITS.field),
    message: cut(message, FIELD_ERROR_LIMITS.message),
  }));
}

/** Parses input with a route's schema; bad fields are each named in the problem. */
export function parseInput<T extends z.ZodType>(
  schema: T,
  input: unknown,
  where: 'body' | 'query' | 'path',
): z.infer<T> {
  const illFormed = illFormedFields(input, where);
  const result = schema.safeParse(input ?? {});
  if (result.success && illFormed.length === 0) return result.data;
  const reported = new Set(illFormed.map((error) => error.field));
  const schemaErrors = result.success
    ? []
    : result.error.issues
        .flatMap((issue) => fieldErrorsOf(issue, where))
        .filter((error) => !reported.has(error.field));
  throw validationFailed(
    bounded([...illFormed, ...schemaErrors]),
    `The request ${where} has invalid fields.`,
  );
}
