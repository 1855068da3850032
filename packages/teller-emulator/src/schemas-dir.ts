import path from 'node:path';

/** The package's JSON Schemas of Teller's shapes (account, error, webhook…), for other tests to validate with. */
export const SCHEMAS_DIR = path.resolve(__dirname, '..', 'schemas');
