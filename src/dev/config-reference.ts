import path from 'node:path';
import * as prettier from 'prettier';
import { REAL_PROVIDER_SIGNS } from '../config/parse-environment';
import { MAX_SECRET_FILE_BYTES, READ_FROM_FILES, SECRET_FILE_MODE_RULE } from '../config/read-secret-files';
import { SEE } from '../config/settings/doc-links';
import { SETTING_GROUPS } from '../config/settings/setting-groups';
import {
  fileVariableOf,
  isList,
  readsFromFile,
  type AnySetting,
  type Declarations,
  type SettingGroup,
  type SpanningRule,
} from '../config/settings/setting';
import { ADMIN_GUIDE, renderAdminGuide } from './error-explanations-reference';

/**
 * The configuration reference (docs/configuration.md) and .env.example, written from the settings declared
 * in src/config/settings/ by `npm run config-docs`; a test fails while either file differs from what this
 * writes now.
 */

/**
 * The files written, relative to the repository's root, each with what it holds now (undefined: nothing
 * to write under that root). The admin guide's table of error explanations is written by the same script.
 */
export const GENERATED_FILES: readonly {
  file: string;
  render: (root: string) => Promise<string | undefined>;
}[] = [
  { file: path.join('docs', 'configuration.md'), render: renderReference },
  { file: '.env.example', render: async () => renderEnvExample() },
  { file: ADMIN_GUIDE, render: renderAdminGuide },
];

const WRITTEN_BY =
  'Written by `npm run config-docs` from the settings declared in src/config/settings/: edit them there, ' +
  'not here (a test fails while this file differs from what the declarations say).';

type Group = SettingGroup<Declarations, unknown>;
const GROUPS: readonly Group[] = SETTING_GROUPS as readonly Group[];

const settingsOf = (group: Group) => Object.entries(group.settings) as [string, AnySetting][];
const code = (text: string) => `\`${text}\``;
const anchorOf = (title: string) =>
  title
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, '')
    .replace(/ /g, '-');

