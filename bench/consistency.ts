import type { Pool } from 'pg';

/**
 * Every SQL statement of the bench lives here, so that a rename in the schema is a change to the
 * names below and nothing else.
 */
const CONNECTIONS = 'connections';
const ACCOUNT_CONNECTION_ID = 'connection_id';
// The outbox also carries notifications to the website; an Item's removal is one kind of its rows.
const ITEM_REMOVAL = "kind = 'provider_item_remove'";
// Both removal kinds the removal worker drains: a whole Item (enrollment), or one account of it.
const ANY_REMOVAL = "kind IN ('provider_item_remove', 'provider_account_remove')";

const BROKEN_INVARIANTS_SQL = `
  SELECT 'account whose connection is gone' AS problem, count(*)::int AS count
    FROM accounts a
   WHERE NOT EXISTS (SELECT 1 FROM ${CONNECTIONS} c WHERE c.id = a.${ACCOUNT_CONNECTION_ID})
  UNION ALL
  SELECT 'account_count differs from the accounts rows', count(*)::int
    FROM ${CONNECTIONS} c
   WHERE c.account_count <> (SELECT count(*) FROM accounts a WHERE a.${ACCOUNT_CONNECTION_ID} = c.id)
  UNION ALL
  SELECT 'stored connection without accounts', count(*)::int
    FROM ${CONNECTIONS} c
   WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.${ACCOUNT_CONNECTION_ID} = c.id)
  UNION ALL
  SELECT 'stored connection whose Item is queued for removal', count(*)::int
    FROM ${CONNECTIONS} c
   WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.provider_item_id = c.provider_item_id AND o.${ITEM_REMOVAL})
  UNION ALL
  SELECT 'abandoned exchange whose connection is stored', count(*)::int
    FROM exchanges e
   WHERE e.state = 'abandoned'
     AND EXISTS (SELECT 1 FROM ${CONNECTIONS} c WHERE c.provider_item_id = e.provider_item_id)
  UNION ALL
  SELECT 'completed exchange pointing nowhere', count(*)::int
    FROM exchanges e
   WHERE e.state = 'completed' AND e.connection_id IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM ${CONNECTIONS} c WHERE c.id = e.connection_id)`;

// $1: the provider whose Items (Teller: enrollments) are compared.
const STORED_ITEMS_SQL = `SELECT provider_item_id FROM ${CONNECTIONS} WHERE provider = $1`;

// An Item whose removal is queued but not done, or whose exchange reached the provider and is not yet stored.
const PENDING_ITEMS_SQL = `
  SELECT provider_item_id FROM outbox WHERE state <> 'done' AND ${ITEM_REMOVAL} AND provider = $1
  UNION
  SELECT provider_item_id FROM exchanges
   WHERE state = 'exchanged' AND provider_item_id IS NOT NULL AND provider = $1`;

const EXCHANGES_IN_FLIGHT_SQL = `SELECT count(*)::int AS count FROM exchanges WHERE state IN ('claimed', 'exchanged')`;

export interface DatabaseCounts {
  connections: number;
  accounts: number;
  pendingRemovals: number;
  deadRemovals: number;
}

const COUNTS_SQL = `
  SELECT (SELECT count(*)::int FROM ${CONNECTIONS}) AS connections,
         (SELECT count(*)::int FROM accounts) AS accounts,
         (SELECT count(*)::int FROM outbox WHERE state = 'pending' AND ${ANY_REMOVAL}) AS "pendingRemovals",
         (SELECT count(*)::int FROM outbox WHERE state = 'dead' AND ${ANY_REMOVAL}) AS "deadRemovals"`;

/**
 * The broken invariants between the database and the provider's Items; an empty list is a consistent
 * state. The database is read in one snapshot before the Items are listed: a removal finishing in
 * between then shows as a pending row whose Item is gone, which is allowed, never the reverse.
 * Call it once no request is in flight.
 */
