import { signAccounts } from '../../src/domain/connections/connection';
import type { ServiceContext } from './service';

/** A Teller connection stored for a test: what the website and the emulator know it by. */
export interface StoredTellerConnection {
  /** The enrollment's id: the connection's `item_id`. */
  itemId: string;
  accessToken: string;
  /** Teller's account ids, in the order Teller lists them (and the rows were stored). */
  accountIds: string[];
  institutionId: string;
}

/**
 * A user finishing Teller Connect at the emulator (a new enrollment), and the connection stored as an
 * exchange stores one: the enrollment's accounts as `GET /accounts` lists them, its token sealed by the
 * service's vault (bound to the enrollment id) with its fingerprint, the accounts' signature, provider
 * `teller`. One INSERT per table, so the database's triggers (account counts, stats tallies) see it as
 * they see an exchange's. Stands in for Teller's exchange until it lands; a test may then call it.
 */
export async function storeTellerConnection(
  service: Pick<ServiceContext, 'teller' | 'deps'>,
  connection: { subscriptionUserId: string; appName?: string; institution?: string },
): Promise<StoredTellerConnection> {
  const teller = service.deps.teller;
  if (!service.teller || !teller) throw new Error('storeTellerConnection needs a service with Teller on');
  const success = service.teller.completeConnect({
    nonce: 'x',
    ...(connection.institution ? { institution: connection.institution } : {}),
  });
  const itemId = success.enrollment.id;
  const accounts = await teller.provider.listAccounts(success.accessToken);
  const institution = accounts[0]!.institution;
  const { vault, pool } = service.deps;
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO connections (subscription_user_id, app_name, provider, provider_item_id, institution_id,
                                institution_name, access_token_ciphertext, access_token_fingerprint,
                                accounts_signature)
       VALUES ($1, $2, 'teller', $3, $4, $5, $6, $7, $8) RETURNING id`,
      [
        connection.subscriptionUserId,
        connection.appName ?? 'Budget App',
        itemId,
        institution.id,
        institution.name,
        vault.encrypt(success.accessToken, itemId),
        vault.fingerprint(success.accessToken),
        signAccounts(institution.id, accounts),
      ],
    );
    await client.query(
      `INSERT INTO accounts (connection_id, provider_account_id, name, official_name, mask, type, subtype)
       SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])`,
      [
        rows[0]!.id,
        accounts.map((account) => account.providerAccountId),
        accounts.map((account) => account.name),
        accounts.map((account) => account.officialName),
        accounts.map((account) => account.mask),
        accounts.map((account) => account.type),
        accounts.map((account) => account.subtype),
      ],
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
  return {
    itemId,
    accessToken: success.accessToken,
    accountIds: accounts.map((account) => account.providerAccountId),
    institutionId: institution.id,
  };
}
