import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * Every log call in the service's source, read with TypeScript's own parser: its level, its message
 * as a pattern, and the fields it writes. What the docs quote of a log line is checked against these.
 */

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * One piece of a message pattern: a character, or what stands for a variable part. In code, a
 * template's `${…}` is `word` (one or more characters, none a space: an operation, a code, a URL);
 * in the docs, `…` is `any` (anything, nothing included).
 */
export type PatternItem = { char: string } | { word: true } | { any: true };

export interface LogCall {
  file: string;
  line: number;
  /** The levels it writes at: one, or those a choice at the call names; null: chosen elsewhere. */
  levels: Set<LogLevel> | null;
  /** The messages it can write; null when the message is not written at the call (a parameter). */
  messages: PatternItem[][] | null;
  fields: Set<string>;
  /** Some fields come from a value the call site does not spell out (a spread of a record). */
  open: boolean;
}

const SRC = path.resolve(__dirname, '..', '..', 'src');
/** The service's code, and the dev tools it runs in development (they log through its logger). */
const LOGGING_SOURCES = [SRC, path.resolve(SRC, '..', 'packages', 'dev-tools', 'src')];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

const chars = (text: string): PatternItem[] => [...text].map((char) => ({ char }));

const nameOf = (name: ts.PropertyName): string | undefined =>
  ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name) ? name.text : undefined;

/** The value a name has where it is used: the nearest enclosing block's `const`/`let` of that name. */
function initializerOf(use: ts.Identifier): ts.Expression | undefined {
  for (let scope: ts.Node | undefined = use.parent; scope; scope = scope.parent) {
    const statements =
      ts.isBlock(scope) || ts.isSourceFile(scope) || ts.isModuleBlock(scope) || ts.isCaseClause(scope)
        ? scope.statements
        : undefined;
    for (const statement of statements ?? []) {
      if (!ts.isVariableStatement(statement)) continue;
      for (const declaration of statement.declarationList.declarations) {
        if (
          ts.isIdentifier(declaration.name) &&
          declaration.name.text === use.text &&
          declaration.initializer
        )
          return declaration.initializer;
      }
    }
  }
  return undefined;
}

const MAX_MESSAGES = 16;

/** Every message an expression can be, when written out at the call or in the names it uses. */
function patternsOf(node: ts.Expression, depth = 0): PatternItem[][] | null {
  if (depth > 8) return null;
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return [chars(node.text)];
  if (ts.isParenthesizedExpression(node)) return patternsOf(node.expression, depth + 1);
  if (ts.isConditionalExpression(node)) {
    const [whenTrue, whenFalse] = [
      patternsOf(node.whenTrue, depth + 1),
      patternsOf(node.whenFalse, depth + 1),
    ];
    return whenTrue && whenFalse ? [...whenTrue, ...whenFalse] : null;
  }
  if (ts.isIdentifier(node)) {
    const value = initializerOf(node);
    return value ? patternsOf(value, depth + 1) : null;
  }
  // A part that is not written out (a parameter, a property) is one word: an operation, a code, a URL.
  const partOf = (part: ts.Expression) => patternsOf(part, depth + 1) ?? [[{ word: true as const }]];
  const joined = (parts: PatternItem[][][]) =>
    parts
      .reduce<PatternItem[][]>(
        (sofar, options) => sofar.flatMap((prefix) => options.map((option) => [...prefix, ...option])),
        [[]],
      )
      .slice(0, MAX_MESSAGES);
  if (ts.isTemplateExpression(node)) {
    return joined([
      [chars(node.head.text)],
      ...node.templateSpans.flatMap((span) => [partOf(span.expression), [chars(span.literal.text)]]),
    ]);
  }
  if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    return joined([partOf(node.left), partOf(node.right)]);
  }
  return null;
}

const isWrittenMessage = (node: ts.Expression) =>
  ts.isStringLiteral(node) ||
  ts.isNoSubstitutionTemplateLiteral(node) ||
  ts.isTemplateExpression(node) ||
  (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken);

/** The levels a computed level names (`log[done ? 'info' : 'warn']`); null when it names none. */
function levelsOf(node: ts.Expression): Set<LogLevel> | null {
  const isLevel = (text: string): text is LogLevel => (LOG_LEVELS as readonly string[]).includes(text);
  if (ts.isStringLiteral(node)) return isLevel(node.text) ? new Set([node.text]) : null;
  if (ts.isParenthesizedExpression(node)) return levelsOf(node.expression);
  if (ts.isConditionalExpression(node)) {
    const [whenTrue, whenFalse] = [levelsOf(node.whenTrue), levelsOf(node.whenFalse)];
    return whenTrue && whenFalse ? new Set([...whenTrue, ...whenFalse]) : null;
  }
  return null;
}

