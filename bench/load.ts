import autocannon from 'autocannon';

/** autocannon's context is one plain object per connection, handed to both hooks of a request. */
export type RequestSetup = (
  request: autocannon.Request,
  context: Record<string, unknown>,
) => autocannon.Request;
export type ResponseHandler = (status: number, body: string, context: Record<string, unknown>) => void;

export interface LoadSpec {
  url: string;
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  connections: number;
  /** A timed run; or `amount` requests, however long they take. */
  seconds?: number;
  amount?: number;
  /** Called before every request: the body (or anything else) of the next request. */
  setupRequest?: RequestSetup;
  onResponse?: ResponseHandler;
}

export interface RoundResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  /** Non-2xx responses plus socket errors and timeouts. */
  errors: number;
  /** Socket errors and timeouts alone. */
  socketErrors: number;
  fiveHundreds: number;
  completed: number;
  seconds: number;
  /** The run hit the bench's own time limit and was stopped. */
  cutOff: boolean;
}

// A round that runs this long past its planned end is stopped: the service has stopped answering.
const OVERRUN_MS = 60_000;
const AMOUNT_RUN_LIMIT_MS = 300_000;

export function runLoad(spec: LoadSpec): Promise<RoundResult> {
  const limitMs = spec.amount !== undefined ? AMOUNT_RUN_LIMIT_MS : (spec.seconds ?? 0) * 1_000 + OVERRUN_MS;
  // autocannon ends a run on its next one-second tick: for a run of a set amount its duration is
  // rounded up to whole seconds, so such a run is timed here, up to its last answer.
  const startedAt = performance.now();
  let lastAnswerAt: number | undefined;
  const onResponse: ResponseHandler | undefined =
    spec.amount === undefined
      ? spec.onResponse
      : (status, body, context) => {
          lastAnswerAt = performance.now();
          spec.onResponse?.(status, body, context);
        };
  return new Promise((resolve, reject) => {
    let cutOff = false;
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        ...(spec.amount !== undefined ? { amount: spec.amount } : { duration: spec.seconds }),
        requests: [
          {
            method: spec.method,
            path: spec.path,
            headers: spec.headers,
            // An absent hook must be absent: autocannon takes an undefined one for a replacement.
            ...(spec.setupRequest && {
              setupRequest: spec.setupRequest as autocannon.Request['setupRequest'],
            }),
            ...(onResponse && { onResponse: onResponse as autocannon.Request['onResponse'] }),
          },
        ],
      },
      (error, result) => {
        clearTimeout(guard);
        if (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
          return;
        }
        const seconds = lastAnswerAt === undefined ? result.duration : (lastAnswerAt - startedAt) / 1_000;
        resolve(summarize(result, seconds, cutOff));
      },
    );
    const guard = setTimeout(() => {
      cutOff = true;
      instance.stop();
    }, limitMs);
  });
}

function summarize(result: autocannon.Result, seconds: number, cutOff: boolean): RoundResult {
  const completed = result.requests.total;
  return {
    requestsPerSecond: seconds > 0 ? completed / seconds : 0,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.non2xx + result.errors,
    socketErrors: result.errors,
    fiveHundreds: result['5xx'],
    completed,
    seconds,
    cutOff,
  };
}

/** The round with the median throughput, whole, so that its latencies belong to its throughput. */
export function pickMedianRound(rounds: RoundResult[]): RoundResult {
  const sorted = [...rounds].sort((a, b) => a.requestsPerSecond - b.requestsPerSecond);
  const median = sorted[Math.floor(sorted.length / 2)];
  if (!median) throw new Error('no rounds to summarize');
  return median;
}

export interface MeasuredRow {
  median: RoundResult;
  /** Over every round, not only the median one: an error anywhere shows. */
  errors: number;
  fiveHundreds: number;
  rounds: RoundResult[];
}

export function toMeasuredRow(rounds: RoundResult[]): MeasuredRow {
  return {
    median: pickMedianRound(rounds),
    errors: rounds.reduce((sum, round) => sum + round.errors, 0),
    fiveHundreds: rounds.reduce((sum, round) => sum + round.fiveHundreds, 0),
    rounds,
  };
}

/** JSON bodies made by a function, one per request. */
export function bodyFrom(makeBody: () => unknown): RequestSetup {
  return (request) => ({ ...request, body: JSON.stringify(makeBody()) });
}
