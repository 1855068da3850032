import { errors } from './plaid-error-bodies';
import { SANDBOX_INSTITUTIONS, VALID_PRODUCTS, type SandboxInstitution } from './sandbox-data';

export type Body = Record<string, unknown>;
type FieldType = 'string' | 'array' | 'object' | 'boolean';

export const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';

/** Plaid's timestamps: ISO 8601 UTC without milliseconds. */
export function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function requireFields(body: Body, fields: Record<string, FieldType>, required: string[]): void {
  const missing = required.filter((field) => body[field] === undefined || body[field] === null);
  if (missing.length > 0) throw errors.missingFields(missing);
  for (const [field, type] of Object.entries(fields)) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    const ok =
      type === 'array'
        ? Array.isArray(value)
        : type === 'object'
          ? typeof value === 'object' && !Array.isArray(value)
          : typeof value === type;
    if (!ok) throw errors.invalidField(`${field} must be ${type === 'array' ? 'an array' : `a ${type}`}`);
    if (type === 'string' && value === '') throw errors.invalidField(`${field} must be a non-empty string`);
  }
}

export function institutionFor(institutionId: unknown): SandboxInstitution {
  const institution = SANDBOX_INSTITUTIONS.find((candidate) => candidate.institutionId === institutionId);
  if (!institution) throw errors.invalidInstitution();
  return institution;
}

export function checkProducts(products: unknown[], field: string): string[] {
  if (products.length === 0) throw errors.invalidField(`${field} must contain at least one product`);
  const invalid = products.filter((product) => !VALID_PRODUCTS.has(product as string)).map(String);
  if (invalid.length > 0) throw errors.invalidProduct(invalid);
  return products as string[];
}

/** The spec gives webhooks `format: url`; anything but an absolute http(s) URL could never be delivered. */
export function webhookUrlOf(value: unknown, field: string): string | null {
  if (value === undefined || value === null) return null;
  let url: URL | undefined;
  try {
    url = typeof value === 'string' ? new URL(value) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw errors.invalidField(`${field} must be a valid http or https URL`);
  }
  return value as string;
}
