import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { decodeProtectedHeader, importJWK, jwtVerify, type KeyLike } from 'jose';
import { Configuration, CountryCode, PlaidApi, Products } from 'plaid';

/**
 * The baseline: what Plaid's quickstart does for the same two calls. Express, express.json(), the
 * plaid SDK pointed at the same emulator, and nothing else: no authentication, validation, limits,
 * database or log line. The exchange fetches the accounts and stores nothing. Its webhook route does
 * what Plaid's webhook-verification guide does, and answers 200 without storing or applying anything.
 */
function readEnvironment(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

const plaid = new PlaidApi(
  new Configuration({
    basePath: readEnvironment('PLAID_BASE_URL'),
    baseOptions: {
      headers: {
        'PLAID-CLIENT-ID': readEnvironment('PLAID_CLIENT_ID'),
        'PLAID-SECRET': readEnvironment('PLAID_SECRET'),
      },
    },
  }),
);

const app = express();

// Plaid's guide: the key by the JWT's kid, fetched once and cached; an expired key refused; the JWT
// verified (ES256, at most 5 minutes old); the body's SHA-256 compared with its claim.
const webhookKeys = new Map<string, Promise<{ key: KeyLike | Uint8Array; expired: boolean }>>();
const keyFor = (kid: string) => {
  let key = webhookKeys.get(kid);
  if (!key) {
    key = plaid.webhookVerificationKeyGet({ key_id: kid }).then(async ({ data }) => ({
      key: await importJWK({ ...data.key }, 'ES256'),
      expired: data.key.expired_at !== null,
    }));
    key.catch(() => webhookKeys.delete(kid));
    webhookKeys.set(kid, key);
  }
  return key;
};

app.post('/webhooks/plaid', express.raw({ type: () => true, limit: '8kb' }), async (req, res) => {
  const token = req.get('plaid-verification') ?? '';
  const verified = await (async () => {
    const { kid, alg } = decodeProtectedHeader(token);
    if (alg !== 'ES256' || typeof kid !== 'string') return false;
    const { key, expired } = await keyFor(kid);
    if (expired) return false;
    const { payload } = await jwtVerify(token, key, { algorithms: ['ES256'], maxTokenAge: '5 min' });
    const claimed = Buffer.from(String(payload.request_body_sha256), 'utf8');
    const actual = Buffer.from(
      createHash('sha256')
        .update(req.body as Buffer)
        .digest('hex'),
      'utf8',
    );
    return claimed.length === actual.length && timingSafeEqual(claimed, actual);
  })().catch(() => false);
  if (!verified) {
    res.status(401).json({ error: 'unverified' });
    return;
  }
  res.json({ received: true });
});

app.use(express.json());

app.post('/create-link-token', async (req, res) => {
  const { data } = await plaid.linkTokenCreate({
    user: { client_user_id: String(req.body.subscription_user_id) },
    client_name: String(req.body.app_name),
    products: [Products.Transactions],
    country_codes: [CountryCode.Us],
    language: 'en',
  });
  res.json({ link_token: data.link_token, expiration: data.expiration });
});

app.post('/exchange-public-token', async (req, res) => {
  const exchange = await plaid.itemPublicTokenExchange({ public_token: String(req.body.public_token) });
  const { data } = await plaid.accountsGet({ access_token: exchange.data.access_token });
  res.json({ accounts: data.accounts, access_token: exchange.data.access_token });
});

// Express's default handler would print the SDK's error, request headers (the Plaid secret) included.
app.use((_error: unknown, _req: Request, res: Response, _next: NextFunction) => {
  res.status(502).json({ error: 'the Plaid call failed' });
});

const server = app.listen(Number(readEnvironment('PORT')), '127.0.0.1');
const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// Started by the bench with an IPC channel: when the bench goes, so does this process.
process.on('disconnect', stop);
