import type http from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type https from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  FaultQueue,
  playFault,
  type Answer,
  type Fault,
  type FaultQueueOptions,
  type FaultSpecBase,
  type InjectedError,
} from './fault-queue';
import type { SendJson } from './http-io';

/** A call as an emulator records it: at least the status it was answered with (0 until then). */
export interface RecordedCallBase {
  status: number;
}

export interface EmulatorServerOptions<Spec extends FaultSpecBase, Call> extends FaultQueueOptions<
  Spec,
  Call
> {
  /** How the emulator answers JSON (its provider's `Content-Type`). */
  send: SendJson;
}

/**
 * What an emulator's server is besides its provider's API: it listens and closes, keeps the faults
 * waiting for calls (`FaultCall` is what a fault is matched against) and the log of calls, which its
 * control API shows. The emulator builds the `http`/`https` server and handles the calls.
 */
export abstract class EmulatorServer<
  Spec extends FaultSpecBase,
  FaultCall,
  Recorded extends RecordedCallBase,
> {
  protected recorded: Recorded[] = [];
  private readonly faults: FaultQueue<Spec, FaultCall>;
  private readonly send: SendJson;
  private server: http.Server | https.Server | undefined;

  protected constructor(options: EmulatorServerOptions<Spec, FaultCall>) {
    this.faults = new FaultQueue(options);
    this.send = options.send;
  }

  injectFault(spec: Spec): void {
    this.faults.add(spec);
  }

  clearFaults(): void {
    this.faults.clear();
  }

  pendingFaults(): Fault<Spec>[] {
    return this.faults.list();
  }

  clearCalls(): void {
    this.recorded = [];
  }

  protected async serve(server: http.Server | https.Server, port: number, host: string): Promise<void> {
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
  }

  /** Where it listens; undefined when it does not. */
  protected address(): AddressInfo | undefined {
    return (this.server?.address() as AddressInfo | null | undefined) ?? undefined;
  }

  /** Stops listening, cutting the connections still open, so closing never waits on a client. */
  protected async closeServer(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Logs the call and gives the answer that records its status. */
  protected recordCall(call: Recorded, res: ServerResponse): Answer {
    // Recorded on arrival, so a test sees a call its client already gave up on; the status follows.
    this.recorded.push(call);
    return (status, body, headers) => {
      call.status = status;
      this.send(res, status, body, headers);
    };
  }

  /** Plays the first fault waiting for this call, if any; true when it answered or dropped the call. */
  protected playFaultFor(
    call: FaultCall,
    req: IncomingMessage,
    answer: Answer,
    injectedError: InjectedError<Spec>,
  ): Promise<boolean> {
    return playFault(this.faults.take(call), req.socket, answer, injectedError);
  }
}
