import path from 'node:path';
import type { HostMessage, HostRequest } from './emulator-protocol';
import { findFreePort, startNodeProcess, type BenchProcess } from './processes';

const START_TIMEOUT_MS = 20_000;
const REPLY_TIMEOUT_MS = 60_000;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** The bench's handle on a Plaid emulator running in its own process (bench/emulator-host.ts). */
export class EmulatorProcess {
  private nextId = 1;
  private readonly waiting = new Map<
    number,
    { resolve: (result: string[]) => void; reject: (error: Error) => void; timer: NodeJS.Timeout }
  >();

  private constructor(
    readonly process: BenchProcess,
    readonly url: string,
  ) {
    process.child.on('message', (message: HostMessage) => {
      if (message.type === 'ready') return;
      const waiter = this.waiting.get(message.id);
      if (!waiter) return;
      this.waiting.delete(message.id);
      clearTimeout(waiter.timer);
      if (message.type === 'reply') waiter.resolve(message.result);
      else waiter.reject(new Error(`emulator: ${message.message}`));
    });
    process.child.once('exit', () => {
      for (const waiter of this.waiting.values()) {
        clearTimeout(waiter.timer);
        waiter.reject(new Error(`${process.name} exited`));
      }
      this.waiting.clear();
    });
  }

  static async start(name: string, credentials: { clientId: string; secret: string }) {
    const port = await findFreePort();
    const entry = startNodeProcess(name, path.join(__dirname, 'emulator-host.js'), {
      env: {
        PATH: process.env.PATH,
        PORT: String(port),
        PLAID_CLIENT_ID: credentials.clientId,
        PLAID_SECRET: credentials.secret,
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${name} did not start within ${START_TIMEOUT_MS} ms`)),
        START_TIMEOUT_MS,
      );
      entry.child.on('message', (message: HostMessage) => {
        if (message.type !== 'ready') return;
        clearTimeout(timer);
        resolve(message.url);
      });
      entry.child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${name} exited with ${code} before it was ready`));
      });
    });
    return new EmulatorProcess(entry, url);
  }

  private ask(request: DistributiveOmit<HostRequest, 'id'>): Promise<string[]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${this.process.name} did not answer ${request.op} within ${REPLY_TIMEOUT_MS} ms`));
      }, REPLY_TIMEOUT_MS);
      this.waiting.set(id, { resolve, reject, timer });
      this.process.child.send({ ...request, id } as HostRequest);
    });
  }

  /** Public tokens for new Items, as Plaid Link hands them to the website, each usable once. */
  mintPublicTokens(count: number, institutionId = 'ins_109508'): Promise<string[]> {
    return this.ask({ op: 'mint-public-tokens', count, institutionId });
  }

  listItemIds(): Promise<string[]> {
    return this.ask({ op: 'list-item-ids' });
  }

  /** `Plaid-Verification` values for `bodies`, signed with the emulator's current key at `iats` (Unix seconds). */
  signWebhooks(bodies: string[], iats: number[]): Promise<string[]> {
    return this.ask({ op: 'sign-webhooks', bodies, iats });
  }

  async clearCalls(): Promise<void> {
    await this.ask({ op: 'clear-calls' });
  }
}
