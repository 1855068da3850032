import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { PlaidEmulator } from 'plaid-emulator';
import { createTestDatabase, poolerEnvironment, type TestDatabase } from '../support/database';
import { reachableTempDir, removeTempDirs, startMainProcess } from '../support/main-process';
import { projectPath } from '../support/project-paths';

const MAIN = projectPath('dist', 'main.js');
const PLAID = { clientId: 'terminal-client', secret: `plaid-${randomBytes(8).toString('hex')}` };
// eslint-disable-next-line no-control-regex -- colours are what a terminal shows; the text is what is pasted
const COLOURS = /\u001b\[[0-9;]*m/g;

/** `npm start` at a terminal (a pseudo-terminal from util-linux's `script`), until `until` is printed. */
function runAtTerminal(env: Record<string, string>, until: RegExp): Promise<string> {
  const child = spawn('script', ['-qfec', `${process.execPath} ${MAIN}`, '/dev/null'], {
    // Behind PgBouncer, with the DATABASE_DIRECT_URL an operator would add for migrations.
    // The built-in Teller emulator on a free port: other tests start services at the same time.
    env: {
      PATH: process.env.PATH ?? '',
      TERM: 'xterm',
      TELLER_EMULATOR_PORT: '0',
      ...env,
      ...poolerEnvironment(env),
    },
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no match within 30 s:\n${output}`));
    }, 30_000);
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
      if (until.test(output.replace(COLOURS, ''))) {
        clearTimeout(timer);
        child.kill('SIGTERM');
        child.once('exit', () => resolve(output.replace(COLOURS, '').replace(/\r/g, '')));
      }
    });
    child.once('error', reject);
  });
}

describe('logs at a terminal', () => {
  const tempDirs: string[] = [];
  let database: TestDatabase;
  let emulator: PlaidEmulator;
  beforeAll(async () => {
    database = await createTestDatabase();
    emulator = new PlaidEmulator({ credentials: PLAID });
    await emulator.listen(0);
  });
  afterAll(async () => {
    await emulator.close();
    await database.drop();
    removeTempDirs(tempDirs);
  });

  it('when the service starts at a terminal outside production, then its lines are readable and the curl lines paste as printed', async () => {
    const dataDir = reachableTempDir(tempDirs);

    const output = await runAtTerminal(
      {
        NODE_ENV: 'development',
        PORT: '0',
        METRICS_PORT: '0',
        DATABASE_URL: database.url,
        DATA_DIR: dataDir,
        PLAID_CLIENT_ID: PLAID.clientId,
        PLAID_SECRET: PLAID.secret,
        PLAID_BASE_URL: emulator.url,
      },
      /try: curl .*create-link-token/,
    );

    const curlLines = output.split('\n').filter((line) => line.includes('try: curl'));
    expect(curlLines).toHaveLength(2);
    expect(curlLines[0]).toContain(
      `curl -s -H "X-Internal-Secret: $(cat ${path.join(dataDir, 'admin-secret')})"`,
    );
    expect(curlLines[1]).toContain(`-d '{"subscription_user_id":"user-1","app_name":"My App"}'`);
    expect(output).not.toContain('\\"');
    expect(output.split('\n').filter((line) => line.trim().startsWith('{"level"'))).toEqual([]);
  });

  it('when the log is not a terminal (piped, as under compose, an IDE or tee), then the try: lines are printed as plain text that pastes into bash and answers 200', async () => {
    const dataDir = reachableTempDir(tempDirs);
    const service = await startMainProcess({
      NODE_ENV: 'development',
      PORT: '0',
      DATABASE_URL: database.url,
      DATA_DIR: dataDir,
      PLAID_CLIENT_ID: PLAID.clientId,
      PLAID_SECRET: PLAID.secret,
      PLAID_BASE_URL: emulator.url,
    });
    try {
      // The lines a person sees and copies: those that read `try: …`, wherever the process wrote them.
      const printed = () =>
        service.output
          .join('\n')
          .split('\n')
          .filter((line) => line.startsWith('try: '));
      for (let waited = 0; printed().length < 2 && waited < 5_000; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const commands = printed().map((line) => line.slice('try: '.length));

      expect(commands).toHaveLength(2);
      // Asynchronously: the emulator answering the service's Plaid calls runs in this process.
      const paste = async (command: string) =>
        (await promisify(execFile)('bash', ['-c', command], { env: { PATH: process.env.PATH ?? '' } }))
          .stdout;
      for (const command of commands) {
        expect(await paste(`${command} -o /dev/null -w '%{http_code}'`)).toBe('200');
      }
      const [stats, linkToken] = await Promise.all(
        commands.map(async (command) => JSON.parse(await paste(command)) as object),
      );
      expect(stats).toHaveProperty('notifications');
      expect(linkToken).toEqual(
        expect.objectContaining({ link_token: expect.stringMatching(/^link-sandbox-/) }),
      );
      // The JSON log keeps its own line of each.
      const logged = service.output
        .filter((line) => line.startsWith('{'))
        .map((line) => (JSON.parse(line) as { msg: string }).msg)
        .filter((message) => message.startsWith('try: '));
      expect(logged.map((message) => message.slice('try: '.length))).toEqual(commands);
    } finally {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  });
});
