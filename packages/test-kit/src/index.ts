// What the service's tests and the emulators' tests share: a stand-in webhook endpoint, the official Plaid
// SDK pointed at an emulator, and the rejection of a promise as a value to assert on.
export { plaidClient, plaidErrorOf } from './plaid-client';
export { rejectionOf, thrownBy } from './rejection';
export { WebhookReceiver, type ReceivedWebhook } from './webhook-receiver';
