import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PlaidEmulator } from 'plaid-emulator';
import { createTestDatabase, type TestDatabase } from '../support/database';
import {
  reachableTempDir,
  removeTempDirs,
  startMainProcess,
  type MainProcess,
} from '../support/main-process';

const PLAID = { clientId: 'tracing-client', secret: `plaid-${randomBytes(8).toString('hex')}` };

interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: Record<string, unknown> }[];
  links?: { traceId: string; spanId: string }[];
}

/** An OTLP/HTTP receiver (JSON, as the SDK's HTTP exporter sends it) that keeps every span. */
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: { scopeSpans: { spans: ReceivedSpan[] }[] }[];
        };
        for (const resource of body.resourceSpans)
          for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      }
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const attribute = (span: ReceivedSpan, key: string) => {
  const value = span.attributes.find((candidate) => candidate.key === key)?.value;
  return value === undefined ? undefined : Object.values(value)[0];
};

describe('traces over OTLP', () => {
  const tempDirs: string[] = [];
  let database: TestDatabase;
  let emulator: PlaidEmulator;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let service: MainProcess;
  const secret = randomBytes(16).toString('hex');

  beforeAll(async () => {
    database = await createTestDatabase();
    emulator = new PlaidEmulator({ credentials: PLAID });
    await emulator.listen(0);
    receiver = await startReceiver();
    service = await startMainProcess({
      NODE_ENV: 'development',
      PORT: '0',
      LOG_LEVEL: 'info',
      DATABASE_URL: database.url,
      DATA_DIR: reachableTempDir(tempDirs),
      INTERNAL_SECRET: secret,
      PLAID_CLIENT_ID: PLAID.clientId,
      PLAID_SECRET: PLAID.secret,
      PLAID_BASE_URL: emulator.url,
      // The built-in Teller emulator (no TELLER_APPLICATION_ID) on a free port, beside other runs.
      TELLER_EMULATOR_PORT: '0',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
  });
  afterAll(async () => {
    service?.child.kill('SIGTERM');
    await service?.exited;
    await receiver.close();
    await emulator.close();
    await database.drop();
    removeTempDirs(tempDirs);
  });

  it('when a request arrives with a traceparent, then its trace holds the request span, the Plaid call and the database queries, and no token or secret', async () => {
    const traceId = randomBytes(16).toString('hex');
    const parentId = randomBytes(8).toString('hex');

    const exchange = await fetch(`${service.serviceUrl}/exchange-public-token`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'X-Internal-Secret': secret,
        traceparent: `00-${traceId}-${parentId}-01`,
      },
      body: JSON.stringify({
        public_token: emulator.createPublicToken('ins_109508'),
        subscription_user_id: 'traced-user',
        app_name: 'Budget App',
      }),
    });
    const answer = (await exchange.json()) as { accounts: { access_token: string }[] };
    const deadline = Date.now() + 10_000;
    const ofTrace = () => receiver.spans.filter((span) => span.traceId === traceId);
    while (!ofTrace().some((span) => span.name === 'POST /exchange-public-token') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const spans = ofTrace();

    expect(exchange.status).toBe(200);
    const request = spans.find((span) => span.name === 'POST /exchange-public-token');
    expect(request).toBeDefined();
    expect(request!.parentSpanId).toBe(parentId);
    const plaid = spans.filter((span) => span.name.startsWith('plaid '));
    expect(plaid.map((span) => span.name)).toEqual(
      expect.arrayContaining(['plaid item/public_token/exchange', 'plaid accounts/get']),
    );
    const exchangeCall = plaid.find((span) => span.name === 'plaid item/public_token/exchange')!;
    expect(attribute(exchangeCall, 'plaid.operation')).toBe('item/public_token/exchange');
    expect(attribute(exchangeCall, 'plaid.outcome')).toBe('ok');
    expect(attribute(exchangeCall, 'plaid.request_id')).toEqual(expect.any(String));
    const queries = spans.filter((span) => attribute(span, 'db.system.name') === 'postgresql');
    expect(queries.length).toBeGreaterThan(0);
    // Statements as written, with their placeholders: never the values bound to them.
    expect(queries.map((span) => attribute(span, 'db.query.text'))).toEqual(
      expect.arrayContaining([expect.stringContaining('FROM exchanges WHERE public_token_fingerprint = $1')]),
    );
    const written = JSON.stringify(receiver.spans);
    for (const secretValue of [secret, PLAID.secret, answer.accounts[0]!.access_token]) {
      expect(written).not.toContain(secretValue);
    }
    expect(written).not.toMatch(/(access|public|link)-sandbox-[0-9a-f]{8}/);
    const logLines = service.output
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { trace_id?: string; msg: string });
    expect(logLines.find((line) => line.msg === 'POST /exchange-public-token 200')).toMatchObject({
      trace_id: traceId,
      span_id: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
  });

  /** The spans named `name` the receiver got, once at least `count` are there (10 s at most). */
  async function spansNamed(name: string, count = 1): Promise<ReceivedSpan[]> {
    const deadline = Date.now() + 10_000;
    const named = () => receiver.spans.filter((span) => span.name === name);
    while (named().length < count && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return named();
  }

  it('when a request’s query carries a token or a secret, then its span’s url.query has their values redacted, as the log has', async () => {
    const token = `access-sandbox-${randomUUID()}`;
    const secretValue = randomBytes(12).toString('hex');

    const response = await fetch(
      `${service.serviceUrl}/connection-status?access_token=${token}&secret=${secretValue}&page=2&note=${encodeURIComponent(`public-sandbox-${randomUUID()}`)}`,
      {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Internal-Secret': secret },
        body: JSON.stringify({ subscription_user_id: 'query-user' }),
      },
    );
    const [span] = await spansNamed('POST /connection-status');

    expect(response.status).toBe(200);
    expect(span).toBeDefined();
    expect(attribute(span!, 'url.query')).toBe(
      'access_token=[REDACTED]&secret=[REDACTED]&page=2&note=[REDACTED]',
    );
    expect(attribute(span!, 'url.path')).toBe('/connection-status');
    const written = JSON.stringify(receiver.spans);
    expect(written).not.toContain(token);
    expect(written).not.toContain(secretValue);
    expect(written).not.toMatch(/public-sandbox-[0-9a-f]{8}/);
  });

  it('when anyone posts to the public route with a traceparent, then its span starts a trace of ours, linked to theirs, and its lines carry our trace', async () => {
    const theirTrace = randomBytes(16).toString('hex');
    const theirSpan = randomBytes(8).toString('hex');
    const webhook = (path: string) =>
      fetch(`${service.serviceUrl}${path}`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'Plaid-Verification': 'eyJhbGciOiJFUzI1NiIsImtpZCI6IngifQ.eyJpYXQiOjF9.c2lnbmF0dXJl',
          traceparent: `00-${theirTrace}-${theirSpan}-01`,
          baggage: 'tenant=chosen-by-sender',
        },
        body: JSON.stringify({ webhook_type: 'ITEM', webhook_code: 'ERROR', item_id: 'x' }),
      });

    // Routed the way Express routes it: case-insensitive, a trailing slash allowed.
    const responses = [await webhook('/webhooks/plaid'), await webhook('/WEBHOOKS/Plaid/')];
    const spans = await spansNamed('POST /webhooks/plaid', 2);

    expect(responses.map((response) => response.status)).toEqual([401, 401]);
    expect(spans).toHaveLength(2);
    for (const span of spans) {
      expect(span.traceId).not.toBe(theirTrace);
      expect(span.parentSpanId ?? '').toBe('');
      expect(span.links).toEqual([expect.objectContaining({ traceId: theirTrace, spanId: theirSpan })]);
    }
    expect(receiver.spans.filter((span) => span.traceId === theirTrace)).toEqual([]);
    const requestLines = service.output
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { trace_id?: string; msg: string })
      .filter((line) => line.msg === 'POST /webhooks/plaid 401');
    expect(requestLines).toHaveLength(2);
    expect(requestLines.map((line) => line.trace_id).sort()).toEqual(
      spans.map((span) => span.traceId).sort(),
    );
  });

  it('when anyone posts to Teller’s public route with a traceparent, then its span starts a trace of ours, linked to theirs', async () => {
    const theirTrace = randomBytes(16).toString('hex');
    const theirSpan = randomBytes(8).toString('hex');

    const response = await fetch(`${service.serviceUrl}/webhooks/teller`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'Teller-Signature': 'not-a-signature',
        traceparent: `00-${theirTrace}-${theirSpan}-01`,
      },
      body: JSON.stringify({
        id: 'wh_x',
        type: 'webhook.test',
        payload: {},
        timestamp: '2026-01-01T00:00:00Z',
      }),
    });
    const [span] = await spansNamed('POST /webhooks/teller');

    expect(response.status).toBe(401);
    expect(span!.traceId).not.toBe(theirTrace);
    expect(span!.parentSpanId ?? '').toBe('');
    expect(span!.links).toEqual([expect.objectContaining({ traceId: theirTrace, spanId: theirSpan })]);
    expect(receiver.spans.filter((candidate) => candidate.traceId === theirTrace)).toEqual([]);
  });
});
