import net from 'node:net';

/**
 * What a cut does to connections opened while it lasts: `refuse` closes the listening port, so a
 * connect fails at once (ECONNREFUSED, like a database host that is down); `blackhole` accepts and
 * never answers, which is what a network partition looks like from the client.
 */
export type CutMode = 'refuse' | 'blackhole';

interface ForwardedPair {
  downstream: net.Socket;
  upstream: net.Socket;
}

/**
 * A TCP hop between the service and Postgres that a test can cut and restore: a network failure
 * without touching the database server, whose backends stay alive behind the cut.
 */
export class TcpProxy {
  private readonly server = net.createServer((socket) => this.accept(socket));
  private readonly pairs = new Set<ForwardedPair>();
  private readonly held = new Set<net.Socket>();
  private state: 'open' | CutMode = 'open';
  private listeningPort = 0;

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Listens on 127.0.0.1 (a free port) and forwards to the server of `databaseUrl`. */
  static async start(databaseUrl: string): Promise<TcpProxy> {
    const target = new URL(databaseUrl);
    const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
    await proxy.listen(0);
    return proxy;
  }

  get port(): number {
    return this.listeningPort;
  }

  /** How many client connections are forwarded to the server right now. */
  get forwardedConnections(): number {
    return this.pairs.size;
  }

  /** The same database URL (user, database, options), reached through this proxy. */
  proxiedUrl(databaseUrl: string): string {
    const url = new URL(databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(this.listeningPort);
    return url.toString();
  }

  /** Drops every open connection, both ways, and treats new ones as `mode` says until `restore()`. */
  async cut(mode: CutMode = 'refuse'): Promise<void> {
    if (this.state !== 'open') throw new Error(`the proxy is already cut (${this.state})`);
    this.state = mode;
    for (const pair of this.pairs) this.drop(pair);
    if (mode === 'refuse') await this.stopListening();
  }

  /** Forwards new connections again, on the same port; connections held by a black hole are dropped. */
  async restore(): Promise<void> {
    if (this.state === 'open') return;
    const previous = this.state;
    this.state = 'open';
    for (const socket of this.held) socket.destroy();
    this.held.clear();
    if (previous === 'refuse') await this.listen(this.listeningPort);
  }

  async close(): Promise<void> {
    this.state = 'refuse';
    for (const pair of this.pairs) this.drop(pair);
    for (const socket of this.held) socket.destroy();
    this.held.clear();
    await this.stopListening();
  }

  private accept(downstream: net.Socket): void {
    downstream.on('error', () => undefined);
    if (this.state !== 'open') {
      // Accepted, never read, never answered: the client waits for its own timeout.
      this.held.add(downstream);
      downstream.on('close', () => this.held.delete(downstream));
      return;
    }
    const upstream = net.connect({ host: this.targetHost, port: this.targetPort });
    upstream.on('error', () => undefined);
    const pair = { downstream, upstream };
    this.pairs.add(pair);
    downstream.on('close', () => this.drop(pair));
    upstream.on('close', () => this.drop(pair));
    downstream.pipe(upstream);
    upstream.pipe(downstream);
  }

  private drop(pair: ForwardedPair): void {
    this.pairs.delete(pair);
    pair.downstream.destroy();
    pair.upstream.destroy();
  }

  private listen(port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ port, host: '127.0.0.1' }, () => {
        this.server.removeListener('error', reject);
        this.listeningPort = (this.server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  }

  private stopListening(): Promise<void> {
    if (!this.server.listening) return Promise.resolve();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
