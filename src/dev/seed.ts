import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import dotenv from 'dotenv';
import { readOrCreateLocalSecret } from 'dev-tools';
import { SANDBOX_INSTITUTIONS, USER_GOOD_ACCOUNTS } from 'plaid-emulator';
import { createPool, type Pool } from '../db/pool';
import { loadConfig } from '../config/load-config';
import { TokenVault } from '../crypto/token-vault';
import { openServiceDatabase } from '../bootstrap/service-database';
import { createLogger } from '../observability/logger';
import { foldStatsChanges } from '../repository/stats-changes-repository';
import {
  findLastConnectionId,
  insertSeedAccounts,
  insertSeedEvents,
  insertSeedConnections,
  type SeedAccounts,
  type SeedConnections,
} from './seed-repository';

const APP_NAMES = ['Budget App', 'Savings Coach', 'Rent Pay', 'Tax Helper'];
const INSTITUTIONS_PER_BATCH = 2_000;
const DAY_MS = 24 * 3600 * 1000;

function print(line: string): void {
  process.stdout.write(`${line}\n`);
}

/**
 * Writes realistic connections for load and admin testing: users with one to three institutions,
 * each with a random subset of the sandbox accounts, spread over the last year, plus their events.
 * The access tokens are fake but encrypted with the configured keys, like real ones.
 */
export async function seedDatabase(
  pool: Pool,
  vault: TokenVault,
  targetAccounts: number,
  report: (line: string) => void = print,
): Promise<{ accounts: number; institutions: number; seconds: number }> {
  const started = Date.now();
  const runTag = randomBytes(3).toString('hex');
  const lastExisting = await findLastConnectionId(pool);
  let accounts = 0;
  let institutions = 0;
  let userNumber = 0;
  let lastReport = 0;
  while (accounts < targetAccounts) {
    const batch: SeedConnections = {
      users: [],
      apps: [],
      items: [],
      institutionIds: [],
      names: [],
      ciphertexts: [],
      fingerprints: [],
      signatures: [],
      createdAt: [],
    };
    const accountCounts: number[] = [];
    while (batch.users.length < INSTITUTIONS_PER_BATCH && accounts < targetAccounts) {
      userNumber += 1;
      const user = `seed-${runTag}-${userNumber}`;
      const connections = 1 + Math.floor(Math.random() * 3);
      const picked = [...SANDBOX_INSTITUTIONS].sort(() => Math.random() - 0.5).slice(0, connections);
      for (const institution of picked) {
        if (accounts >= targetAccounts) break;
        const itemId = randomBytes(28).toString('base64url').slice(0, 37);
        const token = `access-sandbox-${randomUUID()}`;
        const count = Math.min(
          1 + Math.floor(Math.random() * USER_GOOD_ACCOUNTS.length),
          targetAccounts - accounts,
        );
        batch.users.push(user);
        batch.apps.push(APP_NAMES[userNumber % APP_NAMES.length] as string);
        batch.items.push(itemId);
        batch.institutionIds.push(institution.institutionId);
        batch.names.push(institution.name);
        batch.ciphertexts.push(vault.encrypt(token, itemId));
        batch.fingerprints.push(vault.fingerprint(token));
        batch.signatures.push(`${institution.institutionId}|seed-${itemId}`);
        batch.createdAt.push(new Date(Date.now() - Math.random() * 365 * DAY_MS));
        accountCounts.push(count);
        accounts += count;
        institutions += 1;
      }
    }
    const inserted = await insertSeedConnections(pool, batch);
    const account: SeedAccounts = {
      connection: [],
      providerId: [],
      name: [],
      officialName: [],
      mask: [],
      type: [],
      subtype: [],
      createdAt: [],
    };
    batch.items.forEach((itemId, index) => {
      const row = inserted.get(itemId) as { id: string; created_at: Date };
      const templates = USER_GOOD_ACCOUNTS.slice(0, accountCounts[index]);
      for (const template of templates) {
        account.connection.push(row.id);
        account.providerId.push(randomBytes(28).toString('base64url').slice(0, 37));
        account.name.push(template.name);
        account.officialName.push(template.officialName);
        account.mask.push(template.mask);
        account.type.push(template.type);
        account.subtype.push(template.subtype);
        account.createdAt.push(row.created_at);
      }
    });
    await insertSeedAccounts(pool, account);
    // The batch's statistics into the tallies now, as a running service's housekeeping would, so that the
    // first /admin/stats after a seed of a million accounts does not fold them all.
    await foldStatsChanges(pool, 'everything');
    if (Date.now() - lastReport > 2_000 || accounts >= targetAccounts) {
      lastReport = Date.now();
      const seconds = (Date.now() - started) / 1000;
      report(
        `seeded ${accounts.toLocaleString('en-US')} / ${targetAccounts.toLocaleString('en-US')} accounts ` +
          `(${Math.floor((accounts / targetAccounts) * 100)}%) in ${seconds.toFixed(1)} s`,
      );
    }
  }
  report('writing the link-token and exchange events of the new connections…');
  await insertSeedEvents(pool, lastExisting);
  return { accounts, institutions, seconds: (Date.now() - started) / 1000 };
}

async function run(): Promise<void> {
  dotenv.config({ quiet: true });
  const { values } = parseArgs({ options: { accounts: { type: 'string', default: '10000' } } });
  const target = Number(values.accounts);
  if (!Number.isInteger(target) || target <= 0) {
    process.stderr.write(
      '--accounts must be a positive whole number, e.g. npm run seed -- --accounts 1000000\n',
    );
    process.exit(1);
  }
  const config = loadConfig(process.env, { localSecrets: readOrCreateLocalSecret });
  if (config.nodeEnv === 'production') {
    process.stderr.write('refusing to seed fake connections with NODE_ENV=production\n');
    process.exit(1);
  }
  if (!config.databaseUrl) {
    print(`no DATABASE_URL: seeding the embedded database in ${config.dataDir} (stop npm start first)`);
  }
  const { databaseUrl, ownDatabase } = await openServiceDatabase(config, createLogger({ level: 'warn' }));
  const pool = createPool(
    {
      // Bulk writes with long statements: over the direct connection when there is one.
      connectionString: config.database.directUrl ?? databaseUrl,
      max: 2,
      applicationName: 'account-connection-seed',
      statementTimeoutMs: 120_000,
    },
    createLogger({ level: 'warn' }),
  );
  try {
    const result = await seedDatabase(
      pool,
      new TokenVault(config.tokenEncryptionKeys, config.tokenHmacKey),
      target,
    );
    print(
      `done: ${result.accounts.toLocaleString('en-US')} accounts in ${result.institutions.toLocaleString('en-US')} ` +
        `connections, ${result.seconds.toFixed(1)} s`,
    );
  } finally {
    await pool.end();
    await ownDatabase?.stop();
  }
}

if (require.main === module) {
  run().catch((error: unknown) => {
    process.stderr.write(`seeding failed: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
