import { Configuration, PlaidApi } from 'plaid';

/** The official SDK pointed at an emulator, as a test acting as "someone else at Plaid" uses it. */
export function plaidClient(
  url: string,
  credentials = { clientId: 'test-client', secret: 'test-secret' },
): PlaidApi {
  return new PlaidApi(
    new Configuration({
      basePath: url,
      baseOptions: {
        headers: { 'PLAID-CLIENT-ID': credentials.clientId, 'PLAID-SECRET': credentials.secret },
        proxy: false,
      },
    }),
  );
}
