import QueryStream from 'pg-query-stream';
import type { PoolClient } from '../db/pool';
import type { Queryable } from './queryable';

/**
 * A SELECT whose WHERE holds only the filters that are set, each with its own placeholder, so that each
 * combination of filters gets a plan of its own: the admin lists and exports build theirs with it.
 */
class FilteredQuery {
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

/**
 * `text` as a LIKE pattern that matches any value containing it: its own `%`, `_` and `\` (LIKE's escape
 * character) are escaped, so that a user's text is only ever matched literally.
 */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (character) => `\\${character}`)}%`;
}

/** A filter whose value the clause takes as something else than it is given (a pattern built from it). */
interface MappedFilter {
  clause: string;
  value: (given: never) => unknown;
}

/**
 * The institution's name containing the given text, in any case: ILIKE on a pattern built by
 * containsPattern, which the trigram index connections_institution_name_trgm_idx serves (each statement is
 * planned with its values, so the planner sees the pattern).
 */
export const INSTITUTION_NAME_CONTAINS: MappedFilter = {
  clause: 'c.institution_name ILIKE ?',
  value: containsPattern,
};

/**
 * An admin list's query, declared once: its SELECT, the key its pages follow (ascending), and each
 * filter's clause (one `?` for the value), in the order they join the WHERE. Every filter has one; a
 * mapped one also says what its clause is given for the value.
 */
export interface KeysetListQuery<Filters> {
  select: string;
  key: string;
  filters: { readonly [Name in keyof Required<Filters>]: string | MappedFilter };
}

/** An admin list's rows: a keyset page, or every matching row for an export. */
export interface KeysetList<Filters, Row> {
  /** Keyset pagination on the key: a deep page costs what the first one does. */
  readPage(db: Queryable, filters: Filters, afterId: string | undefined, limit: number): Promise<Row[]>;
  /** Every matching row, from a server-side cursor inside the caller's transaction. */
  streamAll(client: PoolClient, filters: Filters): QueryStream;
}

/** The page and the export of one admin list, built from its one declaration. */
export function declareKeysetList<Filters, Row>(list: KeysetListQuery<Filters>): KeysetList<Filters, Row> {
  const queryOf = (filters: Filters, afterId: string | undefined, limit: number | undefined) => {
    const query = new FilteredQuery().where(`${list.key} > ?`, afterId);
    for (const name of Object.keys(list.filters) as (keyof Filters)[]) {
      const filter = list.filters[name];
      const given = filters[name];
      if (typeof filter === 'string') query.where(filter, given);
      else query.where(filter.clause, given === undefined ? undefined : filter.value(given as never));
    }
    return query.build(list.select, list.key, limit);
  };
  return {
    readPage: (db, filters, afterId, limit) => readRows(db, queryOf(filters, afterId, limit)),
    streamAll: (client, filters) => streamRows(client, queryOf(filters, undefined, undefined)),
  };
}

/** The rows of a built query. */
async function readRows<Row>(db: Queryable, query: { text: string; values: unknown[] }): Promise<Row[]> {
  const { rows } = await db.query<Row & Record<string, unknown>>(query);
  return rows;
}

/**
 * A server-side cursor over every row of a built query, inside the caller's transaction; the caller
 * owns (and releases) the client.
 */
function streamRows(client: PoolClient, query: { text: string; values: unknown[] }): QueryStream {
  return client.query(new QueryStream(query.text, query.values, { batchSize: STREAM_BATCH_ROWS }));
}

/**
 * Rows fetched from the cursor per round trip (and at most buffered). Measured on a million-account
 * export: 250 to 2,000 cost the service the same CPU time; the export's reader takes whatever has
 * arrived at once, while the next fetch is under way.
 */
const STREAM_BATCH_ROWS = 500;
