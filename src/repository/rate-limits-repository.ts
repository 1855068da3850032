import type { Queryable } from './connections-repository';

/** rate-limiter-flexible's Postgres store keeps expired counters; nobody reads them after `expire`. */
export async function pruneExpiredRateLimits(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM rate_limits WHERE expire < $1`, [Date.now()]);
}
