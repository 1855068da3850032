import type { Pool, PoolClient } from 'pg';

export type Queryable = Pool | PoolClient;

export interface ExchangeRow {
  state: 'claimed' | 'exchanged' | 'completed' | 'abandoned';
  subscription_user_id: string;
  app_name: string;
  institution_id: string | null;
  failure_code: string | null;
  claim_is_stale: boolean;
}

export interface InstitutionRow {
  id: string;
  subscription_user_id: string;
  app_name: string;
  provider_item_id: string;
  provider_institution_id: string;
  institution_name: string;
  access_token_ciphertext: string;
}

export interface AccountRow {
  provider_account_id: string;
  name: string;
  official_name: string | null;
  mask: string | null;
  type: string;
  subtype: string | null;
  provider_institution_id: string;
  institution_name: string;
  provider_item_id: string;
  access_token_ciphertext: string;
}

export interface NewAccount {
  providerAccountId: string;
  name: string;
  officialName: string | null;
  mask: string | null;
  type: string;
  subtype: string | null;
}

/** The exchange of one public token; `claim_is_stale` says whether its claim may be taken over. */
export async function findExchange(
  db: Queryable,
  fingerprint: Buffer,
  staleAfterSeconds: number,
): Promise<ExchangeRow | undefined> {
  const { rows } = await db.query<ExchangeRow>(
    `SELECT state, subscription_user_id, app_name, institution_id, failure_code,
            (state = 'claimed' AND updated_at < now() - make_interval(secs => $2)) AS claim_is_stale
       FROM exchanges WHERE public_token_fingerprint = $1`,
    [fingerprint, staleAfterSeconds],
  );
  return rows[0];
}

/** The holder of an exchange's claim: every later state change names it. */
export interface ExchangeClaim {
  fingerprint: Buffer;
  claimId: string;
}

/**
 * Claims the exchange of one public token. Only one caller gets a claim; a claim whose holder
 * vanished before calling the provider (still 'claimed' after `staleAfterSeconds`) can be taken over,
 * and the new holder's claim id then replaces the old one.
 */
export async function claimExchange(
  db: Queryable,
  claim: {
    fingerprint: Buffer;
    claimId: string;
    subscriptionUserId: string;
    appName: string;
    staleAfterSeconds: number;
  },
): Promise<ExchangeClaim | undefined> {
  const { rowCount } = await db.query(
    `INSERT INTO exchanges (public_token_fingerprint, subscription_user_id, app_name, state, claim_id)
     VALUES ($1, $2, $3, 'claimed', $5)
     ON CONFLICT (public_token_fingerprint) DO UPDATE
       SET subscription_user_id = EXCLUDED.subscription_user_id, app_name = EXCLUDED.app_name,
           claim_id = EXCLUDED.claim_id, claimed_at = now(), updated_at = now()
       WHERE exchanges.state = 'claimed' AND exchanges.updated_at < now() - make_interval(secs => $4)`,
    [claim.fingerprint, claim.subscriptionUserId, claim.appName, claim.staleAfterSeconds, claim.claimId],
  );
  return rowCount === 1 ? { fingerprint: claim.fingerprint, claimId: claim.claimId } : undefined;
}

/** Gives a claim back when the provider made nothing; only its holder can, and only before the exchange. */
export async function releaseExchangeClaim(db: Queryable, claim: ExchangeClaim): Promise<boolean> {
  const { rowCount } = await db.query(
    `DELETE FROM exchanges WHERE public_token_fingerprint = $1 AND state = 'claimed' AND claim_id = $2`,
    [claim.fingerprint, claim.claimId],
  );
  return rowCount === 1;
}

/** Keeps a new access token the moment the provider returns it; false when the claim was lost. */
export async function recordExchangedToken(
  db: Queryable,
  claim: ExchangeClaim,
  providerItemId: string,
  accessTokenCiphertext: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE exchanges SET state = 'exchanged', provider_item_id = $3, access_token_ciphertext = $4, updated_at = now()
      WHERE public_token_fingerprint = $1 AND state = 'claimed' AND claim_id = $2`,
    [claim.fingerprint, claim.claimId, providerItemId, accessTokenCiphertext],
  );
  return rowCount === 1;
}

/**
 * Ends an exchange that holds its token ('exchanged'), by its claim's holder only. False when the row
 * is no longer this claim's exchanged row (a sweeper abandoned it meanwhile): the caller changes nothing.
 */
export async function finishExchange(
  db: Queryable,
  claim: ExchangeClaim,
  outcome: { state: 'completed'; institutionId: string } | { state: 'abandoned'; failureCode: string },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE exchanges SET state = $3, institution_id = $4, failure_code = $5, access_token_ciphertext = NULL,
                          updated_at = now()
      WHERE public_token_fingerprint = $1 AND claim_id = $2 AND state = 'exchanged'`,
    [
      claim.fingerprint,
      claim.claimId,
      outcome.state,
      outcome.state === 'completed' ? outcome.institutionId : null,
      outcome.state === 'abandoned' ? outcome.failureCode : null,
    ],
  );
  return rowCount === 1;
}