interface Fields {
  keys: Set<string>;
  open: boolean;
}

const union = (...parts: Fields[]): Fields => ({
  keys: new Set(parts.flatMap((part) => [...part.keys])),
  open: parts.some((part) => part.open),
});

const OPEN: Fields = { keys: new Set(), open: true };
const NONE: Fields = { keys: new Set(), open: false };

/** Reads one file's log calls. */
function callsOf(file: string): LogCall[] {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const types = new Map<string, ts.NodeArray<ts.TypeElement>>();
  const collect = (node: ts.Node) => {
    if (ts.isInterfaceDeclaration(node)) types.set(node.name.text, node.members);
    if (ts.isTypeAliasDeclaration(node) && ts.isTypeLiteralNode(node.type))
      types.set(node.name.text, node.type.members);
    ts.forEachChild(node, collect);
  };
  collect(source);

  /** A value cast to a type declared in the file (`as RequestSubjects | undefined`) has its members. */
  const fieldsOfType = (type: ts.TypeNode): Fields => {
    if (ts.isUnionTypeNode(type)) return union(...type.types.map(fieldsOfType));
    if (type.kind === ts.SyntaxKind.UndefinedKeyword) return NONE;
    if (ts.isTypeReferenceNode(type) && ts.isIdentifier(type.typeName)) {
      const members = types.get(type.typeName.text);
      if (members) {
        const keys = members.flatMap((member) => {
          const name = member.name && nameOf(member.name);
          return name ? [name] : [];
        });
        return { keys: new Set(keys), open: false };
      }
    }
    return OPEN;
  };

  const fieldsOf = (node: ts.Expression, depth = 0): Fields => {
    if (depth > 8) return OPEN;
    if (ts.isParenthesizedExpression(node) || ts.isNonNullExpression(node))
      return fieldsOf(node.expression, depth + 1);
    if (ts.isAsExpression(node) || ts.isSatisfiesExpression(node)) {
      const inner = fieldsOf(node.expression, depth + 1);
      return inner.open ? fieldsOfType(node.type) : inner;
    }
    if (ts.isConditionalExpression(node))
      return union(fieldsOf(node.whenTrue, depth + 1), fieldsOf(node.whenFalse, depth + 1));
    if (ts.isObjectLiteralExpression(node)) {
      return union(
        NONE,
        ...node.properties.map((property): Fields => {
          if (ts.isSpreadAssignment(property)) return fieldsOf(property.expression, depth + 1);
          const name = property.name && nameOf(property.name);
          return name ? { keys: new Set([name]), open: false } : OPEN;
        }),
      );
    }
    if (ts.isIdentifier(node)) {
      const value = initializerOf(node);
      return value ? fieldsOf(value, depth + 1) : OPEN;
    }
    return OPEN;
  };

  /** What a logger binds to every line it writes: a local `x.child({…})`'s fields, and its parent's. */
  const bindingsOf = (receiver: ts.Expression, depth = 0): Set<string> => {
    if (depth > 8) return new Set();
    if (ts.isParenthesizedExpression(receiver)) return bindingsOf(receiver.expression, depth + 1);
    if (ts.isIdentifier(receiver)) {
      const value = initializerOf(receiver);
      return value ? bindingsOf(value, depth + 1) : new Set();
    }
    if (
      ts.isCallExpression(receiver) &&
      ts.isPropertyAccessExpression(receiver.expression) &&
      receiver.expression.name.text === 'child' &&
      receiver.arguments[0]
    ) {
      return new Set([
        ...fieldsOf(receiver.arguments[0]).keys,
        ...bindingsOf(receiver.expression.expression, depth + 1),
      ]);
    }
    return new Set();
  };

  const isLogger = (receiver: ts.Expression) => {
    const written = receiver.getText(source);
    return /\blog(ger)?\b/i.test(written) && !/\bconsole\b/.test(written);
  };

  const calls: LogCall[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node)) {
      const callee = node.expression;
      let levels: Set<LogLevel> | null | undefined;
      let receiver: ts.Expression | undefined;
      if (
        ts.isPropertyAccessExpression(callee) &&
        (LOG_LEVELS as readonly string[]).includes(callee.name.text) &&
        isLogger(callee.expression)
      ) {
        levels = new Set([callee.name.text as LogLevel]);
        receiver = callee.expression;
      } else if (ts.isElementAccessExpression(callee) && isLogger(callee.expression)) {
        levels = levelsOf(callee.argumentExpression);
        receiver = callee.expression;
      }
      const [first, second] = node.arguments;
      if (levels !== undefined && receiver && first) {
        // pino's forms: (message) or (fields, message).
        const messageOnly = isWrittenMessage(first) || (second === undefined && patternsOf(first) !== null);
        const fields = messageOnly ? NONE : fieldsOf(first);
        const message = messageOnly ? first : second;
        calls.push({
          file: path.relative(path.resolve(SRC, '..'), file),
          line: source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1,
          levels,
          messages: message ? patternsOf(message) : null,
          fields: new Set([...fields.keys, ...bindingsOf(receiver)]),
          open: fields.open,
        });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return calls;
}

/**
 * The fields an error answer adds to its request's line through the problem handler: its `code`, and
 * each AppError's `logFields`, wherever one is written (`logFields: {…}`, `this.logFields.x = …`).
 */
function problemFieldsOf(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const variables = new Map<string, ts.Expression>();
  const keysOf = (node: ts.Expression | undefined): string[] =>
    node && ts.isObjectLiteralExpression(node)
      ? node.properties.flatMap((property) => {
          const name = property.name && nameOf(property.name);
          return name ? [name] : [];
        })
      : [];
  const visit = (node: ts.Node) => {
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer)
      variables.set(node.name.text, node.initializer);
    if (ts.isPropertyAssignment(node) && nameOf(node.name) === 'logFields')
      found.push(...keysOf(node.initializer));
    if (ts.isShorthandPropertyAssignment(node) && node.name.text === 'logFields')
      found.push(...keysOf(variables.get('logFields')));
    if (
      ts.isBinaryExpression(node) &&
      node.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
      ts.isPropertyAccessExpression(node.left) &&
      ts.isPropertyAccessExpression(node.left.expression) &&
      node.left.expression.name.text === 'logFields'
    ) {
      found.push(node.left.name.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

export interface LogCatalogue {
  calls: LogCall[];
  /** Fields any line may carry: pino's own, the request id, the trace, a component's name, an error. */
  everyLine: Set<string>;
  /** Fields an open call may carry besides its own: what error answers add to a request's line. */
  problemFields: Set<string>;
}

export function readLogCalls(): LogCatalogue {
  const files = LOGGING_SOURCES.flatMap(sourceFiles);
  return {
    calls: files.flatMap(callsOf),
    everyLine: new Set(['level', 'time', 'msg', 'request_id', 'trace_id', 'span_id', 'component', 'err']),
    problemFields: new Set(['code', ...files.flatMap(problemFieldsOf)]),
  };
}

/**
 * Whether some message fits both patterns: the docs' quote (`any` parts) and a call's (`word` parts).
 * A `word` is one non-space character then any number more; the two patterns are walked together
 * (memoised: messages are short).
 */
export function patternsMeet(quote: PatternItem[], code: PatternItem[]): boolean {
  type CodeItem = { char: string } | { oneNonSpace: true } | { moreNonSpace: true };
  const expanded: CodeItem[] = code.flatMap((item): CodeItem[] =>
    'word' in item ? [{ oneNonSpace: true }, { moreNonSpace: true }] : 'char' in item ? [item] : [],
  );
  const memo = new Map<string, boolean>();
  const meet = (i: number, j: number): boolean => {
    const key = `${i},${j}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    memo.set(key, false);
    const a = quote[i];
    const b = expanded[j];
    let result = a === undefined && b === undefined;
    // `…` stands for nothing more, or for whatever the call's next item writes.
    if (!result && a && 'any' in a) result = meet(i + 1, j) || (b !== undefined && meet(i, j + 1));
    // The rest of a word: nothing more, or one more non-space character of the quote.
    if (!result && b && 'moreNonSpace' in b)
      result = meet(i, j + 1) || (a !== undefined && 'char' in a && a.char !== ' ' && meet(i + 1, j));
    if (!result && a && 'char' in a && b) {
      if ('char' in b) result = a.char === b.char && meet(i + 1, j + 1);
      else if ('oneNonSpace' in b) result = a.char !== ' ' && meet(i + 1, j + 1);
    }
    memo.set(key, result);
    return result;
  };
  return meet(0, 0);
}

/** A call's message says something of its own: not only variable parts and spaces. */
export const hasOwnText = (pattern: PatternItem[]) =>
  pattern.some((item) => 'char' in item && item.char.trim() !== '');
