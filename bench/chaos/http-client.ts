import http, { type IncomingHttpHeaders } from 'node:http';
import { sleep } from '../processes';
import type { RequestLedger, Side } from './request-ledger';

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The body ended before its last chunk. */
  cutShort: boolean;
  /** The problem body's `code`, when there is one. */
  code?: string;
}

/** No answer came: the connection broke or the client gave up; the request may or may not have taken effect. */
export class NoAnswer extends Error {
  constructor(
    readonly reason: 'socket error' | 'client timeout',
    message: string,
  ) {
    super(message);
    this.name = 'NoAnswer';
  }
}

export interface CallSpec {
  method: 'GET' | 'POST';
  path: string;
  /** JSON-encoded unless `raw` is given. */
  body?: unknown;
  /** Exactly these bytes, e.g. a Plaid webhook whose signature covers them. */
  raw?: string;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 30_000;

function problemCode(headers: IncomingHttpHeaders, text: string): string | undefined {
  if (!/json/.test(String(headers['content-type']))) return undefined;
  try {
    const parsed = JSON.parse(text) as { code?: unknown; error_code?: unknown };
    const code = parsed.code ?? parsed.error_code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * One request on a connection of its own (no keep-alive): the load balancer routes every request anew,
 * as it would once an instance has died, and a killed instance cuts only the requests it was serving.
 */
function sendOnce(url: URL, spec: CallSpec, headers: Record<string, string>): Promise<Answer> {
  const body = spec.raw ?? (spec.body === undefined ? undefined : JSON.stringify(spec.body));
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      outcome();
    };
    const request = http.request({
      hostname: url.hostname,
      port: url.port,
      path: `${url.pathname}${url.search}`,
      method: spec.method,
      agent: false,
      headers: {
        ...headers,
        ...(body === undefined
          ? {}
          : { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)) }),
        ...spec.headers,
      },
    });
    const timeoutMs = spec.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const timer = setTimeout(() => {
      settle(() => reject(new NoAnswer('client timeout', `no complete answer within ${timeoutMs} ms`)));
      request.destroy();
    }, timeoutMs);
    request.on('error', (error) => settle(() => reject(new NoAnswer('socket error', error.message))));
    request.on('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', () => undefined);
      response.on('close', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        settle(() =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            text,
            cutShort: !response.complete,
            code: problemCode(response.headers, text),
          }),
        );
      });
    });
    request.end(body);
  });
}

/** Calls one server (the load balancer, or the emulator) and writes every request into the ledger. */
export class RecordingClient {
  constructor(
    private readonly baseUrl: string,
    private readonly side: Side,
    private readonly ledger: RequestLedger,
    private readonly defaultHeaders: Record<string, string> = {},
  ) {}

  /** Throws NoAnswer (after recording it) when nothing came back. */
  async call(endpoint: string, spec: CallSpec, headers: Record<string, string> = {}): Promise<Answer> {
    const startedAt = Date.now();
    try {
      const answer = await sendOnce(new URL(spec.path, this.baseUrl), spec, {
        ...this.defaultHeaders,
        ...headers,
      });
      this.ledger.add({
        endpoint,
        side: this.side,
        startedAt,
        endedAt: Date.now(),
        status: answer.status,
        code: answer.code,
        retryAfter: answer.headers['retry-after'] !== undefined,
        cutShort: answer.cutShort,
      });
      return answer;
    } catch (error) {
      const reason = error instanceof NoAnswer ? error.reason : 'socket error';
      this.ledger.add({
        endpoint,
        side: this.side,
        startedAt,
        endedAt: Date.now(),
        retryAfter: false,
        cutShort: false,
        noAnswer: reason,
      });
      throw error instanceof NoAnswer ? error : new NoAnswer('socket error', String(error));
    }
  }
}

export interface Retrying {
  /** Whether this answer is one to try again (with the same request). */
  retryOn: (answer: Answer) => boolean;
  /** No new attempt starts after this time. */
  until: number;
  /** The most attempts; unlimited when absent. */
  attempts?: number;
}

export interface Settled {
  /** The last answer, or undefined when no attempt got one. */
  answer: Answer | undefined;
  /** False when the last attempt was still one to retry (no answer, or a retryable one) when time ran out. */
  final: boolean;
  attempts: number;
}

/** Retry-After tells the wait; capped so that a 30 s PROVIDER_UNAVAILABLE does not idle a worker for long. */
function waitBefore(answer: Answer | undefined): number {
  const header = Number(answer?.headers['retry-after']);
  const asked = Number.isFinite(header) && header > 0 ? header * 1000 : 300;
  return Math.min(asked, 2_000) * (0.5 + Math.random() / 2);
}

/**
 * The same request again until it gets a final answer: what the website does with an exchange or a
 * removal whose answer was lost (the service is idempotent for both), so that its final answer decides.
 */
export async function callUntilSettled(attempt: () => Promise<Answer>, retrying: Retrying): Promise<Settled> {
  let answer: Answer | undefined;
  for (let attempts = 1; ; attempts += 1) {
    let retry: boolean;
    try {
      answer = await attempt();
      retry = retrying.retryOn(answer);
    } catch (error) {
      if (!(error instanceof NoAnswer)) throw error;
      answer = undefined;
      retry = true;
    }
    if (!retry) return { answer, final: true, attempts };
    const out = retrying.attempts !== undefined && attempts >= retrying.attempts;
    if (out || Date.now() >= retrying.until) return { answer, final: false, attempts };
    await sleep(waitBefore(answer));
  }
}
