import express, { type NextFunction, type Request, type Response } from 'express';
import { Configuration, CountryCode, PlaidApi, Products } from 'plaid';

/**
 * The baseline: what Plaid's quickstart does for the same two calls. Express, express.json(), the
 * plaid SDK pointed at the same emulator, and nothing else: no authentication, validation, limits,
 * database or log line. The exchange fetches the accounts and stores nothing.
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
