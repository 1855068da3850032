import type { Response } from 'supertest';
import type { ConnectSuccess } from 'teller-emulator';
import { createLinkToken, exchange, type Caller } from './requests';
import type { ServiceContext } from './service';

/**
 * The website's side of Teller Connect, as its backend calls this service: a Teller link token (the nonce
 * its page opens Connect with), then the exchange of what Connect's `onSuccess` handed the page.
 */

/** `POST /create-link-token` with `provider: "teller"` (and `app_name` unless given). */
export const tellerLinkToken = (caller: Caller, body: Record<string, unknown>) =>
  createLinkToken(caller, { provider: 'teller', app_name: 'Budget App', ...body });

/** `POST /exchange-public-token` with `provider: "teller"` and Connect's success payload. */
export const exchangeEnrollment = (
  caller: Caller,
  subscriptionUserId: string,
  enrollment: unknown,
  extra: Record<string, unknown> = {},
) => exchange(caller, { provider: 'teller', subscription_user_id: subscriptionUserId, enrollment, ...extra });

/** A nonce this service issued to the user (a Teller link token), answered 200 or the test fails. */
export async function tellerNonceFor(
  caller: Caller,
  subscriptionUserId: string,
  body: Record<string, unknown> = {},
): Promise<string> {
  const response = await tellerLinkToken(caller, { subscription_user_id: subscriptionUserId, ...body });
  if (response.status !== 200) {
    throw new Error(`Teller link token refused: ${response.status} ${JSON.stringify(response.body)}`);
  }
  return response.body.connect.nonce as string;
}

/**
 * A user going through Teller Connect at `institution` (the emulator's `chase` unless said) with a nonce
 * this service issued: what Connect hands the page, and the exchange's answer.
 */
export async function connectThroughTeller(
  service: Pick<ServiceContext, 'http' | 'teller'>,
  subscriptionUserId: string,
  request: { institution?: string } = {},
): Promise<{ nonce: string; payload: ConnectSuccess; response: Response }> {
  const nonce = await tellerNonceFor(service, subscriptionUserId);
  const payload = service.teller!.completeConnect({ nonce, ...request });
  const response = await exchangeEnrollment(service, subscriptionUserId, payload);
  return { nonce, payload, response };
}
