import type { Response } from 'supertest';
import {
  connectInstitution,
  declaredEndpoints,
  eachEndpoint,
  getAdminConnection,
  getAdminUser,
  listAdminAccounts,
  listAdminConnections,
  listReconciliations,
  removeInstitution,
} from '../support/requests';
import { prepareFixture, validRequestFor, type Fixture } from '../support/valid-requests';
import { asAdmin, rowsOf, startService, uniqueUserId, type ServiceContext } from '../support/service';

/** Every endpoint the admin secret may call about the data: the admins' own, and the either-secret reads. */
const ADMIN_ANSWERING = declaredEndpoints(
  (endpoint) =>
    endpoint.access === 'admin' ||
    (endpoint.access === 'any-secret' && !endpoint.tags.includes('Operations')),
);
const TOKEN_TEXT = /(access|public|link)-(sandbox|production)-/;

/**
 * What must never be in an admin's answer: each access token, and what the database keeps of them
 * (ciphertexts, in the connections, exchanges and the outbox, and fingerprints, as hex and base64).
 */
async function storedSecrets(service: ServiceContext, accessTokens: string[]): Promise<string[]> {
  const ciphertexts = await rowsOf(
    service,
    `SELECT access_token_ciphertext AS secret FROM connections
     UNION ALL SELECT access_token_ciphertext FROM outbox WHERE access_token_ciphertext IS NOT NULL
     UNION ALL SELECT access_token_ciphertext FROM exchanges WHERE access_token_ciphertext IS NOT NULL`,
  );
  const fingerprints = await rowsOf(
    service,
    `SELECT access_token_fingerprint AS fingerprint FROM connections`,
  );
  return [
    ...accessTokens,
    ...accessTokens.map((token) => token.slice('access-sandbox-'.length)),
    ...ciphertexts.map((row) => row.secret as string),
    ...ciphertexts.flatMap((row) => (row.secret as string).split('.').filter((part) => part.length >= 16)),
    ...fingerprints.flatMap((row) => {
      const bytes = row.fingerprint as Buffer;
      return [bytes.toString('hex'), bytes.toString('base64'), bytes.toString('base64url')];
    }),
  ];
}

describe('admin answers hold no token', () => {
  let service: ServiceContext;
  let fixture: Fixture;
  /** A connection removed while Plaid fails: its removal (and its token's ciphertext) waits in the outbox. */
  let removedItem: string;
  let removedItemUser: string;
  let accessTokens: string[];

  beforeAll(async () => {
    service = await startService({ env: { RATE_LIMIT_ADMIN_PER_MINUTE: '100000' } });
    fixture = await prepareFixture(service, 'answers');
    const user = uniqueUserId('answers-removed');
    const removed = await connectInstitution(service, user, 'ins_109512');
    service.emulator.injectFault({ path: '/item/remove', status: 500, count: 1_000 });
    await removeInstitution(service, user, removed.accessToken);
    removedItem = removed.itemId;
    removedItemUser = user;
    accessTokens = [fixture.kept, fixture.refreshed, fixture.removed, removed].map(
      (connection) => connection.accessToken,
    );
  });
  afterAll(async () => {
    service.emulator.clearFaults();
    await service.close();
  });

  it('when the endpoints an admin may call are listed from the declarations, then every admin endpoint and /connection-status is among them', () => {
    const operationIds = ADMIN_ANSWERING.map((endpoint) => endpoint.operationId);

    expect(operationIds).toEqual(expect.arrayContaining(['getConnectionStatus', 'listAdminConnections']));
    expect(operationIds).toEqual(
      expect.arrayContaining(
        declaredEndpoints((endpoint) => endpoint.access === 'admin').map((e) => e.operationId),
      ),
    );
  });

  it.each(eachEndpoint(ADMIN_ANSWERING))(
    'when %s answers the admin secret, then no token, ciphertext or fingerprint is in the answer',
    async (_route, endpoint) => {
      const response = await validRequestFor(endpoint)(service, fixture).set(asAdmin);

      expect(response.status).toBe(endpoint.response.status ?? 200);
      const secrets = await storedSecrets(service, accessTokens);
      expect(response.text).not.toMatch(TOKEN_TEXT);
      expect(secrets.filter((secret) => response.text.includes(secret))).toEqual([]);
    },
  );

  it('when every admin list is read whole, exported as NDJSON and CSV, and every Item is viewed, then no answer holds a token, ciphertext or fingerprint', async () => {
    const items = (await rowsOf(service, `SELECT provider_item_id AS item FROM connections`)).map(
      (row) => row.item as string,
    );
    const answers: Response[] = [
      await listAdminAccounts(service, { limit: 1000 }),
      await listAdminConnections(service, { limit: 1000 }),
      await listReconciliations(service, { limit: 1000 }),
      // One export after another: two at once is all the export slots allow.
      await listAdminAccounts(service, {}, { accept: 'application/x-ndjson' }),
      await listAdminAccounts(service, {}, { accept: 'text/csv' }),
      await listAdminConnections(service, {}, { accept: 'application/x-ndjson' }),
      await listAdminConnections(service, {}, { accept: 'text/csv' }),
      // The user views: one with a removal still holding its token in the outbox, one with three connections.
      await getAdminUser(service, fixture.user),
      await getAdminUser(service, removedItemUser),
      ...(await Promise.all([...items, removedItem].map((item) => getAdminConnection(service, item)))),
    ];
    const secrets = await storedSecrets(service, accessTokens);

    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
    expect(secrets.length).toBeGreaterThan(accessTokens.length * 3);
    const removedView = answers[answers.length - 1]!;
    expect(removedView.body.removal).toMatchObject({ state: 'pending' });
    for (const answer of answers) {
      expect(answer.text).not.toMatch(TOKEN_TEXT);
      expect(secrets.filter((secret) => answer.text.includes(secret))).toEqual([]);
    }
  });
});
