import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import dotenv from 'dotenv';
import { Webhook } from 'standardwebhooks';

/**
 * `npm run webhook-listener`: a stand-in for the website's notification endpoint, for local work. It
 * verifies each notification as the website must (Standard Webhooks, with the `standardwebhooks`
 * package) and prints it on one line; anything that does not verify is refused with 400 and said so.
 */

const USAGE =
  'usage: npm run webhook-listener -- [--port 4020] [--secret whsec_…] [--status 200]\n' +
  '  --secret   the WEBSITE_WEBHOOK_SECRET to verify with (default: WEBSITE_WEBHOOK_SECRET, else the one\n' +
  '             `npm start` generated in DATA_DIR/website-webhook-secret)\n' +
  '  --status   what to answer a verified notification (e.g. 500 to watch the service retry)';

/** Notifications are a few hundred bytes; anything this large is not one. */
const MAX_BODY_BYTES = 64 * 1024;

function fail(message: string): never {
  process.stderr.write(`${message}\n${USAGE}\n`);
  process.exit(2);
}

/**
 * The verifiers of the secrets given, or of the one `npm start` generates: read at each notification,
 * so the listener can start before the service has generated it.
 */
function verifiersFrom(option: string | undefined): { source: string; read: () => Webhook[] } {
  const given = option ?? process.env.WEBSITE_WEBHOOK_SECRET;
  const toVerifiers = (value: string) => value.split(',').map((secret) => new Webhook(secret.trim()));
  if (given) {
    try {
      const verifiers = toVerifiers(given);
      return { source: option ? '--secret' : 'WEBSITE_WEBHOOK_SECRET', read: () => verifiers };
    } catch (error) {
      fail(`the secret is not a whsec_ secret (${(error as Error).message})`);
    }
  }
  const generated = path.join(process.env.DATA_DIR ?? './data', 'website-webhook-secret');
  return {
    source: generated,
    read: () => (existsSync(generated) ? toVerifiers(readFileSync(generated, 'utf8').trim()) : []),
  };
}

function run(): void {
  dotenv.config({ quiet: true });
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '4020' },
      secret: { type: 'string' },
      status: { type: 'string', default: '200' },
    },
  });
  const port = Number(values.port);
  const status = Number(values.status);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) fail('--port must be a port number');
  if (!Number.isInteger(status) || status < 200 || status > 599) fail('--status must be an HTTP status');
  const secrets = verifiersFrom(values.secret);

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) req.destroy();
      else chunks.push(chunk);
    });
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = Object.fromEntries(
        ['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((name) => [
          name,
          String(req.headers[name] ?? ''),
        ]),
      );
      const time = new Date().toISOString();
      const verified = secrets.read().some((verifier) => {
        try {
          verifier.verify(body, headers);
          return true;
        } catch {
          return false;
        }
      });
      if (!verified) {
        process.stdout.write(
          `${time}  REFUSED  ${req.method} ${req.url}: no valid signature (answered 400)\n`,
        );
        res.writeHead(400).end();
        return;
      }
      const { type, data } = JSON.parse(body) as { type: string; data: Record<string, unknown> };
      process.stdout.write(`${time}  ${type}  ${headers['webhook-id']}  ${JSON.stringify(data)}\n`);
      res.writeHead(status).end();
    });
  });
  server.requestTimeout = 10_000;
  server.listen(port, '127.0.0.1', () => {
    const { port: bound } = server.address() as { port: number };
    process.stdout.write(
      `Listening for notifications on http://127.0.0.1:${bound}/ ` +
        `(start the service with WEBSITE_WEBHOOK_URL=http://127.0.0.1:${bound}/); verifying with ` +
        `${secrets.source}, answering ${status}\n`,
    );
  });
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

run();
