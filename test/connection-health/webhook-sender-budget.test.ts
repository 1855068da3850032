import type { Server } from 'node:http';
import { listen } from '../../src/http/server';
import { connectInstitution, sendFrom } from '../support/requests';
import { rowsOf, startService, uniqueUserId, type ServiceContext } from '../support/service';

const BUDGET = 3;

describe("a sender's request budget and Plaid's bursts", () => {
  let service: ServiceContext;
  let server: Server;
  beforeEach(async () => {
    service = await startService({ env: { WEBHOOK_REQUESTS_PER_MINUTE: String(BUDGET) } });
    server = await listen(service.app, { port: 0, host: '127.0.0.1', maxConnections: 100 });
  });
  afterEach(async () => {
    await new Promise((resolve) => server.close(resolve));
    await service.close();
  });

  /** A webhook about the Item, signed by the emulator's current key, as Plaid sends it. */
  const signedAbout = (itemId: string) => {
    const raw = JSON.stringify({
      environment: 'sandbox',
      webhook_type: 'TRANSACTIONS',
      webhook_code: 'SYNC_UPDATES_AVAILABLE',
      item_id: itemId,
      initial_update_complete: true,
      historical_update_complete: true,
    });
    return { raw, signature: service.emulator.signWebhook(raw) };
  };
  const post = (address: string, { raw, signature }: { raw: string; signature: string }) =>
    sendFrom(server, address, {
      operationId: 'receivePlaidWebhook',
      headers: { 'Plaid-Verification': signature },
      body: raw,
    });

  it('when one address sends more verified webhooks than its requests per minute, then every one is applied; replays and forgeries from it still spend the budget', async () => {
    const { itemId } = await connectInstitution(service, uniqueUserId());
    const genuine = Array.from({ length: BUDGET * 2 }, () => signedAbout(itemId));

    const statuses = [];
    for (const webhook of genuine) statuses.push((await post('127.0.0.2', webhook)).status);
    const replays = [];
    for (let attempt = 0; attempt <= BUDGET; attempt += 1) {
      replays.push((await post('127.0.0.2', genuine[0]!)).status);
    }
    const forged = await post('127.0.0.2', { raw: genuine[1]!.raw, signature: 'e30.e30.c2ln' });

    expect(statuses).toEqual(Array(BUDGET * 2).fill(200));
    expect(replays).toEqual([...Array<number>(BUDGET).fill(200), 429]);
    expect(forged.status).toBe(429);
    const recorded = await rowsOf(
      service,
      'SELECT count(*)::int AS deliveries FROM webhook_deliveries WHERE item_id = $1',
      [itemId],
    );
    expect(recorded).toEqual([{ deliveries: BUDGET * 2 }]);
  });
});
