import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { SCHEMAS_DIR } from '../../src';

const BASE = 'https://teller-emulator.invalid/schemas/';

/** Every schema of schemas/, compiled once, strict: a schema mistake fails here rather than passing silently. */
const ajv = new Ajv({ strict: true, allErrors: true, allowUnionTypes: true });
addFormats(ajv);
for (const file of readdirSync(SCHEMAS_DIR)) {
  ajv.addSchema(JSON.parse(readFileSync(path.join(SCHEMAS_DIR, file), 'utf8')) as object);
}

export type SchemaName =
  | 'account'
  | 'account-list'
  | 'account-details'
  | 'account-balances'
  | 'institution'
  | 'institution-list'
  | 'error'
  | 'connect-success'
  | 'webhook';

/** The schema's complaints about the value; [] when it conforms. */
export function schemaErrors(name: SchemaName, value: unknown): string[] {
  const validate = ajv.getSchema(`${BASE}${name}.json`);
  if (!validate) throw new Error(`no schema ${name}`);
  return validate(value)
    ? []
    : (validate.errors ?? []).map((error) => `${name}${error.instancePath} ${error.message ?? ''}`);
}

/** Fails the test with the schema's complaints unless the value conforms. */
export function expectConforms(name: SchemaName, value: unknown): void {
  expect(schemaErrors(name, value)).toEqual([]);
}
