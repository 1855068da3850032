import { AxiosError } from 'axios';
import { Configuration, PlaidApi } from 'plaid';
import { rejectionOf } from './rejection';

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

/** How "Plaid" refused an SDK call that must fail: the HTTP status and Plaid's error body. */
export async function plaidErrorOf(
  call: Promise<unknown>,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const error = await rejectionOf(call, AxiosError);
  if (!error.response) throw error;
  return { status: error.response.status, body: error.response.data as Record<string, unknown> };
}
