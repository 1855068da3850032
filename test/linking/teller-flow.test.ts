import { readFileSync } from 'node:fs';
import path from 'node:path';
import { findFreePort } from 'dev-tools';
import { WebhookReceiver } from 'test-kit';
import { Agent, request as undiciRequest } from 'undici';
import { createTestDatabase, type TestDatabase } from '../support/database';
import {
  reachableTempDir,
  removeTempDirs,
  startMainProcess,
  type MainProcess,
} from '../support/main-process';
import { newWebhookSecret, verifiedNotifications, waitFor } from '../support/notifications';

/**
 * The whole Teller flow as the website drives it, against `node dist/main.js` with nothing of Teller
 * configured: the built-in Teller emulator (HTTPS with its development CA, the client certificate required)
 * wired to the service by itself, its webhooks signed and sent to the service's `/webhooks/teller`, and
 * the website's notifications verified as the website would.
 */

const APP_NAME = 'Budget App';
const EMULATOR_LINE = /using the built-in Teller emulator at (https:\/\/[\w.:[\]-]+)/;

interface Flow {
  service: MainProcess;
  serviceUrl: string;
  tellerUrl: string;
  /** Trusts the emulator's development CA, as a person with its ca-certificate.pem would. */
  tellerAgent: Agent;
  receiver: WebhookReceiver;
  webhookSecret: string;
  internalSecret: string;
}

async function startFlow(
  database: TestDatabase,
  tempDirs: string[],
  env: Record<string, string>,
): Promise<Flow> {
  const receiver = await new WebhookReceiver().start();
  const webhookSecret = newWebhookSecret();
  const internalSecret = `internal-${Math.random().toString(36).slice(2)}-${Date.now()}`;
  const dataDir = reachableTempDir(tempDirs);
  // A port of its own, so that the built-in emulator's webhooks know where the service listens.
  const port = await findFreePort();
  const service = await startMainProcess({
    NODE_ENV: 'development',
    PORT: String(port),
    PLAID_EMULATOR_PORT: '0',
    DATABASE_URL: database.url,
    DATA_DIR: dataDir,
    INTERNAL_SECRET: internalSecret,
    WEBSITE_WEBHOOK_URL: receiver.url('/notifications'),
    WEBSITE_WEBHOOK_SECRET: webhookSecret,
    OUTBOX_POLL_INTERVAL_MS: '200',
    LOG_LEVEL: 'info',
    ...env,
  });
  const tellerUrl = await waitFor('the built-in Teller emulator line', () => {
    const match = EMULATOR_LINE.exec(service.output.join('\n'));
    return match?.[1];
  });
  const ca = readFileSync(path.join(dataDir, 'teller-emulator', 'ca-certificate.pem'), 'utf8');
  return {
    service,
    serviceUrl: service.serviceUrl,
    tellerUrl,
    tellerAgent: new Agent({ connect: { ca } }),
    receiver,
    webhookSecret,
    internalSecret,
  };
}

async function stopFlow(flow: Flow | undefined): Promise<void> {
  if (!flow) return;
  flow.service.child.kill('SIGTERM');
  await flow.service.exited;
  await flow.tellerAgent.close();
  await flow.receiver.close();
}

