import type { Queryable } from './queryable';

/**
 * The access tokens at rest, wherever they are kept: a connection's, an exchange's while it is under way
 * (state `exchanged`), and an Item removal's until it is done. One concern across three tables (as the
 * service's figures are): which key sealed each token (`access_token_key_id`, generated from the
 * ciphertext), and rewriting a ciphertext under another key. Nothing else about those tables is here.
 */
export const TOKEN_TABLES = ['connections', 'exchanges', 'outbox'] as const;
export type TokenTable = (typeof TOKEN_TABLES)[number];

/** How each table names a row as text (the page key), and how text becomes its key again. */
const ROW_KEYS: Record<
  TokenTable,
  { column: string; asText: (column: string) => string; fromText: (text: string) => string }
> = {
  connections: { column: 'id', asText: (column) => `${column}::text`, fromText: (text) => `${text}::bigint` },
  exchanges: {
    column: 'public_token_fingerprint',
    asText: (column) => `encode(${column}, 'hex')`,
    fromText: (text) => `decode(${text}, 'hex')`,
  },
  outbox: { column: 'id', asText: (column) => `${column}::text`, fromText: (text) => `${text}::bigint` },
};

/** Where a table's walk starts: before its first row. */
export const FIRST_ROW_KEY: Record<TokenTable, string> = { connections: '0', exchanges: '', outbox: '0' };

/** One stored token: its row, the Item it is bound to, its ciphertext. */
export interface StoredToken {
  /** The row's key as text (`FIRST_ROW_KEY`'s form): the id, or an exchange's fingerprint in hex. */
  rowKey: string;
  itemId: string;
  ciphertext: string;
}

/**
 * The tokens per key id across the three tables, from their key-id indexes (an index-only scan of the
 * connections', the two others partial: only rows that hold a token). Never a token or ciphertext.
 */
export async function countTokensByKey(db: Queryable): Promise<Record<string, number>> {
  const { rows } = await db.query<{ key_id: string; tokens: number }>(
    `SELECT key_id, sum(n)::int AS tokens FROM (
       SELECT access_token_key_id AS key_id, count(*) AS n FROM connections GROUP BY 1
       UNION ALL
       SELECT access_token_key_id, count(*) FROM exchanges WHERE access_token_key_id IS NOT NULL GROUP BY 1
       UNION ALL
       SELECT access_token_key_id, count(*) FROM outbox WHERE access_token_key_id IS NOT NULL GROUP BY 1
     ) per_table GROUP BY key_id ORDER BY key_id`,
  );
  return Object.fromEntries(rows.map((row) => [row.key_id, row.tokens]));
}

/** Tokens sealed under any key other than `keyId`, across the three tables. */
export async function countTokensNotUnderKey(db: Queryable, keyId: string): Promise<number> {
  const { rows } = await db.query<{ tokens: number }>(
    `SELECT ((SELECT count(*) FROM connections WHERE access_token_key_id <> $1)
           + (SELECT count(*) FROM exchanges WHERE access_token_key_id IS NOT NULL AND access_token_key_id <> $1)
           + (SELECT count(*) FROM outbox WHERE access_token_key_id IS NOT NULL AND access_token_key_id <> $1)
           )::int AS tokens`,
    [keyId],
  );
  return (rows[0] as { tokens: number }).tokens;
}

/** The ids of the keys other than `keyId` that seal tokens in `table` (one scan of its key-id index). */
export async function listKeyIdsOtherThan(
  db: Queryable,
  table: TokenTable,
  keyId: string,
): Promise<string[]> {
  const { rows } = await db.query<{ key_id: string }>(
    `SELECT DISTINCT access_token_key_id AS key_id FROM ${table}
      WHERE access_token_key_id IS NOT NULL AND access_token_key_id <> $1
      ORDER BY 1`,
    [keyId],
  );
  return rows.map((row) => row.key_id);
}

/**
 * The next `limit` tokens of `table` sealed under the key `keyId`, after the row `afterRowKey`, in key
 * order: a range of the key-id index, however few of the table's rows are under that key. A plain read:
 * it takes no lock.
 */
export async function listTokensUnderKey(
  db: Queryable,
  table: TokenTable,
  keyId: string,
  afterRowKey: string,
  limit: number,
): Promise<StoredToken[]> {
  const key = ROW_KEYS[table];
  const { rows } = await db.query<StoredToken>(
    `SELECT ${key.asText(key.column)} AS "rowKey", provider_item_id AS "itemId",
            access_token_ciphertext AS ciphertext
       FROM ${table}
      WHERE access_token_key_id IS NOT NULL AND access_token_key_id = $1 AND ${key.column} > ${key.fromText('$2')}
      ORDER BY access_token_key_id, ${key.column}
      LIMIT $3`,
    [keyId, afterRowKey, limit],
  );
  return rows;
}

/**
 * Replaces each row's ciphertext with its new one, only where the row still holds the ciphertext that was
 * read (a row changed meanwhile is left as it is: never overwritten) and no one holds the row's lock
 * (SKIP LOCKED: live traffic is never waited for, nor made to wait beyond this one statement). Returns
 * the row keys written; the others are for a later pass.
 */
export async function replaceTokens(
  db: Queryable,
  table: TokenTable,
  replacements: { rowKey: string; oldCiphertext: string; newCiphertext: string }[],
): Promise<Set<string>> {
  if (replacements.length === 0) return new Set();
  const key = ROW_KEYS[table];
  const { rows } = await db.query<{ rowKey: string }>(
    `WITH wanted AS (
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) AS w (row_key, old_ciphertext, new_ciphertext)
     ), free AS (
       SELECT t.${key.column} AS row_id, wanted.old_ciphertext, wanted.new_ciphertext
         FROM ${table} t JOIN wanted ON t.${key.column} = ${key.fromText('wanted.row_key')}
        WHERE t.access_token_ciphertext = wanted.old_ciphertext
          FOR UPDATE OF t SKIP LOCKED
     )
     UPDATE ${table} t SET access_token_ciphertext = free.new_ciphertext
       FROM free
      WHERE t.${key.column} = free.row_id AND t.access_token_ciphertext = free.old_ciphertext
     RETURNING ${key.asText(`t.${key.column}`)} AS "rowKey"`,
    [
      replacements.map((replacement) => replacement.rowKey),
      replacements.map((replacement) => replacement.oldCiphertext),
      replacements.map((replacement) => replacement.newCiphertext),
    ],
  );
  return new Set(rows.map((row) => row.rowKey));
}
