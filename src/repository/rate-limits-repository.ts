import { COMMIT_ASYNCHRONOUSLY, type Queryable } from './queryable';

/** A counter as it stands after this request was counted: points in its window, and when it ends. */
export interface RateLimitCounter {
  points: number;
  /** Milliseconds since the epoch. */
  expiresAt: number;
}

export interface RateLimitSpend {
  userKey: string;
  userLimit: number;
  /** The service-wide counter of the action; absent when that limit is off. */
  totalKey: string | undefined;
}

export interface RateLimitSpent {
  user: RateLimitCounter;
  /** Absent when the service-wide limit is off, or the user's own limit refused the request. */
  total: RateLimitCounter | undefined;
}

/** One request to count in a statement that does more (the exchange's claim), with its limits and window. */
export interface RateLimitCount extends RateLimitSpend {
  totalLimit: number;
  /** Milliseconds since the epoch. */
  now: number;
  windowMs: number;
}

/**
 * The upsert of an `INSERT INTO rate_limits AS counter (key, points, expire)`: the points are added to
 * a counter whose window is still open at `now` (a parameter or an expression), else start it again.
 */
export function countInWindow(now: string): string {
  return `ON CONFLICT (key) DO UPDATE SET
         points = CASE WHEN counter.expire > ${now} THEN counter.points + excluded.points ELSE excluded.points END,
         expire = CASE WHEN counter.expire > ${now} THEN counter.expire ELSE excluded.expire END`;
}

/**
 * Counts requests, many in one statement (one round trip, one commit): each on its user's counter
 * and, only when the user is still within their limit, on the service-wide counter. Requests are
 * counted in the order given, so each gets the count it would have had alone; the same key may appear
 * more than once. Each counter is an upsert, so concurrent statements (from any instance) count
 * exactly; rows are locked in one order (users by key, then service-wide counters), so two statements
 * never wait for each other in a circle. A counter whose window has ended starts again. The statement
 * commits without waiting for the disk: a counter lost in a database crash only lets a few more
 * requests through in that minute.
 */
export async function spendRateLimitPoints(
  db: Queryable,
  spends: readonly RateLimitSpend[],
  window: { now: number; windowMs: number },
): Promise<RateLimitSpent[]> {
  const { rows } = await db.query<{
    user_points: string;
    user_expire: string;
    total_points: string | null;
    total_expire: string | null;
  }>({
    // Prepared once per connection where prepared statements are on: planning it costs more than running it.
    name: 'spend-rate-limit-points',
    text: `WITH request AS (
       SELECT * FROM unnest($1::varchar[], $2::integer[], $3::varchar[])
         WITH ORDINALITY AS given(user_key, user_limit, total_key, position)
       WHERE ${COMMIT_ASYNCHRONOUSLY}
     ), user_counter AS (
       INSERT INTO rate_limits AS counter (key, points, expire)
       SELECT user_key, count(*), $5::bigint FROM request GROUP BY user_key ORDER BY user_key
       ${countInWindow('$4')}
       RETURNING key, points, expire
     ), user_counted AS (
       SELECT request.position, request.total_key, request.user_limit, user_counter.expire AS user_expire,
              user_counter.points - count(*) OVER same_user
                + row_number() OVER (same_user ORDER BY request.position) AS user_points
       FROM request JOIN user_counter ON user_counter.key = request.user_key
       WINDOW same_user AS (PARTITION BY request.user_key)
     ), total_counted AS (
       SELECT position, total_key,
              count(*) OVER same_total AS spent,
              row_number() OVER (same_total ORDER BY position) AS rank
       FROM user_counted
       WHERE total_key IS NOT NULL AND user_points <= user_limit
       WINDOW same_total AS (PARTITION BY total_key)
     ), total_counter AS (
       INSERT INTO rate_limits AS counter (key, points, expire)
       SELECT total_key, count(*), $5::bigint FROM total_counted GROUP BY total_key ORDER BY total_key
       ${countInWindow('$4')}
       RETURNING key, points, expire
     )
     SELECT user_counted.user_points, user_counted.user_expire,
            total_counter.points - total_counted.spent + total_counted.rank AS total_points,
            total_counter.expire AS total_expire
     FROM user_counted
     LEFT JOIN total_counted ON total_counted.position = user_counted.position
     LEFT JOIN total_counter ON total_counter.key = total_counted.total_key
     ORDER BY user_counted.position`,
    values: [
      spends.map((spend) => spend.userKey),
      spends.map((spend) => spend.userLimit),
      spends.map((spend) => spend.totalKey ?? null),
      window.now,
      window.now + window.windowMs,
    ],
  });
  return rows.map((row) => ({
    user: { points: Number(row.user_points), expiresAt: Number(row.user_expire) },
    total:
      row.total_points === null || row.total_expire === null
        ? undefined
        : { points: Number(row.total_points), expiresAt: Number(row.total_expire) },
  }));
}

/** Gives back the point just counted on `key`, if its window is still the one it was counted in. */
export async function refundRateLimitPoint(db: Queryable, key: string, expiresAt: number): Promise<void> {
  await db.query(`UPDATE rate_limits SET points = points - 1 WHERE key = $1 AND expire = $2 AND points > 0`, [
    key,
    expiresAt,
  ]);
}

/** Nobody reads a counter after its window has ended. */
export async function pruneExpiredRateLimits(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM rate_limits WHERE expire < $1`, [Date.now()]);
}
