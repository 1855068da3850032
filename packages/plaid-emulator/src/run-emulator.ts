import dotenv from 'dotenv';
import { PlaidEmulator } from './plaid-emulator';

/** `npm run emulator`: the Plaid API emulator on its own, for local development against the SDK. */
async function run(): Promise<void> {
  dotenv.config({ quiet: true });
  const port = Number(process.env.PLAID_EMULATOR_PORT ?? 4010);
  const clientId = process.env.PLAID_EMULATOR_CLIENT_ID;
  const secret = process.env.PLAID_EMULATOR_SECRET;
  const emulator = new PlaidEmulator(clientId && secret ? { credentials: { clientId, secret } } : {});
  const url = await emulator.listen(port);
  process.stdout.write(`Plaid emulator listening on ${url} (set PLAID_BASE_URL=${url})\n`);
  const stop = () => void emulator.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

run().catch((error: unknown) => {
  process.stderr.write(
    `emulator failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
