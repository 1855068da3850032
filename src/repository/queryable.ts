import type { Pool, PoolClient } from '../db/pool';

/** A pool (one statement, its own transaction) or a checked-out client (inside the caller's transaction). */
export type Queryable = Pool | PoolClient;

/**
 * A condition that is always true and, evaluated once as the statement starts, turns
 * `synchronous_commit` off for the statement's own transaction (`SET LOCAL`'s effect, in the same round
 * trip): it commits without waiting for the disk. Only for writes whose loss in a database crash is
 * harmless. Being part of the statement, no pooler can drop it, and it never outlives the transaction.
 */
export const COMMIT_ASYNCHRONOUSLY = `set_config('synchronous_commit', 'off', true) IS NOT NULL`;
