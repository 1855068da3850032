import { PLAID_WEBHOOK_PATH } from '../../vocabulary/plaid-webhooks';
import { defineEndpoint } from '../endpoint-declaration';
import { giveBackRateLimitPoint } from '../middleware/request-rate-limit';
import { noteSubjects } from '../middleware/request-log';
import { webhookBody, webhookResponse } from '../schemas/connection-schemas';

export const receivePlaidWebhook = defineEndpoint({
  operationId: 'receivePlaidWebhook',
  method: 'post',
  path: PLAID_WEBHOOK_PATH,
  access: 'plaid-signature',
  tags: ['ConnectionHealth'],
  summary: "Plaid's webhooks about Items",
  description:
    'The one route without `X-Internal-Secret` (Plaid cannot send it): the `Plaid-Verification` JWT is ' +
    'verified instead, against the raw body, exactly as Plaid documents. Its `alg` must be `ES256`; its ' +
    '`iat` must be under 5 minutes old and not in the future; the SHA-256 of the raw body must equal its ' +
    '`request_body_sha256` (compared in constant time); only then is its key fetched by `kid` from Plaid’s ' +
    '`/webhook_verification_key/get` (cached, one call for a burst with the same new `kid`, a key past its ' +
    '`expired_at` refused, unknown ids remembered, look-ups of new ids budgeted per sender address). ' +
    'Anything else is `401 WEBHOOK_UNVERIFIED` and changes nothing (a missing or malformed header is ' +
    'refused before the body is read); the body is capped at 8 kB. When the key cannot be had now (Plaid ' +
    'does not answer, or this sender already made the service look up too many unknown key ids this ' +
    'minute) the answer is `503` and Plaid delivers again. Each sender address has its own request budget ' +
    '(`WEBHOOK_REQUESTS_PER_MINUTE`), counted before the body is read and given back for each webhook that ' +
    'verified and was recorded for the first time, so that only what does not verify, and replays, spend ' +
    'it. Verification is never switched off: the emulator signs its webhooks.\n\n' +
    'Applying a webhook is idempotent on the connection’s state: a repeated delivery changes nothing more, ' +
    'and one signed before the connection’s last known state is ignored; it is answered at once. One for an ' +
    'Item this service does not know is answered `200` and logged. Expose only this path publicly (see ' +
    'docs/operating.md, Exposing only `/webhooks/plaid`).',
  body: {
    schema: webhookBody,
    required: true,
    examples: {
      loginRequired: {
        summary: 'The user changed their bank password',
        value: {
          webhook_type: 'ITEM',
          webhook_code: 'ERROR',
          item_id: 'DWVAAPWq4RHGlEaNyGKRTAnPLaEmo8Cvq7na6',
        },
      },
    },
  },
  response: {
    description: 'Received (applied, or already applied, or not about a known Item)',
    schema: webhookResponse,
    examples: { received: { summary: 'Received', value: { received: true } } },
  },
  errors: ['DATABASE_UNAVAILABLE', 'PROVIDER_UNAVAILABLE'],
  rateLimit: 'per-source',
  refuseEarly: (req, useCases) =>
    useCases.plaidWebhooks.refuseMalformedSignature(req.get('plaid-verification')),
  handle: async (_input, { useCases, req, res }) => {
    const { firstDelivery } = await useCases.plaidWebhooks.receiveWebhook(
      req.body as Buffer,
      req.get('plaid-verification'),
      req.ip ?? req.socket.remoteAddress,
      // The request line names the Item a verified webhook is about; an unverified body names nothing.
      (itemId) => noteSubjects(res, { item_id: itemId }),
    );
    // Plaid's own deliveries do not spend the sender's budget: only what fails to verify, and replays, do.
    if (firstDelivery) giveBackRateLimitPoint(res);
    return { received: true as const };
  },
});
