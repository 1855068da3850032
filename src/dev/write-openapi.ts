import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { ENDPOINTS } from '../http/endpoint-list';
import { buildOpenApiDocument, toOpenApiFile } from '../http/openapi-document';

/**
 * `npm run openapi`: writes the document GET /openapi.json serves to openapi.json at the repository's
 * root, so that client generators can read it without a running instance or a secret. A test fails
 * while the committed file differs from the served document.
 */
const file = path.resolve(__dirname, '..', '..', 'openapi.json');
writeFileSync(file, toOpenApiFile(buildOpenApiDocument(ENDPOINTS)));
process.stdout.write(`wrote ${path.relative(process.cwd(), file) || file}\n`);
