import http from 'node:http';
import https from 'node:https';
import { rootCertificates } from 'node:tls';
import { WebhookOutbox } from 'emulator-kit';
import { tellerSignature, type TellerWebhookEvent } from './webhook-signing';

/**
 * Teller's pages say nothing of retries nor of how long it waits (https://teller.io/docs/api/webhooks).
 * Assumed here, as webhook senders commonly do: a delivery that fails (a non-2xx answer, no answer
 * within 10 s, a refused connection) is tried again after each of these delays, with the same event `id`
 * and a fresh `t` and signatures each time, since a receiver rejects signatures older than 3 minutes.
 */
export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = [1_000, 4_000, 16_000, 64_000, 256_000];
const ATTEMPT_TIMEOUT_MS = 10_000;

export interface DeliveryAttempt {
  at: string;
  /** The `Teller-Signature` header of this attempt. */
  teller_signature: string;
  /** The receiver's HTTP status; null when it did not answer. */
  status: number | null;
  /** Why the attempt failed without an answer (refused, timed out); null otherwise. */
  error: string | null;
}

export interface SentWebhook {
  id: string;
  type: string;
  url: string;
  body: TellerWebhookEvent;
  /** The exact bytes sent (every attempt sends the same). */
  raw_body: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: DeliveryAttempt[];
}

export interface WebhookSenderOptions {
  now: () => number;
  retryDelaysMs: readonly number[];
  /** CA certificates (PEM) trusted for HTTPS receivers besides the public roots. */
  trustedCas: readonly string[];
}

/**
 * Sends signed webhooks without delaying the answer that caused them, retries failed deliveries,
 * records every attempt, and lets tests wait for deliveries still in flight (retries included).
 */
export class WebhookSender extends WebhookOutbox<SentWebhook> {
  constructor(private readonly options: WebhookSenderOptions) {
    super();
  }

  /** `secrets` is read at each attempt: a secret rotated between attempts signs the next one. */
  send(url: string, event: TellerWebhookEvent, secrets: () => readonly string[]): SentWebhook {
    const record: SentWebhook = {
      id: event.id,
      type: event.type,
      url,
      body: event,
      raw_body: JSON.stringify(event),
      state: 'pending',
      attempts: [],
    };
    return this.dispatch(record, (closed) => this.deliver(record, secrets, closed));
  }

  private async deliver(
    record: SentWebhook,
    secrets: () => readonly string[],
    closed: AbortSignal,
  ): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      if (closed.aborted) break;
      const now = this.options.now();
      const result: DeliveryAttempt = {
        at: new Date(now).toISOString(),
        teller_signature: tellerSignature(record.raw_body, secrets(), now / 1000),
        status: null,
        error: null,
      };
      record.attempts.push(result);
      try {
        result.status = await this.post(record, result.teller_signature, closed);
        if (result.status >= 200 && result.status < 300) {
          record.state = 'delivered';
          return;
        }
      } catch (error) {
        result.error = error instanceof Error ? error.message : String(error);
      }
      const delay = this.options.retryDelaysMs[attempt];
      if (delay === undefined || closed.aborted) break;
      const waited = await sleep(delay, closed);
      if (!waited) break;
    }
    record.state = 'failed';
  }

  private post(record: SentWebhook, signature: string, closed: AbortSignal): Promise<number> {
    const url = new URL(record.url);
    const transport = url.protocol === 'https:' ? https : http;
    return new Promise<number>((resolve, reject) => {
      const request = transport.request(
        url,
        {
          method: 'POST',
          headers: {
            'Content-Type': 'application/json',
            'Content-Length': Buffer.byteLength(record.raw_body),
            'Teller-Signature': signature,
            'User-Agent': 'teller-emulator',
          },
          ca: url.protocol === 'https:' ? [...rootCertificates, ...this.options.trustedCas] : undefined,
          signal: closed,
          timeout: ATTEMPT_TIMEOUT_MS,
          agent: false,
        },
        (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
          response.on('error', reject);
        },
      );
      request.on('timeout', () => request.destroy(new Error(`no answer within ${ATTEMPT_TIMEOUT_MS} ms`)));
      request.on('error', (error) => reject(describe(error)));
      request.end(record.raw_body);
    });
  }
}

/** Node says "connect ECONNREFUSED 127.0.0.1:1"; keep that, and name an abort plainly. */
function describe(error: Error): Error {
  if (error.name === 'AbortError') return new Error('the emulator closed');
  return error;
}

function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    // A pending retry does not keep a finished test process alive; the listening server keeps a real one.
    timer.unref();
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
