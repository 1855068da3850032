import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { Client } from 'pg';
import { createDatabase, databaseExists, dropDatabase, findFreePort } from 'dev-tools';
import { createPool } from '../db/pool';
import { deriveCursorKey, encodeCursor } from '../crypto/admin-cursor';
import { TokenVault } from '../crypto/token-vault';
import { migrateDatabase } from '../db/migrate';
import { createLogger } from '../observability/logger';
import { countSeededAccounts, findAnySubscriptionUser, findLastAccountId } from './seed-repository';
import { seedDatabase } from './seed';

/**
 * `npm run benchmark -- --accounts 1000000 [--database NAME] [--seconds N] [--keep]`: seeds a database on
 * a real Postgres server (or reuses the one `--database` names, seeded by an earlier run), runs the
 * service against it in a child process with the admin rate limit lifted, and prints admin latencies,
 * the export's rate and the service's memory. It asserts no figure (this machine is shared and noisy),
 * but every measured request must be answered 2xx: one that is not is counted, its latency is not
 * printed as an answer's, and the run exits non-zero naming the count.
 */

const print = (line: string) => process.stdout.write(`${line}\n`);

/**
 * The limits lifted for the measured service, by configuration: at 120 admin requests a minute the
 * admin rate limit would refuse nearly every measured request. Printed with the figures.
 */
const LIFTED_LIMITS = { RATE_LIMIT_ADMIN_PER_MINUTE: '1000000000' };

/** Measured requests not answered 2xx, by measurement: any makes the run fail. */
const failures: string[] = [];

const loadAverage = () =>
  os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(', ');

function rssMegabytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kilobytes = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  return kilobytes / 1024;
}

async function waitForHealth(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode}`);
    const ok = await fetch(`${url}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error('the service did not become healthy within 60 s');
}

async function measure(
  title: string,
  url: string,
  secret: string,
  seconds: number,
  connections = 4,
): Promise<void> {
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    headers: { 'X-Internal-Secret': secret },
  });
  const failed = result.non2xx + result.errors + result.timeouts;
  const label = `${title.padEnd(38)} ${String(connections)} conn`;
  if (failed > 0) {
    // The latencies would mix refusals with answers: none are printed.
    const total = result.requests.total + result.errors + result.timeouts;
    failures.push(`${title} (${connections} conn): ${failed} of ${total} not answered 2xx`);
    print(
      `${label}  FAILED: ${failed} of ${total} requests not answered 2xx ` +
        `(${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts)`,
    );
    return;
  }
  print(
    `${label}  p50 ${String(result.latency.p50).padStart(4)} ms  p97.5 ${String(result.latency.p97_5).padStart(4)} ms  ` +
      `p99 ${String(result.latency.p99).padStart(4)} ms  ${result.requests.average.toFixed(0).padStart(5)} req/s`,
  );
}

async function exportWithMemory(url: string, secret: string, pid: number, expected: number): Promise<void> {
  const baseline = rssMegabytes(pid);
  let peak = baseline;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssMegabytes(pid));
  }, 20);
  const started = Date.now();
  const { status, lines, bytes } = await new Promise<{ status: number; lines: number; bytes: number }>(
    (resolve, reject) => {
      http
        .get(
          url,
          { headers: { 'X-Internal-Secret': secret, Accept: 'application/x-ndjson' } },
          (response) => {
            let count = 0;
            let size = 0;
            response.on('data', (chunk: Buffer) => {
              size += chunk.length;
              // indexOf, not a loop over every byte: the client shares the machine with the service.
              for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) count += 1;
            });
            response.on('end', () =>
              resolve({ status: response.statusCode ?? 0, lines: count, bytes: size }),
            );
            response.on('error', reject);
          },
        )
        .on('error', reject);
    },
  );
  clearInterval(sampler);
  const seconds = (Date.now() - started) / 1000;
  const title = 'NDJSON export of every account'.padEnd(38);
  if (status !== 200 || lines !== expected) {
    failures.push(`NDJSON export: status ${status}, ${lines} of ${expected} lines`);
    print(`${title} FAILED: status ${status}, ${lines.toLocaleString('en-US')} of ${expected} lines`);
    return;
  }
  print(
    `${title} ${lines.toLocaleString('en-US')} lines, ${(bytes / 1024 / 1024).toFixed(0)} MB ` +
      `in ${seconds.toFixed(1)} s (${Math.round(lines / seconds).toLocaleString('en-US')} rows/s); ` +
      `service RSS ${baseline.toFixed(0)} MB before, ${peak.toFixed(0)} MB peak`,
  );
}

