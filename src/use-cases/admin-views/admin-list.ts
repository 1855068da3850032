import { decodeCursor, encodeCursor } from '../../crypto/admin-cursor';
import type { Pool } from '../../db/pool';
import { unknownCursor } from '../../errors';
import type { KeysetList } from '../../repository/filtered-query';
import type { AdminExports, RunningExport } from './admin-exports';

/** A page of an admin list: its records, and the cursor of the next page (null on the last). */
export interface AdminPage<Item> {
  items: Item[];
  nextCursor: string | null;
}

/**
 * One keyset page by row id: the cursor (signed with `cursorKey`) names the last row of the previous
 * page; one row more than the page is read, only to say that another page follows.
 */
export async function readKeysetPage<Row extends { id: string }, Item>(
  cursorKey: Buffer,
  cursor: string | undefined,
  limit: number,
  read: (afterId: string | undefined, limit: number) => Promise<Row[]>,
  toItem: (row: Row) => Item,
): Promise<AdminPage<Item>> {
  const afterId = cursor === undefined ? undefined : decodeCursor(cursorKey, cursor);
  if (cursor !== undefined && afterId === undefined) throw unknownCursor();
  const rows = await read(afterId, limit + 1);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    items: page.map(toItem),
    nextCursor: rows.length > limit && last ? encodeCursor(cursorKey, last.id) : null,
  };
}

/** What every admin list is given. */
export interface AdminListParts {
  /** The admin pool: separate from the account endpoints' one, so admin work cannot starve them. */
  pool: Pool;
  /** Signs this list's cursors: its own key, so that another list's cursor is refused. */
  cursorKey: Buffer;
  exports: AdminExports;
}

/** What makes one admin list: what it holds, how its rows are read (a page or all), how a row is shown. */
export interface AdminListSpec<Filters, Row extends { id: string }, Item> {
  /** What the list holds, for log lines ("account", "connection"). */
  what: string;
  rows: KeysetList<Filters, Row>;
  toItem(row: Row): Item;
}

/**
 * An admin list: keyset pages by row id, with signed cursors (an edited one, or another list's, is
 * refused), and exports of every matching row, which share the export slots of every list.
 */
export class AdminList<Filters, Row extends { id: string }, Item> {
  constructor(
    protected readonly parts: AdminListParts,
    private readonly list: AdminListSpec<Filters, Row, Item>,
  ) {}

  /** How long an export may wait for its client to accept bytes before it is aborted. */
  get exportStallTimeoutMs(): number {
    return this.parts.exports.stallTimeoutMs;
  }

  page(filters: Filters, cursor: string | undefined, limit: number): Promise<AdminPage<Item>> {
    return readKeysetPage(
      this.parts.cursorKey,
      cursor,
      limit,
      (afterId, rows) => this.list.rows.readPage(this.parts.pool, filters, afterId, rows),
      (row) => this.list.toItem(row),
    );
  }

  /** Every matching row, from a server-side cursor; refused while every export slot is taken. */
  openExport(filters: Filters): Promise<RunningExport> {
    return this.parts.exports.open(
      this.list.what,
      (client) => this.list.rows.streamAll(client, filters),
      (row: Row) => this.list.toItem(row),
    );
  }
}