/** What the schema makes of an unset variable, as text (a list comma-separated), or undefined. */
function parsedDefault(setting: AnySetting): string | undefined {
  const value: unknown = setting.schema?.parse(undefined);
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** The default column: a value, the defaults of production and elsewhere, or what unset means. */
function defaultOf(setting: AnySetting): string {
  if (setting.defaults) {
    return `${code(String(setting.defaults.otherwise))}; ${code(String(setting.defaults.production))} in production`;
  }
  if (setting.unset) return setting.unset;
  if (setting.generated) return 'generated in `DATA_DIR` outside production';
  const value = parsedDefault(setting);
  return value === undefined ? 'unset' : code(value);
}

/** What production demands of the variable: required, and each of its rules. */
function productionOf(setting: AnySetting): string[] {
  const each = isList(setting) ? 'each ' : '';
  return [
    ...(setting.generated && !setting.unset ? ['required'] : []),
    ...(setting.production ?? []).map((rule) => rule.states),
    ...(setting.productionOfEach ?? []).map((rule) => `${each}${rule.states}`),
  ];
}

function meaningOf(setting: AnySetting): string {
  return setting.readBy ? `read by ${setting.readBy}: ${setting.description}` : setting.description;
}

const rulesOf = (group: Group, when: SpanningRule<unknown>['when']) =>
  (group.rules ?? []).filter((rule) => rule.when === when);

/** The variable column: its name, whether it is secret, and the variable naming its file. */
function variableOf(name: string, setting: AnySetting): string {
  if (readsFromFile(setting)) return `${code(name)} (secret; or ${code(fileVariableOf(name))})`;
  return `${code(name)}${setting.secret ? ' (secret)' : ''}`;
}

function groupSection(group: Group): string {
  const settings = settingsOf(group);
  // A group none of whose variables production holds to a rule of its own has no such column.
  const withProduction = settings.some(([, setting]) => productionOf(setting).length > 0);
  const header = ['variable', 'default', 'meaning', ...(withProduction ? ['in production'] : [])];
  const rows = settings.map(([name, setting]) => [
    variableOf(name, setting),
    defaultOf(setting),
    meaningOf(setting),
    ...(withProduction ? [productionOf(setting).join('; ')] : []),
  ]);
  const table = [header, header.map(() => '---'), ...rows]
    .map((row) => `| ${row.map((text) => text.replace(/\|/g, '\\|')).join(' | ')} |`)
    .join('\n');
  return [`## ${group.title}`, ...(group.intro ? [group.intro] : []), table].join('\n\n');
}

function productionSection(): string {
  const perVariable = GROUPS.flatMap((group) =>
    settingsOf(group).flatMap(([name, setting]) => {
      const rules = productionOf(setting);
      return rules.length > 0 ? [`- ${code(name)}: ${rules.join('; ')}`] : [];
    }),
  );
  const spanning = GROUPS.flatMap((group) => rulesOf(group, 'production').map((rule) => `- ${rule.states}`));
  const signs = REAL_PROVIDER_SIGNS;
  const means = [...new Set(signs.map(({ sign }) => sign.means))].join(' or ');
  return [
    '## Production rules',
    'With `NODE_ENV=production` the service refuses, in the one message that lists every problem, a value ' +
      'that breaks its rule:',
    perVariable.join('\n'),
    'and settings that do not fit together:',
    spanning.join('\n'),
    `Production's rules never hang on remembering \`NODE_ENV\`: a configuration that means ${means} (` +
      `${signs.map(({ sign }) => sign.setting.replace(/^(\S+)/, '`$1`')).join(', or ')}) without ` +
      '`NODE_ENV=production` is refused with one line naming `NODE_ENV`, before anything is generated into ' +
      '`DATA_DIR`. It is refused rather than switched to production’s rules, since switching would also change ' +
      "defaults behind the operator's back (`HOST`, the secrets generated in `DATA_DIR`).",
  ].join('\n\n');
}

function everyEnvironmentSection(): string {
  const spanning = GROUPS.flatMap((group) => rulesOf(group, 'always').map((rule) => `- ${rule.states}`));
  const formats = GROUPS.flatMap((group) =>
    settingsOf(group).flatMap(([name, setting]) =>
      setting.format === 'base64-key'
        ? [
            `- ${code(name)}: canonical base64 of 32 bytes (what \`openssl rand -base64 32\` prints: 44 characters ` +
              "ending in `=`), since Node's decoder would skip stray characters",
          ]
        : [],
    ),
  );
  return ['## Rules in every environment', [...formats, ...spanning].join('\n')].join('\n\n');
}

function secretsSentence(): string {
  const secrets = GROUPS.flatMap((group) =>
    settingsOf(group).flatMap(([name, setting]) => (setting.secret ? [code(name)] : [])),
  );
  return (
    `A secret's value is never shown: no problem, log line or answer carries it. The secrets: ` +
    `${secrets.join(', ')}.`
  );
}

/** How a secret is read from a file, from the rules read-secret-files.ts holds to. */
function secretFilesParagraph(): string {
  return (
    `Each secret the service reads (${READ_FROM_FILES.map(code).join(', ')}) may instead be given in a ` +
    'file, whose path its `_FILE` variable names (`INTERNAL_SECRET_FILE=/run/secrets/…`), as Kubernetes and ' +
    `Docker secrets give them (see [Secrets in files](${SEE.secretFiles})). One of the two, never both: both ` +
    'set is refused in every environment. The file is read once, at start (a changed file takes a restart); ' +
    'a symbolic link is followed, and the file it leads to must be a regular file of at most ' +
    `${MAX_SECRET_FILE_BYTES / 1024} KiB, not empty, with ${SECRET_FILE_MODE_RULE}. ` +
    'It holds what the variable would: trailing line breaks are dropped (`echo` ends a file with one), a ' +
    "PEM's lines are kept, and a list may have an entry per line. A file that cannot be read is one line of " +
    'the message naming the variable and the path, never the content.'
  );
}

/** docs/configuration.md, formatted as Prettier (the repository's settings) writes it. */
export async function renderReference(): Promise<string> {
  const markdown = [
    '# Configuration',
    `<!-- ${WRITTEN_BY} -->`,
    'The service reads its configuration once at start, from the environment (and a `.env` file, see ' +
      '[`.env.example`](../.env.example)); a bad or missing value stops it with one message that lists every ' +
      'problem. Every variable is optional outside production: with none set, `npm start` runs an embedded ' +
      'PostgreSQL and the built-in Plaid emulator, and generates the secrets and keys into `DATA_DIR`.',
    secretsSentence(),
    secretFilesParagraph(),
    GROUPS.map((group) => `- [${group.title}](#${anchorOf(group.title)})`)
      .concat([
        '- [Production rules](#production-rules)',
        '- [Rules in every environment](#rules-in-every-environment)',
      ])
      .join('\n'),
    ...GROUPS.map(groupSection),
    productionSection(),
    everyEnvironmentSection(),
  ].join('\n\n');
  const options = await prettier.resolveConfig(
    path.resolve(__dirname, '..', '..', 'docs', 'configuration.md'),
  );
  return prettier.format(`${markdown}\n`, { ...options, parser: 'markdown' });
}

/** Markdown as plain text for a comment: no code marks, a link's text without its target. */
const plain = (markdown: string) => markdown.replace(/\[([^\]]+)\]\([^)]+\)/g, '$1').replace(/`/g, '');

/** Text as comment lines of at most `width` characters. */
function comment(text: string, width = 110): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line.length + 1 + word.length > width && line !== '#') {
      lines.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  return line === '#' ? lines : [...lines, line];
}

const sentence = (text: string) => (/[.!?]$/.test(text) ? text : `${text}.`);

/** Whether `NAME=` means what leaving it out means (a number's parser reads an empty text as 0). */
function readsEmptyAsUnset(setting: AnySetting): boolean {
  if (!setting.schema) return true;
  const empty = setting.schema.safeParse('');
  return empty.success && JSON.stringify(empty.data) === JSON.stringify(setting.schema.parse(undefined));
}

function envLines(name: string, setting: AnySetting): string[] {
  const value = setting.defaults ? undefined : parsedDefault(setting);
  const production = productionOf(setting);
  const notes = [
    sentence(plain(meaningOf(setting))),
    ...(value === undefined ? [`Unset: ${sentence(plain(defaultOf(setting)))}`] : []),
    ...(production.length > 0 ? [`Production: ${sentence(plain(production.join('; ')))}`] : []),
    ...(setting.secret ? ['Secret: its value is never shown.'] : []),
    ...(readsFromFile(setting) ? [`Or ${fileVariableOf(name)}: the path of a file holding it.`] : []),
  ];
  const line = setting.example
    ? `# ${name}=${setting.example}`
    : value !== undefined
      ? `${name}=${value}`
      : readsEmptyAsUnset(setting)
        ? `${name}=`
        : `# ${name}=`;
  return [...comment(notes.join(' ')), line];
}