export async function insertInstitution(
  db: Queryable,
  institution: {
    subscriptionUserId: string;
    appName: string;
    providerItemId: string;
    providerInstitutionId: string;
    institutionName: string;
    accessTokenCiphertext: string;
    accessTokenFingerprint: Buffer;
    accountsSignature: string;
  },
): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO institutions (subscription_user_id, app_name, provider_item_id, provider_institution_id,
                               institution_name, access_token_ciphertext, access_token_fingerprint, accounts_signature)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
    [
      institution.subscriptionUserId,
      institution.appName,
      institution.providerItemId,
      institution.providerInstitutionId,
      institution.institutionName,
      institution.accessTokenCiphertext,
      institution.accessTokenFingerprint,
      institution.accountsSignature,
    ],
  );
  return (rows[0] as { id: string }).id;
}

export async function insertAccounts(
  db: Queryable,
  institutionId: string,
  accounts: NewAccount[],
): Promise<void> {
  await db.query(
    `INSERT INTO accounts (institution_id, provider_account_id, name, official_name, mask, type, subtype)
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])`,
    [
      institutionId,
      accounts.map((account) => account.providerAccountId),
      accounts.map((account) => account.name),
      accounts.map((account) => account.officialName),
      accounts.map((account) => account.mask),
      accounts.map((account) => account.type),
      accounts.map((account) => account.subtype),
    ],
  );
}

export async function listAccountsOfInstitution(db: Queryable, institutionId: string): Promise<AccountRow[]> {
  const { rows } = await db.query<AccountRow>(
    `SELECT a.provider_account_id, a.name, a.official_name, a.mask, a.type, a.subtype,
            i.provider_institution_id, i.institution_name, i.provider_item_id, i.access_token_ciphertext
       FROM accounts a JOIN institutions i ON i.id = a.institution_id
      WHERE i.id = $1
      ORDER BY a.id`,
    [institutionId],
  );
  return rows;
}

export async function findConnectionBySignature(
  db: Queryable,
  subscriptionUserId: string,
  providerInstitutionId: string,
  accountsSignature: string,
): Promise<{ id: string } | undefined> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM institutions
      WHERE subscription_user_id = $1 AND provider_institution_id = $2 AND accounts_signature = $3`,
    [subscriptionUserId, providerInstitutionId, accountsSignature],
  );
  return rows[0];
}

export async function findInstitutionByTokenForUser(
  db: Queryable,
  accessTokenFingerprint: Buffer,
  subscriptionUserId: string,
  options: { lock: boolean },
): Promise<InstitutionRow | undefined> {
  const { rows } = await db.query<InstitutionRow>(
    `SELECT id, subscription_user_id, app_name, provider_item_id, provider_institution_id, institution_name,
            access_token_ciphertext
       FROM institutions
      WHERE access_token_fingerprint = $1 AND subscription_user_id = $2
      ${options.lock ? 'FOR UPDATE' : ''}`,
    [accessTokenFingerprint, subscriptionUserId],
  );
  return rows[0];
}

export async function findAccountOwner(
  db: Queryable,
  providerAccountId: string,
  subscriptionUserId: string,
): Promise<{ institution_id: string } | undefined> {
  const { rows } = await db.query<{ institution_id: string }>(
    `SELECT a.institution_id FROM accounts a JOIN institutions i ON i.id = a.institution_id
      WHERE a.provider_account_id = $1 AND i.subscription_user_id = $2`,
    [providerAccountId, subscriptionUserId],
  );
  return rows[0];
}

/** Serializes every change to one connection's accounts; see removeAccount. */
export async function lockInstitution(
  db: Queryable,
  institutionId: string,
): Promise<InstitutionRow | undefined> {
  const { rows } = await db.query<InstitutionRow>(
    `SELECT id, subscription_user_id, app_name, provider_item_id, provider_institution_id, institution_name,
            access_token_ciphertext
       FROM institutions WHERE id = $1 FOR UPDATE`,
    [institutionId],
  );
  return rows[0];
}

export async function deleteAccount(
  db: Queryable,
  providerAccountId: string,
  institutionId: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `DELETE FROM accounts WHERE provider_account_id = $1 AND institution_id = $2`,
    [providerAccountId, institutionId],
  );
  return rowCount === 1;
}

export async function countAccounts(db: Queryable, institutionId: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM accounts WHERE institution_id = $1`,
    [institutionId],
  );
  return (rows[0] as { count: number }).count;
}

/** Deletes the connection and, through the foreign key, its accounts; returns how many accounts went. */
export async function deleteInstitution(db: Queryable, institutionId: string): Promise<number> {
  const { rows } = await db.query<{ count: number }>(
    `WITH removed AS (DELETE FROM accounts WHERE institution_id = $1 RETURNING 1),
          gone AS (DELETE FROM institutions WHERE id = $1 RETURNING 1)
     SELECT (SELECT count(*) FROM removed)::int AS count`,
    [institutionId],
  );
  return (rows[0] as { count: number }).count;
}
