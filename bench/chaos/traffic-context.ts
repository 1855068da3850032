import type { PlaidEmulator } from 'plaid-emulator';
import type { TellerEmulator } from 'teller-emulator';
import type { Gate } from './gate';
import type { RecordingClient } from './http-client';
import type { Random } from './random';
import type { WebsiteState } from './website-state';

/** What every operation of the traffic works with. */
export interface TrafficContext {
  random: Random;
  /** The service, through the load balancer. */
  service: RecordingClient;
  /** The emulator's HTTP API: Link (`/__emulator/link/complete`), sandbox calls and Item events. */
  emulatorHttp: RecordingClient;
  /** The same emulator in this process: its sent webhooks, and its key for signing Plaid's retries. */
  emulator: PlaidEmulator;
  /** Teller's emulator in this process: Connect (`completeConnect`), its enrollments and calls. */
  teller: TellerEmulator;
  state: WebsiteState;
  secrets: { internal: string; admin: string };
  plaid: { clientId: string; secret: string };
  /** Where the Items' webhooks go: the load balancer's /webhooks/plaid. */
  webhookUrl: string;
  /** Link completions one at a time, so that the Item each one makes is known for sure. */
  linkGate: Gate;
  /** No retry starts after this time. */
  retryUntil: () => number;
  /** True once no new operation should start. */
  stopping: () => boolean;
  /** Failures of the run itself (not of the service); any fails the run. */
  harnessErrors: string[];
}

export const asWebsite = (context: TrafficContext) => ({ 'X-Internal-Secret': context.secrets.internal });
export const asAdmin = (context: TrafficContext) => ({ 'X-Internal-Secret': context.secrets.admin });
