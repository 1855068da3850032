import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listen } from '../../src/http/server';
import { NEW_KID_LOOKUPS_PER_SOURCE_PER_MINUTE } from '../../src/provider/webhook-verifier';
import { plaidClient } from 'test-kit';
import { connectInstitution, createLinkToken, endpointOf, pathOf, sendFrom } from '../support/requests';
import { PLAID_SECRET, rowsOf, startService, uniqueUserId, type ServiceContext } from '../support/service';

/** A webhook POSTed from `sourceAddress`, over a connection of its own. */
const postFrom = (server: Server, sourceAddress: string, raw: string, signature: string) =>
  sendFrom(server, sourceAddress, {
    operationId: 'receivePlaidWebhook',
    headers: { 'Plaid-Verification': signature },
    body: raw,
  });

describe('forged webhooks cannot starve genuine ones', () => {
  let service: ServiceContext;
  let server: Server;
  const plaid = () => plaidClient(service.emulator.url, { clientId: 'test-client', secret: PLAID_SECRET });

  // Each case starts as an instance does after a deploy: no signing key cached, every budget whole.
  beforeEach(async () => {
    // The service's public URL is not known before it listens: it is set on the emulator's Items below.
    service = await startService({ env: { PLAID_WEBHOOK_URL: 'http://127.0.0.1:9/webhooks/plaid' } });
    server = await listen(service.app, { port: 0, host: '127.0.0.1', maxConnections: 100 });
  });
  afterEach(async () => {
    await new Promise((resolve) => server.close(resolve));
    await service.close();
  });

  /** A stored connection whose Item reports to the listening service. */
  async function connect() {
    const user = uniqueUserId();
    const { accessToken } = await connectInstitution(service, user);
    const webhookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}${pathOf(endpointOf('receivePlaidWebhook'))}`;
    await plaid().itemWebhookUpdate({ access_token: accessToken, webhook: webhookUrl });
    await service.emulator.flushWebhooks();
    const itemId = service.emulator.items().find((item) => item.access_token === accessToken)!.item_id;
    return { user, accessToken, itemId };
  }

  /** An ITEM ERROR for the Item, fresh and bound to its body, under a key id Plaid never issued. */
  function forgedFor(itemId: string) {
    const raw = JSON.stringify({
      environment: 'sandbox',
      error: { error_code: 'ITEM_LOCKED', error_type: 'ITEM_ERROR' },
      item_id: itemId,
      webhook_code: 'ERROR',
      webhook_type: 'ITEM',
    });
    return { raw, signature: service.emulator.signWebhook(raw, { header: { kid: randomUUID() } }) };
  }

  const statusOf = async (itemId: string) =>
    (
      await rowsOf(service, `SELECT status, error_code FROM connections WHERE provider_item_id = $1`, [
        itemId,
      ])
    )[0];

  it('when a flood from one address spends its whole key look-up budget, then Plaid’s genuine webhook is still applied', async () => {
    const { accessToken, itemId } = await connect();
    // Plaid rotates its key: the genuine webhook names a kid this instance has never seen.
    service.emulator.rotateWebhookKey();

    // The reproduction was eleven; past the per-source budget the forger is refused unasked.
    const flood = NEW_KID_LOOKUPS_PER_SOURCE_PER_MINUTE + 5;
    const refusals = [];
    for (let attempt = 0; attempt < flood; attempt += 1) {
      const { raw, signature } = forgedFor(itemId);
      refusals.push((await postFrom(server, '127.0.0.2', raw, signature)).status);
    }
    await plaid().sandboxItemResetLogin({ access_token: accessToken });
    await service.emulator.flushWebhooks();

    expect(refusals).toEqual([
      ...Array<number>(NEW_KID_LOOKUPS_PER_SOURCE_PER_MINUTE).fill(401),
      ...Array<number>(5).fill(503),
    ]);
    const genuine = service.emulator
      .webhooksSent()
      .filter((sent) => sent.body.item_id === itemId && sent.body.webhook_code === 'ERROR');
    expect(genuine.map((sent) => sent.status)).toEqual([200]);
    expect(await statusOf(itemId)).toEqual({ status: 'login_required', error_code: 'ITEM_LOGIN_REQUIRED' });
  });

  it('when one address has spent its key look-ups, then its next unknown key id is answered 503 with Retry-After (Plaid redelivers), never 401', async () => {
    const { itemId } = await connect();
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 20; attempt += 1) {
      const { raw, signature } = forgedFor(itemId);
      statuses.push((await postFrom(server, '127.0.0.3', raw, signature)).status);
    }

    const { raw, signature } = forgedFor(itemId);
    const throttled = await postFrom(server, '127.0.0.3', raw, signature);

    expect(statuses).toEqual(Array(20).fill(401));
    expect(throttled.status).toBe(503);
    expect(throttled.json()).toMatchObject({ code: 'PROVIDER_UNAVAILABLE' });
    expect(throttled.headers['retry-after']).toBe('60');
    expect(await statusOf(itemId)).toEqual({ status: 'good', error_code: null });
    const line = service.logs.filter((entry) => entry.includes('"reason":"key_lookup_throttled"'));
    expect(line).toHaveLength(1);
  });

  it('when Plaid’s key endpoint fails while forged webhooks arrive, then users’ calls to Plaid are not paused', async () => {
    const { itemId } = await connect();
    service.emulator.injectFault({ path: '/webhook_verification_key/get', status: 500, count: 100 });
    try {
      const refusals = [];
      for (let attempt = 0; attempt < 4; attempt += 1) {
        const { raw, signature } = forgedFor(itemId);
        refusals.push((await postFrom(server, '127.0.0.4', raw, signature)).status);
      }
      // The forged webhooks did make the service ask Plaid for keys, and each failed look-up was a 503.
      const keyLookups = service.emulator.calls('/webhook_verification_key/get');
      service.emulator.clearCalls();

      const link = await createLinkToken(service, {
        subscription_user_id: uniqueUserId(),
        app_name: 'Budget App',
      });

      expect(keyLookups.length).toBeGreaterThan(0);
      expect(refusals).toEqual([503, 503, 503, 503]);
      expect(link.status).toBe(200);
      expect(service.emulator.calls('/link/token/create')).toHaveLength(1);
    } finally {
      service.emulator.clearFaults();
    }
  });
});
