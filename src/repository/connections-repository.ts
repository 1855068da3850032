import type { Pool, PoolClient } from 'pg';

export type Queryable = Pool | PoolClient;

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
