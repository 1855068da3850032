import { rowsOf, type ServiceContext } from './service';

/**
 * Named reads of what the database holds, so that a test says what it checks ("the user has no connection")
 * rather than how the schema stores it. A probe returns rows as the tests compare them; where a test needs a
 * table's detail no probe names, it reads it with rowsOf.
 */
type Probed = Pick<ServiceContext, 'deps'>;
type Row = Record<string, unknown>;

const countOf = async (context: Probed, sql: string): Promise<number> =>
  (await rowsOf(context, sql))[0]!.n as number;

/** The user's stored connections, oldest first: their Item ids and statuses. */
export const connectionsOfUser = (context: Probed, subscriptionUserId: string): Promise<Row[]> =>
  rowsOf(
    context,
    `SELECT provider_item_id, status FROM connections WHERE subscription_user_id = $1 ORDER BY id`,
    [subscriptionUserId],
  );

/** The provider account ids a user has stored, sorted: what a removal left behind. */
export async function accountIdsOf(context: Probed, subscriptionUserId: string): Promise<string[]> {
  const rows = await rowsOf(
    context,
    `SELECT a.provider_account_id FROM accounts a JOIN connections c ON c.id = a.connection_id
      WHERE c.subscription_user_id = $1 ORDER BY a.provider_account_id`,
    [subscriptionUserId],
  );
  return rows.map((row) => row.provider_account_id as string);
}

/** Which of these provider account ids are still stored. */
export const storedAccountsAmong = (context: Probed, providerAccountIds: string[]): Promise<Row[]> =>
  rowsOf(context, `SELECT provider_account_id FROM accounts WHERE provider_account_id = ANY($1) ORDER BY 1`, [
    providerAccountIds,
  ]);

/** The states of the user's exchanges (claimed, exchanged, stored…), oldest first. */
export const exchangeStatesOfUser = (context: Probed, subscriptionUserId: string): Promise<Row[]> =>
  rowsOf(context, `SELECT state FROM exchanges WHERE subscription_user_id = $1 ORDER BY claimed_at`, [
    subscriptionUserId,
  ]);

/** The states of the removals queued for an Item (the outbox), oldest first. */
export const removalStatesOfItem = (context: Probed, providerItemId: string): Promise<Row[]> =>
  rowsOf(context, `SELECT state FROM outbox WHERE provider_item_id = $1 ORDER BY id`, [providerItemId]);

/** The removals queued for an Item, with why each was queued, oldest first. */
export const removalsOfItem = (context: Probed, providerItemId: string): Promise<Row[]> =>
  rowsOf(context, `SELECT reason, state FROM outbox WHERE provider_item_id = $1 ORDER BY id`, [
    providerItemId,
  ]);

/** How many removals the outbox holds, in any state. */
export const removalCount = (context: Probed): Promise<number> =>
  countOf(context, `SELECT count(*)::int AS n FROM outbox`);

/** How many events the log holds. */
export const eventCount = (context: Probed): Promise<number> =>
  countOf(context, `SELECT count(*)::int AS n FROM events`);

/** The kinds of the user's events, in the order they were written. */
export const eventKindsOfUser = (context: Probed, subscriptionUserId: string): Promise<Row[]> =>
  rowsOf(context, `SELECT kind FROM events WHERE subscription_user_id = $1 ORDER BY id`, [
    subscriptionUserId,
  ]);

/** Every rate-limit bucket and the points it holds, by key. */
export const rateLimitBuckets = (context: Probed): Promise<Row[]> =>
  rowsOf(context, `SELECT key, points FROM rate_limits ORDER BY key`);

/** The user's stored connections with the aggregator holding each, oldest first. */
export const providerConnectionsOfUser = (context: Probed, subscriptionUserId: string): Promise<Row[]> =>
  rowsOf(
    context,
    `SELECT provider, provider_item_id, institution_id, institution_name, status
       FROM connections WHERE subscription_user_id = $1 ORDER BY id`,
    [subscriptionUserId],
  );

/** The user's exchanges with their provider, state and failure, oldest first. */
export const providerExchangesOfUser = (context: Probed, subscriptionUserId: string): Promise<Row[]> =>
  rowsOf(
    context,
    `SELECT provider, state, failure_code FROM exchanges WHERE subscription_user_id = $1 ORDER BY claimed_at`,
    [subscriptionUserId],
  );

/** The removals queued for an Item with the provider each goes to, oldest first. */
export const providerRemovalsOfItem = (context: Probed, providerItemId: string): Promise<Row[]> =>
  rowsOf(context, `SELECT provider, reason, state FROM outbox WHERE provider_item_id = $1 ORDER BY id`, [
    providerItemId,
  ]);

/**
 * The Teller link tokens (nonces) issued to the user, oldest first: the enrollment each was issued to
 * repair, the enrollment that used it, and whether it has expired.
 */
export const linkNoncesOfUser = (context: Probed, subscriptionUserId: string): Promise<Row[]> =>
  rowsOf(
    context,
    `SELECT nonce, app_name, repair_enrollment_id, enrollment_id, expires_at <= now() AS expired
       FROM link_nonces WHERE subscription_user_id = $1 ORDER BY created_at, nonce`,
    [subscriptionUserId],
  );

/** One connection's health, by its Item (a Teller enrollment): its status and error code. */
export const healthOfItem = async (context: Probed, providerItemId: string): Promise<Row | undefined> =>
  (
    await rowsOf(context, `SELECT status, error_code FROM connections WHERE provider_item_id = $1`, [
      providerItemId,
    ])
  )[0];

/** The status changes recorded for a user, in order: from, to, the error code and what said it. */
export const statusChangesOfUser = (context: Probed, subscriptionUserId: string): Promise<Row[]> =>
  rowsOf(
    context,
    `SELECT detail->>'from' AS "from", detail->>'to' AS "to", detail->>'error_code' AS error_code,
            detail->>'source' AS source
       FROM events WHERE subscription_user_id = $1 AND kind = 'connection_status_changed' ORDER BY id`,
    [subscriptionUserId],
  );
