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
  /** Headers every answer carries (e.g. a Retry-After). */
  headers: Record<string, string> = {};
  private server: http.Server | undefined;
  private holding = false;
  private held: (() => void)[] = [];

  /** Listens on 127.0.0.1, on `port` when given (to come back where it was after `close()`). */
  async start(port = 0): Promise<this> {
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
        const answer = () => res.writeHead(this.status, this.headers).end();
        if (this.holding) this.held.push(answer);
        else answer();
      });
    });
    await new Promise<void>((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(port, '127.0.0.1', () => {
        this.server?.removeListener('error', reject);
        resolve();
      });
    });
    return this;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port()}${path}`;
  }

  port(): number {
    return (this.server?.address() as AddressInfo).port;
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
