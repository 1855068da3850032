import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ENDPOINTS } from '../../src/http/endpoint-list';
import {
  LOG_LEVELS,
  hasOwnText,
  patternsMeet,
  readLogCalls,
  type LogCall,
  type LogLevel,
  type PatternItem,
} from '../support/log-calls';
import { PROJECT_ROOT } from '../support/project-paths';

const ROOT = PROJECT_ROOT;

/** The README and every Markdown file under docs/. */
function documents(): { file: string; text: string }[] {
  const under = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return under(full);
      return entry.name.endsWith('.md') ? [full] : [];
    });
  return [path.join(ROOT, 'README.md'), ...under(path.join(ROOT, 'docs'))].map((file) => ({
    file: path.relative(ROOT, file),
    text: readFileSync(file, 'utf8'),
  }));
}

/**
 * How the docs quote a log line (docs/operating.md, "Metrics, traces and logs"): its level and its message in
 * code, then the fields to look at as code in the parentheses right after, if any:
 *
 *   the `warn` line `Plaid call failed: …` (`operation`, `kind`, `error_code`)
 *
 * `…` stands for the variable part of a message. Words in the parentheses that are not in code are
 * for the reader.
 */
const QUOTE = new RegExp(`\`(${LOG_LEVELS.join('|')})\`\\s+line\\s+\`([^\`]+)\`(?:\\s*\\(([^)]*)\\))?`, 'g');

/** Ways of naming a log line outside the convention, which the check would not see. */
const UNCONVENTIONAL = [
  /\blog\s+lines?\s+`[^`]+`/gi, // log line `…`
  /`[^`]*\s[^`]*`\s+(?:log\s+)?lines?\b/g, // `some message` line(s)
  /\blogs?:?\s+`[^`]+`/gi, // Logs: `…`, logs `…`
  /\blog\s+(?:for|says)\s+`[^`]+`/gi, // the log for `…`
];

interface Quote {
  where: string;
  level: string;
  message: string;
  fields: string[];
}

function quotesOf(document: { file: string; text: string }): { quotes: Quote[]; strays: string[] } {
  const lineOf = (index: number) => document.text.slice(0, index).split('\n').length;
  const quotes: Quote[] = [];
  const covered: [number, number][] = [];
  for (const match of document.text.matchAll(QUOTE)) {
    const index = match.index ?? 0;
    covered.push([index, index + match[0].length]);
    quotes.push({
      where: `${document.file}:${lineOf(index)}`,
      level: match[1] as string,
      // Markdown renders a line break inside a code span as a space; so does Prettier's wrapping.
      message: (match[2] as string).replace(/\s+/g, ' '),
      fields: [...(match[3] ?? '').matchAll(/`([^`]+)`/g)].map((field) => field[1] as string),
    });
  }
  const strays = UNCONVENTIONAL.flatMap((pattern) =>
    [...document.text.matchAll(pattern)]
      .filter((match) => {
        const index = match.index ?? 0;
        return !covered.some(([start, end]) => index >= start - 40 && index < end);
      })
      .map((match) => `${document.file}:${lineOf(match.index ?? 0)}: ${match[0].replace(/\s+/g, ' ')}`),
  );
  return { quotes, strays };
}

const quotePattern = (message: string): PatternItem[] =>
  [...message].map((char) => (char === '…' ? { any: true } : { char }));

/** A request line's message: the method, the declared route template (or `unmatched`) and the status. */
const REQUEST_LINE = /^([A-Z]+) (\S+) (\d{3})$/;

