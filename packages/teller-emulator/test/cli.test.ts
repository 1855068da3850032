import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expectConforms } from './support/schemas';
import { tellerRequest } from './support/teller-client';

const PACKAGE_DIR = path.resolve(__dirname, '..');
const CLI = path.join(PACKAGE_DIR, 'dist', 'cli.js');

/** The CLI runs from dist/, as `teller-emulator` (the package's bin) does: build it first. */
beforeAll(() => {
  const tsc = require.resolve('typescript/bin/tsc', { paths: [PACKAGE_DIR] });
  const build = spawnSync(process.execPath, [tsc, '-p', path.join(PACKAGE_DIR, 'tsconfig.build.json')], {
    encoding: 'utf8',
  });
  if (build.status !== 0) throw new Error(`the build failed:\n${build.stdout}${build.stderr}`);
}, 120_000);

/** A port free right now (the OS picks it), so that the test can tell the CLI used the one it was given. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function startCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

async function waitForOutput(
  output: () => string,
  pattern: RegExp,
  timeoutMs = 20_000,
): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const match = pattern.exec(output());
    if (match) return match;
    if (Date.now() > deadline) throw new Error(`no ${pattern} in:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.once('exit', (code) => resolve(code));
  });
}

describe('the teller-emulator CLI', () => {
  let dataDir: string;

  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'teller-cli-'));
  });
  afterEach(() => {
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('when started with flags, then it listens over HTTPS, prints where the CA, client certificate and key are, serves the API with them, and stops on SIGTERM', async () => {
    const { child, output } = startCli(['--port', '0', '--data-dir', dataDir, '--environment', 'production']);
    try {
      const [, url] = await waitForOutput(
        output,
        /Teller emulator \(production\) listening on (https:\/\/127\.0\.0\.1:\d+)/,
      );
      const ca = (await waitForOutput(output, /CA certificate: +(\S+)/))[1] as string;
      const cert = (await waitForOutput(output, /client certificate: +(\S+)/))[1] as string;
      const key = (await waitForOutput(output, /client key: +(\S+)/))[1] as string;
      const signingKey = (await waitForOutput(output, /token signing key: +(\S+)/))[1] as string;
      for (const file of [ca, cert, key]) {
        expect(file.startsWith(path.join(dataDir, 'teller-emulator'))).toBe(true);
        expect(existsSync(file)).toBe(true);
      }

      const caPem = readFileSync(ca, 'utf8');
      const connect = await tellerRequest(url!, {
        method: 'POST',
        path: '/__emulator/connect/complete',
        ca: caPem,
        body: { nonce: 'cli' },
      });
      const token = (connect.body as { accessToken: string }).accessToken;
      const certificate = { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
      const accounts = await tellerRequest(url!, { path: '/accounts', ca: caPem, certificate, token });
      expect(accounts.status).toBe(200);
      expectConforms('account-list', accounts.body);
      const refused = await tellerRequest(url!, { path: '/accounts', ca: caPem, token });
      expect(refused.status).toBe(400);
      const published = await tellerRequest(url!, { path: '/__emulator/token-signing-key', ca: caPem });
      expect((published.body as { key: string }).key).toBe(signingKey);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited(child)).toBe(0);
  });

  it('when configured by environment variables with a webhook URL and no secret, then a secret is generated into the data directory and its place printed', async () => {
    const port = await freePort();
    const { child, output } = startCli([], {
      TELLER_EMULATOR_PORT: String(port),
      DATA_DIR: dataDir,
      TELLER_EMULATOR_WEBHOOK_URL: 'http://127.0.0.1:9/webhooks/teller',
    });
    try {
      const [, listening] = await waitForOutput(
        output,
        /Teller emulator \(sandbox\) listening on (https:\S+)/,
      );
      expect(listening).toBe(`https://127.0.0.1:${port}`);
      const [, file] = await waitForOutput(output, /signed with 1 secret\(s\) \(its secret is in (\S+)\)/);
      expect(file).toBe(path.join(dataDir, 'teller-emulator', 'webhook-signing-secret'));
      expect(readFileSync(file!, 'utf8').trim().length).toBeGreaterThanOrEqual(32);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited(child)).toBe(0);
  });

  it('when the settings are wrong, then it refuses to start and names every problem in one message', async () => {
    const { child, output } = startCli(
      ['--port', 'abc', '--environment', 'staging', '--webhook-url', 'nope'],
      {
        DATA_DIR: dataDir,
      },
    );

    expect(await exited(child)).toBe(2);
    const firstLine = output().split('\n')[0];
    expect(firstLine).toMatch(/^teller-emulator cannot start: /);
    expect(firstLine).toMatch(/port must be 0-65535/);
    expect(firstLine).toMatch(/environment must be one of sandbox, development, production/);
    expect(firstLine).toMatch(/the webhook URL must be an absolute http or https URL/);
    expect(existsSync(path.join(dataDir, 'teller-emulator'))).toBe(false);
  });
});
