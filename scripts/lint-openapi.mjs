// Lints the OpenAPI document exactly as the service serves it: builds the app in-process (no database,
// no Plaid: /openapi.json needs neither), reads GET /openapi.json with a secret, then runs Spectral
// (.spectral.yaml: spectral:oas + the OWASP ruleset) and Redocly (recommended) on it. Needs `npm run build`.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const { createApp } = require(path.join(root, 'dist/app.js'));
const { createLogger } = require(path.join(root, 'dist/observability/logger.js'));

/** Stands in for what the document does not need; any use of it is a mistake worth failing on. */
const notHere = (name) =>
  new Proxy(
    {},
    {
      get: (_target, property) => {
        throw new Error(
          `the lint script serves only /openapi.json, yet ${name}.${String(property)} was used`,
        );
      },
    },
  );

async function readServedDocument() {
  const secret = randomBytes(24).toString('hex');
  const app = createApp({
    logger: createLogger({ level: 'silent' }),
    isDatabaseAnswering: notHere('isDatabaseAnswering'),
    outbox: notHere('outbox'),
    secrets: { internal: [secret], admin: [`admin-${secret}`] },
    linkTokens: notHere('linkTokens'),
    exchanges: notHere('exchanges'),
    removals: notHere('removals'),
    connectionHealth: notHere('connectionHealth'),
    refreshes: notHere('refreshes'),
    overview: notHere('overview'),
    admin: notHere('admin'),
    reconciliation: notHere('reconciliation'),
  });
  const server = await new Promise((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  try {
    const { port } = server.address();
    const response = await globalThis.fetch(`http://127.0.0.1:${port}/openapi.json`, {
      headers: { 'X-Internal-Secret': secret },
    });
    if (response.status !== 200) throw new Error(`GET /openapi.json answered ${response.status}`);
    return await response.text();
  } finally {
    server.close();
  }
}

function run(command, args, env = {}) {
  console.log(`\n$ ${command} ${args.join(' ')}`);
  const result = spawnSync(path.join(root, 'node_modules/.bin', command), args, {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, ...env },
  });
  if (result.error) throw result.error;
  return result.status === 0;
}

// .spectral.yaml's overrides name this file; node_modules keeps it out of git, Prettier and Docker.
const directory = path.join(root, 'node_modules/.cache/served-openapi');
mkdirSync(directory, { recursive: true });
try {
  const file = path.join(directory, 'openapi.json');
  writeFileSync(file, await readServedDocument());
  const spectral = run('spectral', [
    'lint',
    file,
    '--ruleset',
    path.join(root, '.spectral.yaml'),
    '--fail-severity',
    'error',
  ]);
  const redocly = run('redocly', ['lint', file, '--format', 'stylish'], {
    REDOCLY_TELEMETRY: 'off',
    REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
  });
  if (!spectral || !redocly) process.exitCode = 1;
} finally {
  rmSync(directory, { recursive: true, force: true });
}
