import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { TokenVault } from '../../src/crypto/token-vault';
import { PlaidEmulator } from 'plaid-emulator';
import type { UseCaseHooks } from '../../src/use-cases/use-case-dependencies';
import { createTestDatabase, poolerEnvironment, type TestDatabase } from '../support/database';
import {
  adminStats,
  connectInstitution,
  finishedTokenReencryption,
  getTokenReencryption,
  refreshConnection,
  removeInstitution,
  startTokenReencryption,
} from '../support/requests';
import {
  PLAID_SECRET,
  rowsOf,
  startService,
  testEnvironment,
  uniqueUserId,
  type ServiceContext,
} from '../support/service';
import { projectPath } from '../support/project-paths';

const run = promisify(execFile);

const newKeyText = () => randomBytes(32).toString('base64');
/** A key's id as tokens_by_key names it: the first 8 hex characters of the SHA-256 of its bytes. */
const keyIdOf = (key: string) =>
  createHash('sha256').update(Buffer.from(key, 'base64')).digest('hex').slice(0, 8);

async function tokensByKey(service: ServiceContext): Promise<Record<string, number>> {
  const response = await adminStats(service);
  expect(response.status).toBe(200);
  return response.body.tokens_by_key as Record<string, number>;
}

/** A finished run, started through the endpoint. */
async function reencryptToEnd(service: ServiceContext) {
  const started = await startTokenReencryption(service);
  expect(started.status).toBe(202);
  const finished = await finishedTokenReencryption(service, started.body.run_id as string);
  expect(finished.status).toBe(200);
  return finished.body as Record<string, unknown>;
}

/** The connections' rows as stored: which key sealed each token, and the ciphertext. */
const storedConnections = (service: ServiceContext) =>
  rowsOf(
    service,
    `SELECT provider_item_id AS item, access_token_key_id AS key_id, access_token_ciphertext AS ciphertext
       FROM connections ORDER BY id`,
  );

