import { withTransaction } from '../../db/transactions';
import { notFound } from '../../errors';
import type { TellerProvider } from '../../provider/teller-provider';
import { listAccountIdsOfConnection, listAccountsOfConnection } from '../../repository/accounts-repository';
import { findConnection, lockConnection, replaceAccessToken } from '../../repository/connections-repository';
import { recordEvent } from '../../repository/events-repository';
import { connectedAccountsOf, eventFieldsOf, type ConnectedAccount } from './connection';
import { addNewAccounts, applySignal } from './connection-changes';
import type { RefreshDependencies } from './connection-refresh';
import { callProvider } from './provider-calls';

/**
 * Teller Connect repaired one of the user's stored enrollments (opened with its `enrollmentId`,
 * https://teller.io/docs/guides/connect, "Repairing Disconnected Enrollments") and the website exchanged
 * what Connect handed back: the same enrollment, so the same connection, as Plaid's update mode keeps its
 * Item. The connection takes the access token Connect answered with (Teller says "the same accessToken
 * continues to work", but one handed back is the one to use), the accounts Teller lists that it lacks, and
 * the status `good`: Connect only succeeds once the user is logged in at the bank again. Answers the
 * connection's accounts as the website gets them.
 */
export async function storeRepairedEnrollment(
  deps: Pick<RefreshDependencies, 'pool' | 'websiteNotifications'>,
  teller: TellerProvider,
  connection: { id: string; subscriptionUserId: string; itemId: string },
  token: { accessToken: string; ciphertext: string; fingerprint: Buffer },
): Promise<ConnectedAccount[]> {
  const { pool } = deps;
  const observedAt = new Date();
  // Each of Teller's accounts is a BankAccount too: stored as the service stores any account.
  const accounts = await callProvider(
    pool,
    'GET /accounts',
    { subscriptionUserId: connection.subscriptionUserId, itemId: connection.itemId },
    () => teller.listAccounts(token.accessToken),
  );
  await withTransaction(pool, async (client) => {
    const locked = await lockConnection(client, { id: connection.id });
    if (!locked) throw notFound('The connection was removed while its enrollment was being repaired.');
    const tokenReplaced = await replaceAccessToken(client, locked.id, token);
    const known = new Set(await listAccountIdsOfConnection(client, locked.id));
    const added = await addNewAccounts(client, locked, known, accounts);
    await applySignal(
      client,
      deps.websiteNotifications,
      locked,
      { kind: 'repaired' },
      {
        observedAt,
        source: 'refresh',
      },
    );
    await recordEvent(client, {
      ...eventFieldsOf(locked),
      kind: 'connection_refreshed',
      detail: { item_id: locked.itemId, accounts_added: added, token_replaced: tokenReplaced },
    });
  });
  const repaired = await findConnection(pool, { id: connection.id });
  if (!repaired) throw notFound('The connection was removed while its enrollment was being repaired.');
  return connectedAccountsOf(repaired, await listAccountsOfConnection(pool, repaired.id), token.accessToken);
}