/** .env.example: every variable with its default (or empty), what it does, and production's demands. */
export function renderEnvExample(): string {
  const header = [
    ...comment(plain(WRITTEN_BY)),
    '#',
    ...comment(
      plain(
        'Copy to .env and adjust. Every variable is optional outside production: with none set, `npm start` ' +
          'runs an embedded PostgreSQL and the built-in Plaid emulator, and generates the secrets and keys into ' +
          'DATA_DIR (mode 0600). NODE_ENV=production requires every secret, both keys, DATABASE_URL and the ' +
          'Plaid credentials, and refuses weak or inconsistent values: docs/configuration.md lists every rule. ' +
          'Each secret may instead be read from a file, whose path its _FILE variable names ' +
          '(INTERNAL_SECRET_FILE=/run/secrets/…): see docs/operating.md, Secrets in files.',
      ),
    ),
  ];
  const blocks = GROUPS.map((group) =>
    [
      `# ---- ${group.title} ----`,
      ...comment(
        plain(
          [
            ...(group.intro ? [group.intro] : []),
            ...rulesOf(group, 'always').map((rule) => `Always: ${sentence(rule.states)}`),
            ...rulesOf(group, 'production').map((rule) => `Production: ${sentence(rule.states)}`),
          ].join(' '),
        ),
      ),
      ...settingsOf(group).flatMap(([name, setting]) => ['', ...envLines(name, setting)]),
    ].join('\n'),
  );
  return `${[header.join('\n'), ...blocks].join('\n\n')}\n`;
}
