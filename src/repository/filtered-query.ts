import QueryStream from 'pg-query-stream';
import type { PoolClient } from '../db/pool';
import type { Queryable } from './queryable';

/**
 * A SELECT whose WHERE holds only the filters that are set, each with its own placeholder, so that each
 * combination of filters gets a plan of its own: the admin lists and exports build theirs with it.
 */
export class FilteredQuery {
  private readonly clauses: string[] = [];
  private readonly values: unknown[] = [];

  /** Adds `sql` (one `?` for the value) unless `value` is undefined; chainable. */
  where(sql: string, value: unknown): this {
    if (value === undefined) return this;
    this.values.push(value);
    this.clauses.push(sql.replace('?', `$${this.values.length}`));
    return this;
  }

  /** `SELECT … FROM …`, the clauses, `ORDER BY …`, and a LIMIT when one is given. */
  build(select: string, orderBy: string, limit?: number): { text: string; values: unknown[] } {
    const values = [...this.values];
    let text = `${select}
    ${this.clauses.length > 0 ? `WHERE ${this.clauses.join(' AND ')}` : ''}
    ORDER BY ${orderBy}`;
    if (limit !== undefined) {
      values.push(limit);
      text += ` LIMIT $${values.length}`;
    }
    return { text, values };
  }
}

/** The rows of a built query. */
export async function readRows<Row>(
  db: Queryable,
  query: { text: string; values: unknown[] },
): Promise<Row[]> {
  const { rows } = await db.query<Row & Record<string, unknown>>(query);
  return rows;
}

/**
 * A server-side cursor over every row of a built query, inside the caller's transaction; the caller
 * owns (and releases) the client.
 */
export function streamRows(client: PoolClient, query: { text: string; values: unknown[] }): QueryStream {
  return client.query(new QueryStream(query.text, query.values, { batchSize: STREAM_BATCH_ROWS }));
}

/**
 * Rows fetched from the cursor per round trip (and at most buffered). Measured on a million-account
 * export: 250 to 2,000 cost the service the same CPU time; the export's reader takes whatever has
 * arrived at once, while the next fetch is under way.
 */
const STREAM_BATCH_ROWS = 500;
