import { PlaidEmulator } from 'plaid-emulator';
import type { HostMessage, HostRequest } from './emulator-protocol';

/**
 * A Plaid emulator in its own process, so that it does not share an event loop with the load
 * generator. Minting public tokens in-process is what Plaid Link would hand the website; the bench
 * asks for them over IPC before a timed window.
 */
const MAX_TOKENS_PER_REQUEST = 200_000;

function send(message: HostMessage): void {
  process.send?.(message);
}

function answer(request: HostRequest, emulator: PlaidEmulator): string[] {
  switch (request.op) {
    case 'mint-public-tokens': {
      const count = Math.min(Math.max(0, Math.floor(request.count)), MAX_TOKENS_PER_REQUEST);
      return Array.from({ length: count }, () => emulator.createPublicToken(request.institutionId));
    }
    case 'list-item-ids':
      return emulator.items().map((item) => item.item_id);
    case 'sign-webhooks':
      // Signed here, before a burst's clock starts, so that the burst measures only its receiver.
      return request.bodies.map((body, index) => emulator.signWebhook(body, { iat: request.iats[index] }));
    case 'clear-calls':
      // The emulator records every call; the bench never reads them, so they would only grow.
      emulator.clearCalls();
      return [];
  }
}

async function run(): Promise<void> {
  const clientId = process.env.PLAID_CLIENT_ID;
  const secret = process.env.PLAID_SECRET;
  if (!clientId || !secret || !process.send) {
    throw new Error('needs PLAID_CLIENT_ID, PLAID_SECRET and an IPC channel to the bench');
  }
  const emulator = new PlaidEmulator({ credentials: { clientId, secret } });
  const url = await emulator.listen(Number(process.env.PORT ?? 0));
  process.on('message', (request: HostRequest) => {
    try {
      send({ type: 'reply', id: request.id, result: answer(request, emulator) });
    } catch (error) {
      send({
        type: 'failed',
        id: request.id,
        message: error instanceof Error ? error.message : String(error),
      });
    }
  });
  // Without the bench this process has no purpose: it ends with it, even when the bench was killed.
  const stop = () => void emulator.close().finally(() => process.exit(0));
  process.on('disconnect', stop);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  send({ type: 'ready', url });
}

run().catch((error: unknown) => {
  process.stderr.write(`emulator host failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
