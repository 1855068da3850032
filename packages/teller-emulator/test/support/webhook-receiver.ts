import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  headers: IncomingMessage['headers'];
  /** The exact bytes received. */
  rawBody: string;
  at: number;
}

/**
 * A local webhook receiver (HTTP, or HTTPS with the given certificate) that records every request and
 * answers with the statuses it is told, in order, then 200.
 */
export class WebhookReceiver {
  readonly received: ReceivedRequest[] = [];
  private statuses: number[] = [];
  private waiters: { count: number; resolve: () => void }[] = [];
  private server: http.Server | https.Server | undefined;

  answerWith(...statuses: number[]): void {
    this.statuses = statuses;
  }

  async listen(tls?: { cert: string; key: string }): Promise<string> {
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        this.received.push({
          headers: req.headers,
          rawBody: Buffer.concat(chunks).toString('utf8'),
          at: Date.now(),
        });
        res.writeHead(this.statuses.shift() ?? 200).end();
        this.waiters = this.waiters.filter((waiter) => {
          if (this.received.length < waiter.count) return true;
          waiter.resolve();
          return false;
        });
      });
    };
    this.server = tls ? https.createServer(tls, handler) : http.createServer(handler);
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', () => resolve()));
    const { port } = this.server.address() as AddressInfo;
    return `${tls ? 'https' : 'http'}://${tls ? 'localhost' : '127.0.0.1'}:${port}/webhooks/teller`;
  }

  /** Resolves once `count` requests have arrived. */
  waitFor(count: number): Promise<void> {
    if (this.received.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }

  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
