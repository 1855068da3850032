import { tellerWebhookSchema } from '../../domain/connections/teller-signals';
import { TELLER_WEBHOOK_PATH } from '../../vocabulary/teller-webhooks';
import { defineEndpoint } from '../endpoint-declaration';
import { noteSubjects } from '../middleware/request-log';
import { webhookResponse } from '../schemas/connection-schemas';

/** The one schema of Teller's webhook body (the use case applies it once the signature verified). */
// zod's own metadata: the domain's schema may be built before zod is extended with `.openapi`.
const tellerWebhookBody = tellerWebhookSchema.meta({
  id: 'TellerWebhook',
  description: "Teller's webhook body, as Teller signs it; fields this service does not use pass through.",
});

export const receiveTellerWebhook = defineEndpoint({
  operationId: 'receiveTellerWebhook',
  method: 'post',
  path: TELLER_WEBHOOK_PATH,
  access: 'teller-signature',
  tags: ['ConnectionHealth'],
  summary: "Teller's webhooks about enrollments",
  description:
    'Public like `/webhooks/plaid`, without `X-Internal-Secret` (Teller cannot send it): the ' +
    '`Teller-Signature` header is verified instead, against the raw body, as Teller documents ' +
    '(https://teller.io/docs/api/webhooks): `t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, each `v1` an ' +
    'HMAC-SHA256 of `<t>.<raw body>` under a signing secret; one matching `v1` under any configured secret ' +
    '(`TELLER_WEBHOOK_SIGNING_SECRETS`: old and new during a rotation) verifies, and `t` must be under 3 ' +
    'minutes old and not in the future. Anything else is `401 WEBHOOK_UNVERIFIED` and changes nothing (a ' +
    'missing or malformed header is refused before the body is read); the body is capped at 8 kB. While ' +
    'Teller is off on this service (no `TELLER_APPLICATION_ID`) the answer is `404 NOT_FOUND`, before the ' +
    'body is read. Each sender address has its own request budget (`WEBHOOK_REQUESTS_PER_MINUTE`, shared ' +
    'with `/webhooks/plaid`).\n\n' +
    'Deliveries are deduplicated by the webhook’s `id` (Teller delivers an event again with the same `id`): ' +
    'a repeated one changes nothing more. `enrollment.disconnected` sets the status of the enrollment’s ' +
    'connection by its `reason` (`login_required` when the user can repair it through Teller Connect, else ' +
    '`error`; see docs/website-guide.md, Connection health), and the website is notified as for Plaid; every ' +
    'other type (`webhook.test`, `transactions.processed`…) is acknowledged and changes nothing. One naming ' +
    'an enrollment this service does not know is answered `200`, logged, and changes nothing.',
  body: {
    schema: tellerWebhookBody,
    required: true,
    examples: {
      disconnected: {
        summary: 'The bank locked the account: the user must reconnect through Teller Connect',
        value: {
          id: 'wh_oiffb5cocakqmksbkg000',
          payload: { enrollment_id: 'enr_oiffb5cocakqmksbkg001', reason: 'disconnected.account_locked' },
          timestamp: '2023-07-10T03:49:29Z',
          type: 'enrollment.disconnected',
        },
      },
      test: {
        summary: "The dashboard's test webhook: acknowledged",
        value: {
          id: 'wh_oiffb5cocakqmksbkg002',
          payload: {},
          timestamp: '2023-07-10T03:50:00Z',
          type: 'webhook.test',
        },
      },
    },
  },
  response: {
    description: 'Received (applied, or already applied, or about no known enrollment, or of another type)',
    schema: webhookResponse,
    examples: { received: { summary: 'Received', value: { received: true } } },
  },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-source',
  refuseEarly: (req, useCases) => useCases.tellerWebhooks.refuseEarly(req.get('teller-signature')),
  handle: async (_input, { useCases, req, res }) => {
    await useCases.tellerWebhooks.receiveWebhook(
      req.body as Buffer,
      req.get('teller-signature'),
      // The request line names the enrollment a verified webhook is about; an unverified body names nothing.
      (enrollmentId) => noteSubjects(res, { item_id: enrollmentId }),
    );
    return { received: true as const };
  },
});
