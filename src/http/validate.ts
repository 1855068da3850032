import { distance } from 'fastest-levenshtein';
import { validationFailed, type FieldError } from '../errors';
import { JSON_NESTING_LIMIT } from './body-limits';
import { FIELD_ERROR_LIMITS, z } from './schemas/common-schemas';

type Where = 'body' | 'query' | 'path';

/** Case and separators aside: `accessToken`, `AccessToken` and `access-token` all mean `access_token`. */
const comparable = (name: string) => name.toLowerCase().replace(/[-_\s]/g, '');

/**
 * The declared name an unknown one most likely meant: the same but for case and separators, or a typo
 * or two away (up to a third of the name's letters). None when nothing is that close.
 */
export function closestName(unknown: string, declared: readonly string[]): string | undefined {
  const wanted = comparable(unknown);
  let best: { name: string; distance: number } | undefined;
  for (const name of declared) {
    const candidate = comparable(name);
    const allowed = Math.max(1, Math.floor(candidate.length / 3));
    // Lengths further apart than that cannot be close: a 16 kB key costs nothing to dismiss.
    if (Math.abs(candidate.length - wanted.length) > allowed) continue;
    const apart = distance(wanted, candidate);
    if (apart <= allowed && (!best || apart < best.distance)) best = { name, distance: apart };
  }
  return best?.name;
}

function unknownNameError(field: string, key: string, declared: readonly string[], where: Where): FieldError {
  const suggestion = closestName(key, declared);
  const message = where === 'body' ? 'is not a known field' : 'is not a known parameter';
  return { field, message: suggestion ? `${message}; did you mean ${suggestion}?` : message };
}

/** The names an object schema declares at its top level (where unknown names are refused). */
function declaredNamesOf(schema: z.ZodType): string[] {
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}

function fieldErrorsOf(issue: z.core.$ZodIssue, where: Where, declared: readonly string[]): FieldError[] {
  const prefix = issue.path.length > 0 ? `${issue.path.join('.')}.` : '';
  if (issue.code === 'unrecognized_keys') {
    const known = issue.path.length === 0 ? declared : [];
    return issue.keys.map((key) => unknownNameError(`${prefix}${key}`, key, known, where));
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

const TOO_DEEP = `nests deeper than ${JSON_NESTING_LIMIT} levels of objects and arrays`;

interface Visited {
  value: unknown;
  /** 1 for the input itself. */
  level: number;
  parent: Visited | undefined;
  key: string;
}

/**
 * The first value in `input` that is an object or array beyond JSON_NESTING_LIMIT levels, named by its
 * path; none when the input is no deeper. Each value is visited once and a path is only built for the
 * one reported (not copied at every level), so the cost is linear in the input whatever its depth.
 */
function tooDeepField(input: unknown, where: Where): FieldError | undefined {
  const pending: Visited[] = [{ value: input, level: 1, parent: undefined, key: where }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    if (typeof next.value !== 'object' || next.value === null) continue;
    if (next.level > JSON_NESTING_LIMIT) {
      const path: string[] = [];
      for (let at: Visited | undefined = next; at?.parent; at = at.parent) path.push(at.key);
      return { field: path.reverse().join('.'), message: TOO_DEEP };
    }
    for (const [key, child] of Object.entries(next.value)) {
      pending.push({ value: child, level: next.level + 1, parent: next, key });
    }
  }
  return undefined;
}

/**
 * Every string anywhere in the input, keys included, must be well-formed UTF-16. A lone surrogate
 * cannot be stored: it is written as U+FFFD, so "victim\ud800" and "victim\udfff" would become the
 * same user id. Walked once the input is known to nest no deeper than JSON_NESTING_LIMIT, so copying
 * the path at each level costs at most that many names.
 */
function illFormedFields(input: unknown, where: Where): FieldError[] {
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

/**
 * Parses input with a route's schema; bad fields are each named in the problem. Input nested deeper than
 * JSON_NESTING_LIMIT is refused before anything else looks at it.
 */
export function parseInput<T extends z.ZodType>(schema: T, input: unknown, where: Where): z.infer<T> {
  const tooDeep = tooDeepField(input, where);
  if (tooDeep) {
    throw validationFailed(bounded([tooDeep]), `The request ${where} ${TOO_DEEP}.`);
  }
  const illFormed = illFormedFields(input, where);
  const result = schema.safeParse(input ?? {});
  if (result.success && illFormed.length === 0) return result.data;
  const reported = new Set(illFormed.map((error) => error.field));
  const declared = declaredNamesOf(schema);
  const schemaErrors = result.success
    ? []
    : result.error.issues
        .flatMap((issue) => fieldErrorsOf(issue, where, declared))
        .filter((error) => !reported.has(error.field));
  throw validationFailed(
    bounded([...illFormed, ...schemaErrors]),
    `The request ${where} has invalid fields.`,
  );
}
