import { buildWebhookDelivery } from 'teller-emulator';
import { signAccounts } from '../../src/domain/connections/connection';
import { insertAccounts } from '../../src/repository/accounts-repository';
import type { Test } from 'supertest';
import { call, sendRaw, type Caller } from './requests';
import { TELLER_WEBHOOK_SECRET, uniqueUserId, type ServiceContext } from './service';

/** A Teller connection as the service stores it, and what Connect handed over for it. */
export interface StoredTellerConnection {
  user: string;
  /** The enrollment: the connection's `item_id`. */
  enrollmentId: string;
  accessToken: string;
  accountIds: string[];
  connectionId: string;
}

/**
 * A user enrolled at the service's Teller emulator (Teller Connect completed, its accounts listed) and
 * stored as a Teller connection, written as the exchange writes one: the connection row (token encrypted
 * and fingerprinted by the service's vault) and its accounts through the repository's insert. It stands in
 * for the Teller exchange until that lands; a test using it can then link through the exchange instead.
 * The emulator's call log is cleared afterwards.
 */
export async function storeTellerConnection(
  service: Pick<ServiceContext, 'deps' | 'teller'>,
  options: { user?: string; institution?: string; appName?: string } = {},
): Promise<StoredTellerConnection> {
  const teller = service.teller;
  const access = service.deps.teller;
  if (!teller || !access)
    throw new Error('storeTellerConnection needs a service started with { teller: true }');
  const user = options.user ?? uniqueUserId('teller-user');
  const connected = teller.completeConnect({ nonce: 'x', institution: options.institution });
  const enrollmentId = connected.enrollment.id;
  const accounts = await access.provider.listAccounts(connected.accessToken);
  const institution = accounts[0]!.institution;
  const { vault, pool } = service.deps;
  const client = await pool.connect();
  let connectionId: string;
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO connections (subscription_user_id, app_name, provider_item_id, institution_id, institution_name,
                                access_token_ciphertext, access_token_fingerprint, accounts_signature, provider)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'teller') RETURNING id`,
      [
        user,
        options.appName ?? 'Budget App',
        enrollmentId,
        institution.id,
        institution.name,
        vault.encrypt(connected.accessToken, enrollmentId),
        vault.fingerprint(connected.accessToken),
        signAccounts(institution.id, accounts),
      ],
    );
    connectionId = String(rows[0]!.id);
    await insertAccounts(client, connectionId, accounts);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
  teller.clearCalls();
  return {
    user,
    enrollmentId,
    accessToken: connected.accessToken,
    accountIds: accounts.map((account) => account.providerAccountId),
    connectionId,
  };
}

/** A webhook event as Teller sends one, signed with TELLER_WEBHOOK_SECRET now unless told otherwise. */
export function tellerDelivery(
  event: { type: string; payload?: Record<string, unknown>; id?: string; timestamp?: string },
  options: { secrets?: readonly string[]; signedAt?: number } = {},
) {
  return buildWebhookDelivery(event, { ...options, secrets: options.secrets ?? [TELLER_WEBHOOK_SECRET] });
}

/** POST /webhooks/teller with these exact bytes and this Teller-Signature (none when undefined). */
export function postTellerWebhook(caller: Caller, raw: string, signature: string | undefined): Test {
  const pending = sendRaw(call(caller, 'receiveTellerWebhook'), raw);
  return signature === undefined ? pending : pending.set('Teller-Signature', signature);
}
