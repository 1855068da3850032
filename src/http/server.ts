import http, { type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';

/**
 * How long and how many: a client that sends its headers or its body slowly is cut within about ten
 * seconds (Node checks these timers every `connectionsCheckingIntervalMs`), and at most
 * `maxConnections` connections are open at once. Answers may take longer: the limits bound receiving.
 */
export const SERVER_LIMITS = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
  connectionsCheckingIntervalMs: 1_000,
} as const;

/** Every open client connection of each listening server, so that shutdown can cut some and spare others. */
const openConnections = new WeakMap<Server, Set<Socket>>();
/** Connections whose request runs work that shutdown carries to its end, with the answer still owed. */
const carriedConnections = new WeakMap<Socket, ServerResponse>();

/**
 * A port another process holds, said in one line that names the setting to change: the start fails on
 * it without a stack, which would only bury the setting's name.
 */
export class PortInUseError extends Error {
  constructor(
    readonly variable: string,
    readonly port: number,
    readonly host: string,
  ) {
    super(
      `${variable} ${port} on ${host} is in use by another process: stop it or set ${variable} to a free port`,
    );
    this.name = 'PortInUseError';
  }
}

/** `error` as a PortInUseError naming `variable` when it says the port is taken; else `error` itself. */
export function explainBusyPort(error: unknown, variable: string, port: number, host: string): unknown {
  return (error as NodeJS.ErrnoException | undefined)?.code === 'EADDRINUSE'
    ? new PortInUseError(variable, port, host)
    : error;
}

/**
 * Listens with the app behind a server whose every wait is bounded; resolves once it listens. `variable`
 * is the setting the port came from, named if the port is taken.
 */
export async function listen(
  app: Express,
  options: { port: number; host: string; maxConnections: number; variable?: string },
): Promise<Server> {
  const server = http.createServer(
    {
      headersTimeout: SERVER_LIMITS.headersTimeoutMs,
      requestTimeout: SERVER_LIMITS.requestTimeoutMs,
      keepAliveTimeout: SERVER_LIMITS.keepAliveTimeoutMs,
      connectionsCheckingInterval: SERVER_LIMITS.connectionsCheckingIntervalMs,
    },
    app,
  );
  server.maxConnections = options.maxConnections;
  const sockets = new Set<Socket>();
  openConnections.set(server, sockets);
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await listenOn(server, options.port, options.host, options.variable);
  return server;
}

/**
 * Resolves once `server` listens, rejects when it cannot (a PortInUseError naming `variable` when the
 * port is taken); no listener of its own is left behind.
 */
export function listenOn(server: Server, port: number, host: string, variable?: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const refuse = (error: Error) => reject(variable ? explainBusyPort(error, variable, port, host) : error);
    server.once('error', refuse);
    server.listen(port, host, () => {
      server.removeListener('error', refuse);
      resolve();
    });
  });
}

/**
 * Marks the connection of this response as carrying work that shutdown lets finish (an exchange whose
 * Plaid call started): when the shutdown timeout cuts the other connections, this one stays until its
 * answer is sent. Only for this request: a kept-alive connection is ordinary again once it is answered.
 */
export function carryPastShutdown(res: ServerResponse): void {
  const socket = res.socket;
  if (!socket) return;
  carriedConnections.set(socket, res);
  res.once('close', () => carriedConnections.delete(socket));
}

/**
 * Cuts every client connection but those carried past shutdown, whose answers then close their
 * connections after them; returns how many were spared.
 */
export function cutConnectionsNotCarried(server: Server): number {
  const sockets = openConnections.get(server);
  if (!sockets) {
    server.closeAllConnections();
    return 0;
  }
  let spared = 0;
  for (const socket of sockets) {
    const carried = carriedConnections.get(socket);
    if (!carried) {
      socket.destroy();
      continue;
    }
    spared += 1;
    if (!carried.headersSent) carried.setHeader('Connection', 'close');
  }
  return spared;
}
