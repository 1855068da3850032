import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  path: string;
  headers: IncomingHttpHeaders;
  /** The bytes exactly as they arrived. */
  raw: Buffer;
  body: Record<string, unknown>;
}

/** A stand-in for a webhook endpoint on 127.0.0.1: it records every POST and answers `status`. */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  status = 200;
  private server: http.Server | undefined;
  private holding = false;
  private held: (() => void)[] = [];

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        this.received.push({
          path: req.url ?? '/',
          headers: req.headers,
          raw,
          body: JSON.parse(raw.toString('utf8')) as Record<string, unknown>,
        });
        const answer = () => res.writeHead(this.status).end();
        if (this.holding) this.held.push(answer);
        else answer();
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(path = '/hook'): string {
    const address = this.server?.address() as AddressInfo;
    return `http://127.0.0.1:${address.port}${path}`;
  }

  /** Hold every answer until `release()`, like an endpoint that is slow to respond. */
  hold(): void {
    this.holding = true;
  }

  release(): void {
    this.holding = false;
    for (const answer of this.held.splice(0)) answer();
  }

  at(path: string): ReceivedWebhook[] {
    return this.received.filter((webhook) => webhook.path === path);
  }

  async close(): Promise<void> {
    this.release();
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