describe('token re-encryption: key rotation to the end', () => {
  let database: TestDatabase;
  let plaid: PlaidEmulator;
  const hmacKey = newKeyText();
  const oldKey = newKeyText();
  const newKey = newKeyText();
  /** The services a test starts over the one database, as a rolling deploy would, each closed at its end. */
  let started: ServiceContext[] = [];
  const start = async (
    keys: string[],
    options: { env?: Record<string, string>; hooks?: UseCaseHooks } = {},
  ) => {
    const service = await startService({
      database,
      emulator: plaid,
      hooks: options.hooks,
      env: {
        TOKEN_ENCRYPTION_KEY: keys.join(','),
        TOKEN_HMAC_KEY: hmacKey,
        RATE_LIMIT_ADMIN_PER_MINUTE: '100000',
        ...options.env,
      },
    });
    started.push(service);
    return service;
  };

  beforeEach(async () => {
    database = await createTestDatabase();
    plaid = new PlaidEmulator({ credentials: { clientId: 'test-client', secret: PLAID_SECRET } });
    await plaid.listen(0);
  });
  afterEach(async () => {
    for (const service of started) await service.close();
    started = [];
    await plaid.close();
    await database.drop();
  });

  it('when the tokens of connections, an exchange under way and a pending removal are re-encrypted, then tokens_by_key shows only the new key and, with the old key dropped, every one still works', async () => {
    const before = await start([oldKey]);
    const user = uniqueUserId('rotation');
    const connections = [
      await connectInstitution(before, user, 'ins_109508'),
      await connectInstitution(before, user, 'ins_109509'),
      await connectInstitution(before, user, 'ins_109510'),
    ];
    // A removal Plaid refuses for now: its token waits in the outbox.
    const queued = await connectInstitution(before, user, 'ins_109512');
    plaid.injectFault({ path: '/item/remove', status: 500, count: 1_000 });
    expect((await removeInstitution(before, user, { item_id: queued.itemId })).status).toBe(200);
    // An exchange whose Plaid call returned and whose connection is not stored yet holds its token.
    const inFlightToken = `access-sandbox-${randomUUID()}`;
    await rowsOf(
      before,
      `INSERT INTO exchanges (public_token_fingerprint, subscription_user_id, app_name, state, provider_item_id,
                              access_token_ciphertext, claim_id)
       VALUES ($1, $2, 'Budget App', 'exchanged', 'item-in-flight', $3, $4) RETURNING state`,
      [randomBytes(32), user, before.deps.vault.encrypt(inFlightToken, 'item-in-flight'), randomUUID()],
    );
    expect(await tokensByKey(before)).toEqual({ [keyIdOf(oldKey)]: 5 });
    await before.close();
    started = [];

    const rotating = await start([newKey, oldKey]);
    const finished = await reencryptToEnd(rotating);

    expect(finished).toMatchObject({
      state: 'done',
      key_id: keyIdOf(newKey),
      total: 5,
      reencrypted: 5,
      unreadable: 0,
      remaining: 0,
      failure: null,
    });
    expect(await tokensByKey(rotating)).toEqual({ [keyIdOf(newKey)]: 5 });
    await rotating.close();
    started = [];

    const after = await start([newKey]);
    plaid.clearFaults();
    // A removal by item_id decrypts the stored token to call Plaid with it.
    const removed = await removeInstitution(after, user, { item_id: connections[0]!.itemId });
    const refreshed = await refreshConnection(after, {
      subscription_user_id: user,
      item_id: connections[1]!.itemId,
    });
    await rowsOf(after, `UPDATE outbox SET next_attempt_at = now() WHERE state = 'pending' RETURNING id`);
    await after.deps.outbox.runOnce();

    expect(removed.status).toBe(200);
    expect(refreshed.status).toBe(200);
    const removedAtPlaid = plaid
      .calls('/item/remove')
      .filter((call) => call.status === 200)
      .map((call) => (call.body as { access_token: string }).access_token);
    expect(removedAtPlaid.sort()).toEqual([connections[0]!.accessToken, queued.accessToken].sort());
    const [exchangeRow] = await rowsOf(
      after,
      `SELECT access_token_ciphertext AS ciphertext FROM exchanges WHERE provider_item_id = 'item-in-flight'`,
    );
    expect(after.deps.vault.decrypt(exchangeRow!.ciphertext as string, 'item-in-flight')).toBe(inFlightToken);
    expect(await tokensByKey(after)).toEqual({ [keyIdOf(newKey)]: 3 });
  });

  it('when a run is stopped after its first batch, then the next run re-encrypts only what is left and finishes', async () => {
    const before = await start([oldKey]);
    const user = uniqueUserId('resume');
    for (const institution of ['ins_109508', 'ins_109509', 'ins_109510', 'ins_109511', 'ins_109512']) {
      await connectInstitution(before, user, institution);
    }
    await before.close();
    started = [];

    const interrupted: ServiceContext = await start([newKey, oldKey], {
      env: { TOKEN_REENCRYPT_BATCH_SIZE: '2' },
      hooks: {
        // As an instance shutting down mid-run: stop() ends the run where it is.
        afterReencryptionBatch: async () => void interrupted.deps.tokenReencryption.stop('test: stopped'),
      },
    });
    const first = await reencryptToEnd(interrupted);

    expect(first).toMatchObject({
      state: 'failed',
      total: 5,
      reencrypted: 2,
      remaining: null,
      failure: 'test: stopped',
    });
    expect(await tokensByKey(interrupted)).toEqual({ [keyIdOf(oldKey)]: 3, [keyIdOf(newKey)]: 2 });

    const next = await start([newKey, oldKey], { env: { TOKEN_REENCRYPT_BATCH_SIZE: '2' } });
    const second = await reencryptToEnd(next);

    expect(second).toMatchObject({ state: 'done', total: 3, reencrypted: 3, remaining: 0 });
    expect(await tokensByKey(next)).toEqual({ [keyIdOf(newKey)]: 5 });
  });

  it('when a row changes between a batch read and its write, then the change is kept and the row is re-encrypted from it', async () => {
    const before = await start([oldKey]);
    const user = uniqueUserId('concurrent');
    const changed = await connectInstitution(before, user, 'ins_109508');
    await connectInstitution(before, user, 'ins_109509');
    await before.close();
    started = [];
    // What a concurrent writer stores meanwhile: another token, under the old key.
    const oldVault = new TokenVault([Buffer.from(oldKey, 'base64')], Buffer.from(hmacKey, 'base64'));
    const concurrentToken = `access-sandbox-${randomUUID()}`;
    let writes = 0;
    const service: ServiceContext = await start([newKey, oldKey], {
      hooks: {
        beforeReencryptionWrite: async (table) => {
          writes += 1;
          if (table !== 'connections' || writes > 1) return;
          await rowsOf(
            service,
            `UPDATE connections SET access_token_ciphertext = $2 WHERE provider_item_id = $1 RETURNING id`,
            [changed.itemId, oldVault.encrypt(concurrentToken, changed.itemId)],
          );
        },
      },
    });

    const finished = await reencryptToEnd(service);

    expect(finished).toMatchObject({ state: 'done', total: 2, reencrypted: 2, deferred: 1, remaining: 0 });
    const rows = await storedConnections(service);
    expect(rows.map((row) => row.key_id)).toEqual([keyIdOf(newKey), keyIdOf(newKey)]);
    const changedRow = rows.find((row) => row.item === changed.itemId)!;
    expect(service.deps.vault.decrypt(changedRow.ciphertext as string, changed.itemId)).toBe(concurrentToken);
  });

  it('when a row is locked by a transaction during the run, then the run never waits for it, and a run after its release finishes', async () => {
    const before = await start([oldKey]);
    const user = uniqueUserId('locked');
    const held = await connectInstitution(before, user, 'ins_109508');
    await connectInstitution(before, user, 'ins_109509');
    await before.close();
    started = [];
    const service = await start([newKey, oldKey]);
    const client = await service.deps.pool.connect();
    client.on('error', () => undefined);
    try {
      await client.query('BEGIN');
      await client.query(`SELECT id FROM connections WHERE provider_item_id = $1 FOR UPDATE`, [held.itemId]);

      const whileHeld = await reencryptToEnd(service);

      expect(whileHeld).toMatchObject({ state: 'done', total: 2, reencrypted: 1, remaining: 1 });
      expect(whileHeld.deferred).toBeGreaterThanOrEqual(1);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }

    const afterRelease = await reencryptToEnd(service);

    expect(afterRelease).toMatchObject({ state: 'done', total: 1, reencrypted: 1, remaining: 0 });
    expect(await tokensByKey(service)).toEqual({ [keyIdOf(newKey)]: 2 });
  });

  it('when a run is in progress, then a second POST is 409 TOKEN_REENCRYPTION_RUNNING naming it, and an unknown run is 404', async () => {
    const before = await start([oldKey]);
    await connectInstitution(before, uniqueUserId('running'), 'ins_109508');
    await before.close();
    started = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const service = await start([newKey, oldKey], { hooks: { beforeReencryptionWrite: () => gate } });

    const first = await startTokenReencryption(service);
    const second = await startTokenReencryption(service);
    release();
    const unknown = await getTokenReencryption(service, randomUUID());

    expect(first.status).toBe(202);
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ code: 'TOKEN_REENCRYPTION_RUNNING' });
    expect(second.body.detail).toContain(first.body.run_id);
    expect(unknown.status).toBe(404);
    expect((await finishedTokenReencryption(service, first.body.run_id as string)).body.state).toBe('done');
  });

  it('when a stored token is under a key no longer configured, then the run leaves it, counts it unreadable and logs its Item, never the token', async () => {
    const lostKey = newKeyText();
    const before = await start([lostKey]);
    const user = uniqueUserId('unreadable');
    const lost = await connectInstitution(before, user, 'ins_109508');
    await before.close();
    started = [];
    const service = await start([newKey, oldKey]);

    const finished = await reencryptToEnd(service);

    expect(finished).toMatchObject({ state: 'done', total: 1, reencrypted: 0, unreadable: 1, remaining: 1 });
    expect(await tokensByKey(service)).toEqual({ [keyIdOf(lostKey)]: 1 });
    const line = service.logs.find((entry) => entry.includes('cannot be decrypted'));
    expect(line).toContain(lost.itemId);
    expect(line).toContain(keyIdOf(lostKey));
    expect(service.logs.join('\n')).not.toContain(lost.accessToken);
  });

  it('when `npm run reencrypt-tokens` runs its compiled script with the new key first, then it re-encrypts every token and exits 0', async () => {
    const before = await start([oldKey]);
    await connectInstitution(before, uniqueUserId('script'), 'ins_109508');
    await connectInstitution(before, uniqueUserId('script'), 'ins_109509');
    await before.close();
    started = [];
    const script = projectPath('dist', 'cli', 'reencrypt-tokens.js');
    const env = {
      ...testEnvironment({ TOKEN_ENCRYPTION_KEY: `${newKey},${oldKey}`, TOKEN_HMAC_KEY: hmacKey }),
      PATH: process.env.PATH ?? '',
      DATABASE_URL: database.url,
      LOG_LEVEL: 'silent',
    };

    const { stdout } = await run(process.execPath, [script], { env: { ...env, ...poolerEnvironment(env) } });

    expect(stdout).toMatch(/re-encrypted 2\/2 under key [0-9a-f]{8}; 0 left under other keys/);
    expect(stdout).toContain(keyIdOf(newKey));
    const service = await start([newKey]);
    expect(await tokensByKey(service)).toEqual({ [keyIdOf(newKey)]: 2 });
  });
});
