import { plaidClient } from 'test-kit';
import {
  connectInstitution,
  connectionStatus,
  createLinkToken,
  exchange,
  itemExists,
  refreshConnection,
} from '../support/requests';
import { PLAID_SECRET, problemShape, rowsOf, serviceForFile, uniqueUserId } from '../support/service';
import { connectionsOfUser, removalsOfItem } from '../support/state-probes';

/**
 * After update mode, Link hands the website a public token for the Item it already has. Exchanging it
 * is a mistake Plaid's docs warn about, but an easy one: it must never cost the user their connection.
 */
describe('exchanging the public token of an update-mode Link session', () => {
  const service = serviceForFile();

  /** A stored connection, and the public token Link gives after repairing it in update mode. */
  async function repairInUpdateMode() {
    const user = uniqueUserId('user-66');
    const { accessToken, accountIds } = await connectInstitution(service, user);
    const itemId = service.emulator.items().find((item) => item.access_token === accessToken)!.item_id;
    const link = await createLinkToken(service, {
      subscription_user_id: user,
      app_name: 'Budget App',
      access_token: accessToken,
    });
    expect(link.status).toBe(200);
    const completed = service.emulator.completeLink(link.body.link_token as string);
    service.emulator.clearCalls();
    return { user, accessToken, accountIds, itemId, publicToken: completed.public_token };
  }

  const outboxRowsOf = (itemId: string) => removalsOfItem(service, itemId);

  it('when the owner exchanges it, then 200 with the connection’s accounts, as a refresh answers, and the Item stays alive', async () => {
    const { user, accessToken, accountIds, itemId, publicToken } = await repairInUpdateMode();

    const response = await exchange(service, { public_token: publicToken, subscription_user_id: user });
    await service.deps.outbox.runOnce();

    expect(response.status).toBe(200);
    expect(response.body.accounts).toHaveLength(accountIds.length);
    expect(response.body.accounts[0]).toMatchObject({ item_id: itemId, status: 'good' });
    expect(itemExists(service, accessToken)).toBe(true);
    expect(service.emulator.calls('/item/remove')).toEqual([]);
    expect(await outboxRowsOf(itemId)).toEqual([]);
    expect(
      await rowsOf(service, `SELECT subscription_user_id FROM connections WHERE provider_item_id = $1`, [
        itemId,
      ]),
    ).toEqual([{ subscription_user_id: user }]);
    // The connection still works: Plaid answers for its token.
    const item = await plaidClient(service.emulator.url, {
      clientId: 'test-client',
      secret: PLAID_SECRET,
    }).itemGet({ access_token: accessToken });
    expect(item.data.item.item_id).toBe(itemId);

    const replay = await exchange(service, { public_token: publicToken, subscription_user_id: user });
    expect(replay.status).toBe(200);
    expect(
      replay.body.accounts.map((account: { provider_account_id: string }) => account.provider_account_id),
    ).toEqual(
      response.body.accounts.map((account: { provider_account_id: string }) => account.provider_account_id),
    );
  });

  it('when another user exchanges it, then 404 as for any connection that is not theirs, and the owner keeps a working connection', async () => {
    const { user, accessToken, itemId, publicToken } = await repairInUpdateMode();
    const intruder = uniqueUserId('user-77');

    const response = await exchange(service, { public_token: publicToken, subscription_user_id: intruder });
    await service.deps.outbox.runOnce();

    expect(response.status).toBe(404);
    expect(response.body).toEqual({ ...problemShape, status: 404, code: 'NOT_FOUND' });
    expect(response.text).not.toMatch(/access-sandbox/);
    expect(itemExists(service, accessToken)).toBe(true);
    expect(service.emulator.calls('/item/remove')).toEqual([]);
    expect(await outboxRowsOf(itemId)).toEqual([]);
    expect(await connectionsOfUser(service, intruder)).toEqual([]);
    const status = await connectionStatus(service, user);
    expect(status.body.connections).toEqual([expect.objectContaining({ item_id: itemId, status: 'good' })]);
    const refreshed = await refreshConnection(service, {
      subscription_user_id: user,
      access_token: accessToken,
    });
    expect(refreshed.status).toBe(200);

    const replay = await exchange(service, { public_token: publicToken, subscription_user_id: intruder });
    expect(replay.status).toBe(404);
  });
});
