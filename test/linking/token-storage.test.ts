import { randomBytes } from 'node:crypto';
import { TokenDecryptionError, TokenVault } from '../../src/crypto/token-vault';
import { PlaidEmulator } from 'plaid-emulator';
import { createTestDatabase, type TestDatabase } from '../support/database';
import { connectInstitution, exchange, removeInstitution } from '../support/requests';
import { PLAID_SECRET, linkPublicToken, rowsOf, startService, uniqueUserId } from '../support/service';

const TOKEN_TEXT = /(access|public|link)-(sandbox|production)-/;

describe('tokens at rest', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(() => database.drop());

  it('when connections are made, replayed, refused and removed, then a raw dump of every table holds no token in plain text', async () => {
    const service = await startService({ database });
    try {
      const user = uniqueUserId();
      const publicToken = linkPublicToken(service);
      const exchanged = await exchange(service, {
        public_token: publicToken,
        subscription_user_id: user,
        app_name: 'Budget',
      });
      await exchange(service, { public_token: publicToken, subscription_user_id: user, app_name: 'Budget' });
      await exchange(service, {
        public_token: linkPublicToken(service),
        subscription_user_id: user,
        app_name: 'Budget',
      });
      const second = await connectInstitution(service, user, 'ins_109512');
      await removeInstitution(service, user, second.accessToken);
      const accessToken = exchanged.body.accounts[0].access_token as string;
      const tables = await rowsOf(
        service,
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`,
      );

      let dump = '';
      for (const { table_name: table } of tables) {
        const rows = await rowsOf(service, `SELECT row_to_json(t)::text AS row FROM "${table as string}" t`);
        dump += rows.map((row) => row.row).join('\n');
      }

      expect(dump).toContain('exchange_completed');
      expect(dump).not.toMatch(TOKEN_TEXT);
      for (const secret of [publicToken, accessToken, second.accessToken]) expect(dump).not.toContain(secret);
      expect(dump).not.toContain(Buffer.from(accessToken).toString('base64'));
    } finally {
      await service.close();
    }
  });

  it('when a new encryption key is put in front, then connections stored under the old key can still be found and removed', async () => {
    const plaid = new PlaidEmulator({ credentials: { clientId: 'test-client', secret: PLAID_SECRET } });
    await plaid.listen(0);
    const oldKey = randomBytes(32).toString('base64');
    const hmacKey = randomBytes(32).toString('base64');
    const before = await startService({
      database,
      emulator: plaid,
      env: { TOKEN_ENCRYPTION_KEY: oldKey, TOKEN_HMAC_KEY: hmacKey },
    });
    const user = uniqueUserId();
    const { accessToken } = await connectInstitution(before, user);
    await before.close();
    const after = await startService({
      database,
      emulator: plaid,
      env: {
        TOKEN_ENCRYPTION_KEY: `${randomBytes(32).toString('base64')},${oldKey}`,
        TOKEN_HMAC_KEY: hmacKey,
      },
    });
    try {
      const removed = await removeInstitution(after, user, accessToken);

      expect(removed.body).toEqual({ success: true, accounts_removed: 12 });
      expect(plaid.items().some((item) => item.access_token === accessToken)).toBe(false);
    } finally {
      await after.close();
      await plaid.close();
    }
  });
});

describe('the token vault', () => {
  const vault = new TokenVault([randomBytes(32)], randomBytes(32));
  const token = 'access-sandbox-11111111-2222-3333-4444-555555555555';

  it('when a token is encrypted twice, then the ciphertexts differ and both decrypt', () => {
    const [first, second] = [vault.encrypt(token, 'item-1'), vault.encrypt(token, 'item-1')];

    expect(first).not.toBe(second);
    expect(vault.decrypt(first, 'item-1')).toBe(token);
    expect(vault.decrypt(second, 'item-1')).toBe(token);
  });

  it('when any byte of the ciphertext changes, or it is read for another row, then decryption fails', () => {
    const sealed = vault.encrypt(token, 'item-1');
    const parts = sealed.split('.');
    const flipped = (index: number) => {
      const bytes = Buffer.from(parts[index]!, 'base64url');
      bytes[0] = bytes[0]! ^ 1;
      return parts.map((part, i) => (i === index ? bytes.toString('base64url') : part)).join('.');
    };

    for (const index of [2, 3, 4])
      expect(() => vault.decrypt(flipped(index), 'item-1')).toThrow(TokenDecryptionError);
    expect(() => vault.decrypt(sealed, 'item-2')).toThrow(TokenDecryptionError);
  });

  it('when the key that wrote a token is no longer configured, then decryption fails clearly', () => {
    const other = new TokenVault([randomBytes(32)], randomBytes(32));

    expect(() => other.decrypt(vault.encrypt(token, 'item-1'), 'item-1')).toThrow(/no key with id/);
  });

  it('when fingerprints are taken, then they depend on the HMAC key only, not on the encryption key', () => {
    const hmacKey = randomBytes(32);
    const [a, b] = [new TokenVault([randomBytes(32)], hmacKey), new TokenVault([randomBytes(32)], hmacKey)];

    expect(a.fingerprint(token).equals(b.fingerprint(token))).toBe(true);
    expect(a.fingerprint(token).equals(vault.fingerprint(token))).toBe(false);
  });
});
