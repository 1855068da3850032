import http from 'node:http';
import net from 'node:net';

type Health = 'ready' | 'unready' | 'down';

interface Backend {
  name: string;
  port: number;
  health: Health;
  /** Connections handed to it so far, and open right now. */
  connections: number;
  open: number;
}

const HEALTH_INTERVAL_MS = 250;
const HEALTH_TIMEOUT_MS = 1_000;

/**
 * A round-robin TCP load balancer on 127.0.0.1 in front of the instances, as a real one would be:
 * it polls each instance's /readyz and sends new connections to ready ones, to any that still accepts
 * when none is ready (a database outage makes both unready; their 503s are what clients should get),
 * and to the next one when a connect fails. Nothing reaches an instance before its connect
 * succeeded, so a connection it cannot place is closed without having done anything.
 */
export class LoadBalancer {
  private readonly backends: Backend[];
  private readonly server = net.createServer((socket) => this.accept(socket));
  private readonly open = new Set<net.Socket>();
  private next = 0;
  private poller: NodeJS.Timeout | undefined;
  /** Client connections closed because no instance accepted them. */
  unplaced = 0;

  constructor(backends: { name: string; port: number }[]) {
    this.backends = backends.map((backend) => ({ ...backend, health: 'down', connections: 0, open: 0 }));
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => resolve());
    });
    this.poller = setInterval(() => void this.pollHealth(), HEALTH_INTERVAL_MS);
    await this.pollHealth();
    const { port } = this.server.address() as net.AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** Connections handed to each instance so far. */
  connectionCounts(): Record<string, number> {
    return Object.fromEntries(this.backends.map((backend) => [backend.name, backend.connections]));
  }

  openConnections(name: string): number {
    return this.backends.find((backend) => backend.name === name)?.open ?? 0;
  }

  async close(): Promise<void> {
    clearInterval(this.poller);
    for (const socket of this.open) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Ready instances first (in turn), then ones merely up, then the rest: a connect failure moves on. */
  private candidates(): Backend[] {
    const start = this.next++;
    const turn = this.backends.map((_, index) => this.backends[(start + index) % this.backends.length]!);
    const rank: Record<Health, number> = { ready: 0, unready: 1, down: 2 };
    return turn.sort((a, b) => rank[a.health] - rank[b.health]);
  }

  private accept(client: net.Socket): void {
    client.pause();
    client.on('error', () => undefined);
    this.open.add(client);
    client.on('close', () => this.open.delete(client));
    this.place(client, this.candidates());
  }

  private place(client: net.Socket, candidates: Backend[]): void {
    const backend = candidates.shift();
    if (!backend || client.destroyed) {
      this.unplaced += backend ? 0 : 1;
      client.destroy();
      return;
    }
    const upstream = net.connect({ host: '127.0.0.1', port: backend.port });
    upstream.once('error', () => {
      // Refused: nothing was sent, so the next instance may take the connection.
      backend.health = 'down';
      upstream.destroy();
      this.place(client, candidates);
    });
    upstream.once('connect', () => {
      backend.connections += 1;
      backend.open += 1;
      this.open.add(upstream);
      upstream.removeAllListeners('error');
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.on('close', () => {
        backend.open -= 1;
        this.open.delete(upstream);
        client.destroy();
      });
      client.on('close', () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
  }

  private async pollHealth(): Promise<void> {
    await Promise.all(
      this.backends.map(async (backend) => {
        backend.health = await probe(backend.port);
      }),
    );
  }
}

function probe(port: number): Promise<Health> {
  return new Promise((resolve) => {
    const request = http.get(
      { host: '127.0.0.1', port, path: '/readyz', agent: false, timeout: HEALTH_TIMEOUT_MS },
      (response) => {
        response.resume();
        resolve(response.statusCode === 200 ? 'ready' : 'unready');
      },
    );
    // Accepted but silent for a second: up, not ready.
    request.on('timeout', () => {
      request.destroy();
      resolve('unready');
    });
    request.on('error', () => resolve('down'));
  });
}