async function run(): Promise<void> {
  const { values } = parseArgs({
    options: {
      accounts: { type: 'string', default: '1000000' },
      seconds: { type: 'string', default: '10' },
      database: { type: 'string' },
      keep: { type: 'boolean' },
    },
  });
  const accounts = Number(values.accounts);
  const seconds = Number(values.seconds);
  const serverUrl =
    process.env.BENCH_DATABASE_URL ??
    process.env.TEST_DATABASE_URL ??
    'postgresql://postgres@127.0.0.1:5432/postgres';
  // --database: a database of earlier runs is reused (migrated, not seeded again), and kept.
  const name = values.database ?? `acs_bench_${Date.now().toString(36)}`;
  const keep = values.keep === true || values.database !== undefined;
  const databaseUrl = new URL(serverUrl);
  databaseUrl.pathname = `/${name}`;
  const admin = new Client({ connectionString: serverUrl });
  admin.on('error', (error) => print(`maintenance connection lost: ${error.message}`));
  await admin.connect();
  const reused = values.database !== undefined && (await databaseExists(admin, name));
  if (!reused) await createDatabase(admin, name);
  print(`benchmark database ${name} on ${new URL(serverUrl).host}${reused ? ' (reused)' : ''}`);
  print(`${os.cpus().length} CPUs, load average ${loadAverage()} (1, 5, 15 min) at the start`);

  const encryptionKey = randomBytes(32);
  const hmacKey = randomBytes(32);
  const internalSecret = randomBytes(24).toString('hex');
  const adminSecret = randomBytes(24).toString('hex');
  let child: ChildProcess | undefined;
  try {
    await migrateDatabase(databaseUrl.toString(), createLogger({ level: 'warn' }));
    const pool = createPool(
      {
        connectionString: databaseUrl.toString(),
        max: 2,
        applicationName: 'account-connection-benchmark',
        statementTimeoutMs: 120_000,
      },
      createLogger({ level: 'warn' }),
    );
    if (!reused) await seedDatabase(pool, new TokenVault([encryptionKey], hmacKey), accounts);
    const seeded = await countSeededAccounts(pool);
    const lastAccount = await findLastAccountId(pool);
    const someUser = await findAnySubscriptionUser(pool);
    await pool.end();

    const port = await findFreePort();
    child = spawn(process.execPath, [path.resolve(__dirname, '..', 'main.js')], {
      stdio: 'ignore',
      env: {
        PATH: process.env.PATH,
        NODE_ENV: 'development',
        LOG_LEVEL: 'warn',
        PORT: String(port),
        PLAID_EMULATOR_PORT: '0',
        DATABASE_URL: databaseUrl.toString(),
        INTERNAL_SECRET: internalSecret,
        ADMIN_SECRET: adminSecret,
        TOKEN_ENCRYPTION_KEY: encryptionKey.toString('base64'),
        TOKEN_HMAC_KEY: hmacKey.toString('base64'),
        DATA_DIR: path.join('/tmp', name),
        ...LIFTED_LIMITS,
      },
    });
    const url = `http://127.0.0.1:${port}`;
    await waitForHealth(url, child);
    const deepCursor = encodeCursor(deriveCursorKey(hmacKey), String(Number(lastAccount) - 150));
    print('');
    print(
      `admin endpoints at ${seeded.toLocaleString('en-US')} accounts (${seconds} s each); limits lifted ` +
        `for the measurement: ${Object.entries(LIFTED_LIMITS)
          .map(([key, value]) => `${key}=${value}`)
          .join(', ')}`,
    );
    await measure('first page (limit=100)', `${url}/admin/accounts?limit=100`, adminSecret, seconds);
    await measure(
      'deep page (limit=100, last ids)',
      `${url}/admin/accounts?limit=100&cursor=${deepCursor}`,
      adminSecret,
      seconds,
    );
    await measure(
      'page filtered by institution_id',
      `${url}/admin/accounts?limit=100&institution_id=ins_109511`,
      adminSecret,
      seconds,
    );
    // The trigram index's case: a part of one sandbox bank's name (Tartan Bank), and one that two share.
    await measure(
      'page filtered by institution_name',
      `${url}/admin/accounts?limit=100&institution_name=artan`,
      adminSecret,
      seconds,
    );
    await measure(
      'connections by institution_name',
      `${url}/admin/connections?limit=100&institution_name=PLATYPUS`,
      adminSecret,
      seconds,
    );
    await measure(
      'page filtered by subscription_user_id',
      `${url}/admin/accounts?subscription_user_id=${encodeURIComponent(someUser)}`,
      adminSecret,
      seconds,
    );
    await measure('stats', `${url}/admin/stats`, adminSecret, seconds, 1);
    await measure('stats', `${url}/admin/stats`, adminSecret, seconds);
    await exportWithMemory(`${url}/admin/accounts`, adminSecret, child.pid as number, seeded);
    print(`load average ${loadAverage()} at the end`);
  } finally {
    child?.kill('SIGTERM');
    if (child) await new Promise((resolve) => child?.once('exit', resolve));
    if (keep) print(`kept database ${name} (reuse it: --database ${name})`);
    else await dropDatabase(admin, name);
    await admin.end();
  }
  if (failures.length > 0) {
    process.stderr.write(
      `benchmark failed: ${failures.length} measurement(s) had requests not answered 2xx:\n` +
        failures.map((line) => `  ${line}\n`).join(''),
    );
    process.exit(1);
  }
}

run().catch((error: unknown) => {
  process.stderr.write(`benchmark failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
