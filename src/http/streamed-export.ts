import { Transform, pipeline } from 'node:stream';
import type { Request, Response } from 'express';
import type { RunningExport } from '../use-cases/admin-views/admin-exports';
import type { AdminPage } from '../use-cases/admin-views/admin-list';
import { RESPONDED } from './endpoint-declaration';

/** The representations an admin list streams instead of a JSON page, chosen by `Accept`. */
export type ExportFormat = 'application/x-ndjson' | 'text/csv';

type Cell = string | number | boolean | null;

/** How the admin lists describe their exports and their capacity, in one place. */
export const EXPORT_DESCRIPTION =
  'With `Accept: application/x-ndjson` or `Accept: text/csv`, every matching record is streamed ' +
  'instead, from a server-side cursor (memory stays flat at any size). Admin work reads through a pool ' +
  'of its own (`ADMIN_POOL_SIZE` connections), and each export (of any admin list) holds one of them ' +
  'while it runs, so at most `ADMIN_EXPORT_CONCURRENCY` run at once (always one fewer than the pool ' +
  'size); one more gets `503 EXPORT_CAPACITY_REACHED` with `Retry-After: 10`, and nothing is opened for ' +
  'it. An export whose client takes no bytes for `ADMIN_EXPORT_STALL_TIMEOUT_MS` (30 s), or whose ' +
  'database connection is lost, is cut short: the response lacks its last lines and ends without the ' +
  'final chunk (curl reports an error); run it again.';

/** A CSV column: a field of the record, or a named cell taken from it (a nested object's field). */
export type CsvColumn<T> = (keyof T & string) | { name: string; cell: (record: T) => Cell };

/** What one admin list exports: its records' name in log lines, and its CSV columns in order. */
export interface ExportShape<T> {
  what: string;
  csvColumns: readonly CsvColumn<T>[];
}

const columnName = <T>(column: CsvColumn<T>) => (typeof column === 'string' ? column : column.name);

/** The export the request asks for; undefined when it asks for a JSON page. */
function requestedExport(req: Request): ExportFormat | undefined {
  const format = req.accepts(['application/json', 'application/x-ndjson', 'text/csv']);
  return format === 'application/x-ndjson' || format === 'text/csv' ? format : undefined;
}

/** A cell a spreadsheet would run as a formula: one starting with =, +, -, @, a tab or a carriage return. */
const FORMULA_START = /^[=+\-@\t\r]/;
/**
 * Quoted whenever it holds a quote, a line break or any separator a spreadsheet may split on (comma,
 * semicolon, tab): a program that splits on ';' must never see a cell begin inside this one.
 */
const NEEDS_QUOTES = /[",;\t\r\n]/;

function csvField(value: Cell): string {
  if (value === null) return '';
  if (typeof value !== 'string') return String(value);
  const neutralised = FORMULA_START.test(value) ? `'${value}` : value;
  return NEEDS_QUOTES.test(neutralised) ? `"${neutralised.replace(/"/g, '""')}"` : neutralised;
}

const csvHeader = <T>(columns: readonly CsvColumn<T>[]) => `${columns.map(columnName).join(',')}\n`;

function encoderOf<T>(shape: ExportShape<T>, format: ExportFormat): (record: T) => string {
  if (format === 'application/x-ndjson') return (record) => `${JSON.stringify(record)}\n`;
  const cells = shape.csvColumns.map((column) =>
    typeof column === 'string' ? (record: T) => record[column] as Cell : column.cell,
  );
  return (record) => `${cells.map((cell) => csvField(cell(record))).join(',')}\n`;
}

/** The document's examples of both exports of one record. */
export function exportExamples<T>(
  shape: ExportShape<T>,
  example: T,
): Record<ExportFormat, { example: string }> {
  return {
    'application/x-ndjson': { example: encoderOf(shape, 'application/x-ndjson')(example) },
    'text/csv': {
      example: `${csvHeader(shape.csvColumns)}${encoderOf(shape, 'text/csv')(example)}`,
    },
  };
}

/**
 * Batches of records in, text out: each batch's lines as one chunk. Written one by one, each line was a
 * write, an HTTP chunk and a writev of its own, a third of the CPU time of a million-line export.
 */
function linesOfBatches<T>(encode: (record: T) => string): Transform {
  return new Transform({
    writableObjectMode: true,
    transform(records: T[], _encoding, done) {
      let text = '';
      for (const record of records) text += encode(record);
      done(null, text === '' ? undefined : text);
    },
  });
}

/**
 * True while bytes wait for the client: the response is backpressured, or its end is still queued on
 * the socket. False while the export waits on the database, which is not the client's stall.
 */
function clientIsBehind(res: Response): boolean {
  return res.writableNeedDrain || (res.socket?.writableLength ?? 0) > 0;
}

/**
 * Streams an export to the client as `format`: the records `open` reads, one line each (after a
 * header line for CSV). A client that takes no bytes for `stallTimeoutMs` is cut off, and the export
 * closed, so that it cannot hold its database connection.
 */
async function streamExport<T>(
  open: () => Promise<RunningExport>,
  shape: ExportShape<T>,
  format: ExportFormat,
  stallTimeoutMs: number,
  { req, res }: { req: Request; res: Response },
): Promise<void> {
  const { records, close } = await open();
  res.status(200).type(format === 'text/csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson');
  if (format === 'text/csv') res.write(csvHeader(shape.csvColumns));
  const toLines = linesOfBatches(encoderOf(shape, format));
  // The socket's inactivity timer restarts whenever the client takes bytes (Node also counts a
  // partly written chunk), so it fires only after a whole stall timeout in which it took none.
  let stalled = false;
  res.setTimeout(stallTimeoutMs, () => {
    if (!clientIsBehind(res)) return;
    stalled = true;
    res.destroy();
  });
  await new Promise<void>((resolve) => {
    pipeline(records, toLines, res, (error) => {
      close(error ?? undefined);
      if (stalled) {
        req.log.warn(
          { stall_timeout_ms: stallTimeoutMs },
          `${shape.what} export aborted: the client accepted no bytes within the stall timeout`,
        );
      } else if (error) {
        req.log.warn({ err: error }, `${shape.what} export ended early`);
      }
      resolve();
    });
  });
}

/** An admin list as its route uses it: pages, and exports of every match. */
interface ExportableList<Filters, Item> {
  page(filters: Filters, cursor: string | undefined, limit: number): Promise<AdminPage<Item>>;
  openExport(filters: Filters): Promise<RunningExport>;
  readonly exportStallTimeoutMs: number;
}

/**
 * An admin list's answer: the page `query` asks for, as `toWire` names its fields, or (by `Accept`)
 * every matching record streamed as NDJSON or CSV.
 */
export async function answerAdminList<Filters, Item, Page>(
  list: ExportableList<Filters, Item>,
  filters: Filters,
  query: { cursor?: string | undefined; limit: number },
  shape: ExportShape<Item>,
  context: { req: Request; res: Response },
  toWire: (page: AdminPage<Item>) => Page,
): Promise<Page | typeof RESPONDED> {
  const format = requestedExport(context.req);
  if (!format) return toWire(await list.page(filters, query.cursor, query.limit));
  await streamExport(() => list.openExport(filters), shape, format, list.exportStallTimeoutMs, context);
  return RESPONDED;
}
