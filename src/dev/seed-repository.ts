import type { Queryable } from '../repository/queryable';

export interface SeedConnections {
  users: string[];
  apps: string[];
  items: string[];
  institutionIds: string[];
  names: string[];
  ciphertexts: string[];
  fingerprints: Buffer[];
  signatures: string[];
  createdAt: Date[];
}

export interface SeedAccounts {
  connection: string[];
  providerId: string[];
  name: string[];
  officialName: (string | null)[];
  mask: string[];
  type: string[];
  subtype: string[];
  createdAt: Date[];
}

export async function findLastConnectionId(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ id: string | null }>('SELECT max(id)::text AS id FROM connections');
  return rows[0]?.id ?? '0';
}

/** One statement per batch; returns the new row ids by provider Item id. */
export async function insertSeedConnections(
  db: Queryable,
  batch: SeedConnections,
): Promise<Map<string, { id: string; created_at: Date }>> {
  const { rows } = await db.query<{ id: string; provider_item_id: string; created_at: Date }>(
    `INSERT INTO connections (subscription_user_id, app_name, provider_item_id, institution_id,
                               institution_name, access_token_ciphertext, access_token_fingerprint,
                               accounts_signature, created_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[],
                          $8::text[], $9::timestamptz[])
     RETURNING id, provider_item_id, created_at`,
    [
      batch.users,
      batch.apps,
      batch.items,
      batch.institutionIds,
      batch.names,
      batch.ciphertexts,
      batch.fingerprints,
      batch.signatures,
      batch.createdAt,
    ],
  );
  return new Map(rows.map((row) => [row.provider_item_id, row]));
}

export async function insertSeedAccounts(db: Queryable, batch: SeedAccounts): Promise<void> {
  await db.query(
    `INSERT INTO accounts (connection_id, provider_account_id, name, official_name, mask, type, subtype, created_at)
     SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                          $8::timestamptz[])`,
    [
      batch.connection,
      batch.providerId,
      batch.name,
      batch.officialName,
      batch.mask,
      batch.type,
      batch.subtype,
      batch.createdAt,
    ],
  );
}

/** Each seeded connection gets the events a real one leaves: two link tokens and an exchange. */
export async function insertSeedEvents(db: Queryable, afterConnectionId: string): Promise<void> {
  await db.query(
    `INSERT INTO events (kind, occurred_at, subscription_user_id, app_name, institution_id)
     SELECT kind, created_at - (offset_minutes * interval '1 minute'), subscription_user_id, app_name,
            institution_id
       FROM connections
      CROSS JOIN (VALUES ('exchange_completed', 0), ('link_token_created', 2), ('link_token_created', 30))
                 AS e(kind, offset_minutes)
      WHERE id > $1`,
    [afterConnectionId],
  );
  // What autovacuum would reach soon after a real load: statistics and the visibility map.
  await db.query('VACUUM ANALYZE connections');
  await db.query('VACUUM ANALYZE accounts');
  await db.query('VACUUM ANALYZE events');
}

export async function findLastAccountId(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ id: string | null }>('SELECT max(id)::text AS id FROM accounts');
  return rows[0]?.id ?? '0';
}

export async function findAnySubscriptionUser(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT subscription_user_id AS id FROM connections ORDER BY id DESC LIMIT 1',
  );
  return rows[0]?.id ?? '';
}

/** How many accounts a database holds: a benchmark reusing a seeded database reports it. */
export async function countSeededAccounts(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM accounts');
  return rows[0]?.n ?? 0;
}