describe('log lines the docs quote', () => {
  const catalogue = readLogCalls();
  const requestLines = catalogue.calls.filter((call) => call.file === 'src/http/middleware/request-log.ts');

  const writes = (call: LogCall, fields: string[]) =>
    fields.every(
      (field) =>
        call.fields.has(field) ||
        catalogue.everyLine.has(field) ||
        (call.open && catalogue.problemFields.has(field)),
    );

  /** What is wrong with one quote, or undefined: no code writes that message at that level with those fields. */
  function problemOf(quote: Quote): string | undefined {
    const said = `${quote.where}: the \`${quote.level}\` line \`${quote.message}\` (${quote.fields.join(', ')})`;
    const request = REQUEST_LINE.exec(quote.message);
    if (request) {
      const [, method, route] = request;
      const declared =
        route === 'unmatched' ||
        ENDPOINTS.some((endpoint) => endpoint.method.toUpperCase() === method && endpoint.path === route);
      if (!declared) return `${said}: no endpoint ${method} ${route} is declared`;
      const missing = quote.fields.filter((field) => !requestLines.some((call) => writes(call, [field])));
      return missing.length > 0 ? `${said}: a request line has no ${missing.join(', ')}` : undefined;
    }
    const pattern = quotePattern(quote.message);
    const sameMessage = catalogue.calls.filter((call) =>
      call.messages?.some((message) => hasOwnText(message) && patternsMeet(pattern, message)),
    );
    if (sameMessage.length === 0) return `${said}: no code in src/ writes this message`;
    const atLevel = sameMessage.filter(
      (call) => call.levels === null || call.levels.has(quote.level as LogLevel),
    );
    if (atLevel.length === 0) {
      const levels = [...new Set(sameMessage.flatMap((call) => [...(call.levels ?? [])]))].join(', ');
      return `${said}: written at ${levels}, not ${quote.level}`;
    }
    if (atLevel.some((call) => writes(call, quote.fields))) return undefined;
    const written = [...new Set(atLevel.flatMap((call) => [...call.fields]))].join(', ');
    return `${said}: its fields are ${written}`;
  }

  it('when the README and docs/ quote a log line, then code in src/ writes that message, at that level, with every field named', () => {
    const found = documents().map(quotesOf);
    const quotes = found.flatMap((document) => document.quotes);

    expect(found.flatMap((document) => document.strays)).toEqual([]);
    // The runbooks quote a few dozen lines: a convention that matched none would check nothing.
    expect(quotes.length).toBeGreaterThan(20);
    expect(quotes.flatMap((quote) => problemOf(quote) ?? [])).toEqual([]);
  });

  it('when a quote names a line no code writes, a field it lacks, or another level, then the check says so', () => {
    const quote = (level: string, message: string, fields: string[]): Quote => ({
      where: 'example',
      level,
      message,
      fields,
    });

    expect(problemOf(quote('warn', 'Plaid call failed: …', ['operation', 'error_code', 'syscall']))).toBe(
      undefined,
    );
    expect(problemOf(quote('warn', 'Plaid call failed: item/remove ITEM_NOT_FOUND', ['kind']))).toBe(
      undefined,
    );
    expect(problemOf(quote('warn', 'provider call failed', ['operation']))).toMatch(/no code in src/);
    expect(problemOf(quote('warn', 'Plaid call failed: …', ['errorCode', 'httpStatus']))).toMatch(
      /its fields are/,
    );
    expect(problemOf(quote('error', 'Plaid call failed: …', []))).toMatch(/written at warn, not error/);
    expect(problemOf(quote('info', 'POST /webhooks/plaid 401', ['code', 'reason', 'item_id']))).toBe(
      undefined,
    );
    expect(problemOf(quote('info', 'POST /webhooks/plaid 401', ['webhook_reason']))).toMatch(
      /request line has no webhook_reason/,
    );
    expect(problemOf(quote('info', 'POST /webhook/plaid 401', []))).toMatch(/no endpoint/);
    // A template's variable part is one word: a quote cannot pass three words for `${a} ${b} ${c}`.
    expect(problemOf(quote('warn', 'Plaid call failed: a b c', []))).toMatch(/no code in src/);
  });

  it('when the docs are read, then a log line named outside the convention is caught', () => {
    const { quotes, strays } = quotesOf({
      file: 'example.md',
      text: [
        'Logs: `provider call failed` (`operation`) and `retrying provider call`.',
        'The error log line `Item removal gave up after the retry horizon` names it.',
        'Check the `webhook refused` log lines, and watch the log for `Item removed at the provider`.',
        'Each failure is the `warn` line `Plaid call failed: …` (`operation`,\n`error_code`).',
      ].join('\n'),
    });

    expect(quotes).toEqual([
      {
        where: 'example.md:4',
        level: 'warn',
        message: 'Plaid call failed: …',
        fields: ['operation', 'error_code'],
      },
    ]);
    expect(strays).toHaveLength(4);
  });
});