/** A call of the website's backend to the service. */
async function callService(
  flow: Flow,
  route: string,
  body: Record<string, unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${flow.serviceUrl}${route}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Internal-Secret': flow.internalSecret },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** A call to the emulator's control API, over HTTPS trusting its CA (no client certificate needed there). */
async function callEmulator(
  flow: Flow,
  method: 'GET' | 'POST',
  route: string,
  body?: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const response = await undiciRequest(`${flow.tellerUrl}/__emulator${route}`, {
    method,
    dispatcher: flow.tellerAgent,
    ...(body ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
  });
  const text = await response.body.text();
  if (response.statusCode >= 300)
    throw new Error(`${method} /__emulator${route}: ${response.statusCode} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

interface EmulatorCall {
  method: string;
  path: string;
  client_certificate: string;
}

async function tellerCalls(flow: Flow): Promise<EmulatorCall[]> {
  return (await callEmulator(flow, 'GET', '/calls')).calls as EmulatorCall[];
}

async function connectionsOf(
  flow: Flow,
  userId: string,
): Promise<{ item_id: string; status: string; provider: string }[]> {
  const answer = await callService(flow, '/connection-status', { subscription_user_id: userId });
  expect(answer.status).toBe(200);
  return answer.body.connections as { item_id: string; status: string; provider: string }[];
}

async function statusOf(flow: Flow, userId: string, itemId: string): Promise<string> {
  const connection = (await connectionsOf(flow, userId)).find((candidate) => candidate.item_id === itemId);
  expect(connection?.provider).toBe('teller');
  return connection!.status;
}

describe.each([
  ['access tokens returned (RETURN_ACCESS_TOKENS=true)', {}, true],
  ['access tokens kept (RETURN_ACCESS_TOKENS=false)', { RETURN_ACCESS_TOKENS: 'false' }, false],
])('the whole Teller flow, %s', (_label, env, tokensReturned) => {
  const tempDirs: string[] = [];
  let database: TestDatabase;
  let flow: Flow | undefined;
  beforeAll(async () => {
    database = await createTestDatabase();
    flow = await startFlow(database, tempDirs, env);
  });
  afterAll(async () => {
    await stopFlow(flow);
    await database?.drop();
    removeTempDirs(tempDirs);
  });

  it('when the website links a bank through Teller, the bank asks for a login and the user repairs it, removes an account and then the bank, then every step answers as documented and the enrollment is gone at Teller', async () => {
    const run = flow!;
    const userId = `teller-flow-${Date.now()}`;

    // 1. A link token for Teller: the nonce Connect is opened with.
    const linkToken = await callService(run, '/create-link-token', {
      subscription_user_id: userId,
      app_name: APP_NAME,
      provider: 'teller',
    });
    expect(linkToken.status).toBe(200);
    expect(linkToken.body).toMatchObject({
      provider: 'teller',
      link_token: expect.any(String),
      connect: { application_id: expect.any(String), environment: 'development' },
    });
    const nonce = (linkToken.body.connect as { nonce: string }).nonce;
    expect(nonce).toBe(linkToken.body.link_token);

    // 2. The user finishes Teller Connect; the page gets the signed success payload.
    const enrollment = await callEmulator(run, 'POST', '/connect/complete', { nonce });
    const enrollmentId = (enrollment.enrollment as { id: string }).id;

    // 3. The exchange: verified, stored, answered with the accounts.
    const exchanged = await callService(run, '/exchange-public-token', {
      subscription_user_id: userId,
      app_name: APP_NAME,
      provider: 'teller',
      enrollment,
    });
    expect(exchanged.status).toBe(200);
    expect(exchanged.body.provider).toBe('teller');
    const accounts = exchanged.body.accounts as Record<string, unknown>[];
    expect(accounts.length).toBeGreaterThanOrEqual(2);
    for (const account of accounts) {
      expect(account.item_id).toBe(enrollmentId);
      if (tokensReturned) expect(account.access_token).toBe(enrollment.accessToken);
      else expect(account).not.toHaveProperty('access_token');
    }
    expect(await statusOf(run, userId, enrollmentId)).toBe('good');

    // 4. The bank asks the user to log in again: Teller's signed webhook reaches /webhooks/teller.
    await callEmulator(run, 'POST', `/enrollments/${enrollmentId}/disconnect`, {
      reason: 'disconnected.user_action.mfa_required',
    });
    await waitFor(
      'login_required',
      async () => ((await statusOf(run, userId, enrollmentId)) === 'login_required' ? true : undefined),
      15_000,
    );
    const statusChange = await waitFor('a verified connection.status_changed', () =>
      verifiedNotifications(run.receiver, run.webhookSecret).find(
        (notification) =>
          notification.type === 'connection.status_changed' && notification.data.item_id === enrollmentId,
      ),
    );
    expect(statusChange.data).toMatchObject({ provider: 'teller', status: 'login_required' });

    // 5. Update mode: Connect opened on that enrollment repairs it; the exchange stores the repair.
    const repairToken = await callService(run, '/create-link-token', {
      subscription_user_id: userId,
      app_name: APP_NAME,
      provider: 'teller',
      item_id: enrollmentId,
    });
    expect(repairToken.status).toBe(200);
    const repairConnect = repairToken.body.connect as { nonce: string; enrollment_id: string };
    expect(repairConnect.enrollment_id).toBe(enrollmentId);
    const repaired = await callEmulator(run, 'POST', '/connect/complete', {
      nonce: repairConnect.nonce,
      enrollment_id: enrollmentId,
    });
    const repairExchange = await callService(run, '/exchange-public-token', {
      subscription_user_id: userId,
      app_name: APP_NAME,
      provider: 'teller',
      enrollment: repaired,
    });
    expect(repairExchange.status).toBe(200);
    const refreshed = await callService(run, '/refresh-connection', {
      subscription_user_id: userId,
      item_id: enrollmentId,
    });
    expect(refreshed.status).toBe(200);
    expect(await statusOf(run, userId, enrollmentId)).toBe('good');

    // 6. One account removed: at Teller too.
    const [first, ...rest] = accounts;
    const removedAccount = await callService(run, '/remove-account', {
      subscription_user_id: userId,
      provider_account_id: first!.provider_account_id,
    });
    expect(removedAccount.status).toBe(200);
    await waitFor('DELETE /accounts/{id} at Teller', async () =>
      (await tellerCalls(run)).find(
        (call) => call.method === 'DELETE' && call.path === `/accounts/${String(first!.provider_account_id)}`,
      ),
    );

    // 7. The bank removed: the enrollment revoked at Teller, with the client certificate.
    const removedBank = await callService(run, '/remove-institution', {
      subscription_user_id: userId,
      item_id: enrollmentId,
    });
    expect(removedBank).toEqual({ status: 200, body: { success: true, accounts_removed: rest.length } });
    const gone = await waitFor('the enrollment revoked at Teller', async () => {
      const view = (await callEmulator(run, 'GET', `/enrollments/${enrollmentId}`)).enrollment as {
        status: string;
      };
      return view.status === 'revoked' ? view : undefined;
    });
    expect(gone.status).toBe('revoked');
    const apiCalls = (await tellerCalls(run)).filter((call) => !call.path.startsWith('/__emulator'));
    expect(apiCalls.length).toBeGreaterThan(0);
    expect(apiCalls.every((call) => call.client_certificate === 'verified')).toBe(true);
    expect(await connectionsOf(run, userId)).toEqual([]);
  });
});
