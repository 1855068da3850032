import type { Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { listen } from '../../src/http/server';
import { endpointOf, pathOf } from '../support/requests';
import { INTERNAL_SECRET, startService, type ServiceContext } from '../support/service';

/** The request line of an endpoint, as a raw client writes it. */
const requestLine = (operationId: string) => {
  const endpoint = endpointOf(operationId);
  return `${endpoint.method.toUpperCase()} ${pathOf(endpoint)} HTTP/1.1\r\n`;
};

/** A raw connection, to send a request as slowly, or as partly, as a hostile client would. */
async function connect(server: Server): Promise<{ socket: net.Socket; closed: Promise<string> }> {
  const { port } = server.address() as AddressInfo;
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  socket.on('error', () => undefined);
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  return { socket, closed };
}

const secondsSince = (started: number) => (Date.now() - started) / 1000;

describe('slow and greedy clients', () => {
  let service: ServiceContext;
  let server: Server;
  beforeAll(async () => {
    service = await startService();
    server = await listen(service.app, { port: 0, host: '127.0.0.1', maxConnections: 5 });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await service.close();
  });

  it('when a client sends its headers or its body slowly, then its connection is ended within about ten seconds', async () => {
    const started = Date.now();
    const slowHeaders = await connect(server);
    const slowBody = await connect(server);
    slowHeaders.socket.write(`${requestLine('createLinkToken')}Host: x\r\n`);
    slowBody.socket.write(
      `${requestLine('createLinkToken')}Host: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n` +
        `X-Internal-Secret: ${INTERNAL_SECRET}\r\n\r\n{`,
    );
    const drip = setInterval(() => {
      slowHeaders.socket.write('X-Drip: 1\r\n');
      slowBody.socket.write(' ');
    }, 500);

    try {
      const [headersAnswer, bodyAnswer] = await Promise.all([slowHeaders.closed, slowBody.closed]);
      const elapsed = secondsSince(started);

      expect(elapsed).toBeGreaterThan(9);
      expect(elapsed).toBeLessThan(13);
      expect(headersAnswer).toMatch(/^HTTP\/1.1 408/);
      expect(bodyAnswer).toMatch(/^HTTP\/1.1 408/);
    } finally {
      clearInterval(drip);
    }
  }, 20_000);

  it('when a webhook comes without a well-formed Plaid-Verification, then it is refused before its body is read', async () => {
    const started = Date.now();
    const client = await connect(server);
    // Headers announce a body that never comes: an answer can only come from refusing without it.
    client.socket.write(
      `${requestLine('receivePlaidWebhook')}Host: x\r\nContent-Type: application/json\r\nContent-Length: 8000\r\n` +
        'Plaid-Verification: not-a-jwt\r\n\r\n',
    );

    const answer = await client.closed;

    expect(secondsSince(started)).toBeLessThan(2);
    expect(answer).toMatch(/^HTTP\/1.1 401/);
    expect(answer).toContain('"code":"WEBHOOK_UNVERIFIED"');
  });

  it('when more connections are opened than the server allows, then the extra ones are closed at once', async () => {
    const held = await Promise.all(Array.from({ length: 5 }, () => connect(server)));
    const extra = await connect(server);
    const started = Date.now();

    const answer = await extra.closed;

    expect(secondsSince(started)).toBeLessThan(2);
    expect(answer).toBe('');
    for (const { socket } of held) expect(socket.destroyed).toBe(false);
    for (const { socket } of held) socket.destroy();
  });
});