export async function findInconsistencies(
  pool: Pool,
  listProviderItemIds: () => Promise<string[]>,
  provider: 'plaid' | 'teller' = 'plaid',
) {
  const client = await pool.connect();
  client.on('error', () => undefined);
  let broken: { problem: string; count: number }[];
  let stored: Set<string>;
  let pending: Set<string>;
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    broken = (await client.query<{ problem: string; count: number }>(BROKEN_INVARIANTS_SQL)).rows;
    const storedRows = await client.query<{ provider_item_id: string }>(STORED_ITEMS_SQL, [provider]);
    const pendingRows = await client.query<{ provider_item_id: string }>(PENDING_ITEMS_SQL, [provider]);
    await client.query('COMMIT');
    stored = new Set(storedRows.rows.map((row) => row.provider_item_id));
    pending = new Set(pendingRows.rows.map((row) => row.provider_item_id));
  } finally {
    client.release();
  }
  const providerItems = new Set(await listProviderItemIds());

  const problems = broken.filter((row) => row.count > 0).map((row) => `${row.problem}: ${row.count}`);
  const orphans = [...providerItems].filter((itemId) => !stored.has(itemId) && !pending.has(itemId));
  if (orphans.length > 0) {
    problems.push(`Items at the provider that are neither stored nor pending removal: ${orphans.length}`);
  }
  const missing = [...stored].filter((itemId) => !providerItems.has(itemId));
  if (missing.length > 0)
    problems.push(`stored connections without an Item at the provider: ${missing.length}`);
  return { problems, providerItems: providerItems.size };
}

/** Exchanges between their claim and their stored connection: the state is settled when this is 0. */
export async function countExchangesInFlight(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ count: number }>(EXCHANGES_IN_FLIGHT_SQL);
  return rows[0]?.count ?? 0;
}

export async function readDatabaseCounts(pool: Pool): Promise<DatabaseCounts> {
  const { rows } = await pool.query<DatabaseCounts>(COUNTS_SQL);
  const counts = rows[0];
  if (!counts) throw new Error('the counts query returned no row');
  return counts;
}

export interface StoredConnectionRow {
  provider: 'plaid' | 'teller';
  itemId: string;
  accountCount: number;
  accountIds: string[];
}

const STORED_CONNECTIONS_SQL = `
  SELECT c.provider, c.provider_item_id AS "itemId", c.account_count AS "accountCount",
         coalesce(array_agg(a.provider_account_id) FILTER (WHERE a.provider_account_id IS NOT NULL), '{}')
           AS "accountIds"
    FROM ${CONNECTIONS} c
    LEFT JOIN accounts a ON a.${ACCOUNT_CONNECTION_ID} = c.id
   GROUP BY c.id`;

/** Every stored connection with its kept account count and its account rows. */
export async function readStoredConnections(pool: Pool): Promise<StoredConnectionRow[]> {
  return (await pool.query<StoredConnectionRow>(STORED_CONNECTIONS_SQL)).rows;
}

const ITEMS_HELD_BY_EXCHANGES_SQL = `
  SELECT provider_item_id AS "itemId" FROM exchanges WHERE state = 'exchanged' AND provider_item_id IS NOT NULL`;

/** Items whose access token an unfinished exchange holds (stored, or swept into the removal queue, later). */
export async function listItemsHeldByExchanges(pool: Pool): Promise<string[]> {
  return (await pool.query<{ itemId: string }>(ITEMS_HELD_BY_EXCHANGES_SQL)).rows.map((row) => row.itemId);
}

const STATUS_CHANGES_SQL = `
  SELECT detail->>'item_id' AS "itemId", count(*)::int AS changes
    FROM events WHERE kind = 'connection_status_changed' AND detail->>'from' <> detail->>'to' GROUP BY 1`;

/**
 * How many times each Item's connection changed status (its connection_status_changed events from one
 * status to another; an event that only changed new_accounts_available is not a status change).
 */
export async function countStatusChangesByItem(pool: Pool): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ itemId: string; changes: number }>(STATUS_CHANGES_SQL);
  return new Map(rows.map((row) => [row.itemId, row.changes]));
}
