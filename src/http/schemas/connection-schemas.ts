import { plaidWebhookSchema } from '../../domain/connections/plaid-signals';
import {
  MAX_CODE_LENGTH,
  MAX_ID_LENGTH,
  MAX_MASK_LENGTH,
  MAX_NAME_LENGTH,
  MAX_TYPE_LENGTH,
  connectedAccountSchema,
  connectionStatusSchema,
  namingOneConnection,
  providerSchema,
  subscriptionUserId,
  wireText,
  wireTimestamp,
  z,
} from './common-schemas';

export const refreshConnectionBody = namingOneConnection(
  { subscription_user_id: subscriptionUserId },
  { name: 'RefreshConnectionRequest', exactly: true, purpose: "The user's connection to refresh, named" },
);

export const refreshConnectionResponse = z
  .object({ accounts: z.array(connectedAccountSchema).max(100) })
  .openapi('RefreshConnectionResponse');

export const connectionStatusBody = z
  .object({ subscription_user_id: subscriptionUserId })
  .openapi('ConnectionStatusRequest');

const connectionOverview = z
  .object({
    item_id: wireText(MAX_ID_LENGTH),
    institution_id: wireText(MAX_ID_LENGTH),
    institution_name: wireText(MAX_NAME_LENGTH),
    status: connectionStatusSchema,
    error_code: wireText(MAX_CODE_LENGTH)
      .nullable()
      .openapi({ description: "Plaid's error_code when status is error or login_required." }),
    consent_expiration_time: wireTimestamp()
      .nullable()
      .openapi({ description: 'When the user’s consent ends (pending_expiration).' }),
    disconnect_reason: wireText(MAX_CODE_LENGTH)
      .nullable()
      .openapi({ description: 'Why Plaid will disconnect it (pending_disconnect).' }),
    disconnect_time: wireTimestamp().nullable(),
    new_accounts_available: z.boolean().openapi({
      description: 'The bank has accounts the user has not shared; offer update mode with account selection.',
    }),
    updated_at: wireTimestamp(),
    accounts: z
      .array(
        z.object({
          provider_account_id: wireText(MAX_ID_LENGTH),
          name: wireText(MAX_NAME_LENGTH),
          mask: wireText(MAX_MASK_LENGTH).nullable(),
          type: wireText(MAX_TYPE_LENGTH),
          subtype: wireText(MAX_TYPE_LENGTH).nullable(),
        }),
      )
      .max(100),
    provider: providerSchema,
  })
  .openapi('ConnectionOverview');

export const connectionStatusResponse = z
  .object({ connections: z.array(connectionOverview).max(1_000) })
  .openapi('ConnectionStatusResponse');

/** The one schema of Plaid's webhook body (the use case applies it once the signature verified). */
// zod's own metadata: the domain's schema may be built before zod is extended with `.openapi`.
export const webhookBody = plaidWebhookSchema.meta({
  id: 'PlaidWebhook',
  description: "Plaid's webhook body, as Plaid signs it; fields this service does not use pass through.",
});

export const webhookResponse = z.object({ received: z.literal(true) }).openapi('WebhookReceived');
