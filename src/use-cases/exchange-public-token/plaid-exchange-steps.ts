import { refreshStoredConnection } from '../../domain/connections/connection-refresh';
import { signAccounts } from '../../domain/connections/connection';
import { callProvider } from '../../domain/connections/provider-calls';
import { ProviderError } from '../../provider/provider-error';
import { releaseExchangeClaim } from '../../repository/exchanges-repository';
import type { UseCaseDependencies } from '../use-case-dependencies';
import { removeItemDirectly } from './abandon-exchange';
import { userRemoved } from './exchange-errors';
import type { ExchangeInput, NewItem } from './exchange-inputs';
import type { ProviderExchangeSteps } from './provider-steps';

/** What Plaid says about the new Item, and where Plaid sends its webhooks now. */
interface PlaidItem extends NewItem {
  webhook: string | null;
}

/**
 * Plaid's part of an exchange: the public token exchanged at Plaid for a new Item, described by
 * /accounts/get (and /institutions/get_by_id when it names no institution), pointed at this service's
 * webhook once stored.
 */
export function plaidExchangeSteps(
  deps: UseCaseDependencies,
  input: ExchangeInput,
): ProviderExchangeSteps<PlaidItem> {
  const steps: ProviderExchangeSteps<PlaidItem> = {
    provider: 'plaid',

    /**
     * Undo on failure: the claim goes back (by its holder), since Plaid made nothing we know of; unless a
     * removal of the user fenced it meanwhile, which ends it as USER_REMOVED (a replay answers that).
     */
    async obtainToken(claim) {
      try {
        const heldSince = performance.now();
        const exchanged = await callProvider(deps.pool, 'item/public_token/exchange', input, () =>
          deps.provider.exchangePublicToken(input.publicToken),
        );
        return {
          ...exchanged,
          provider: 'plaid',
          ciphertext: deps.vault.encrypt(exchanged.accessToken, exchanged.itemId),
          heldSince,
        };
      } catch (error) {
        const released = await releaseExchangeClaim(deps.pool, claim).catch((releaseError: unknown) => {
          deps.logger.error({ err: releaseError }, 'could not release the exchange claim');
          return 'lost' as const;
        });
        if (released === 'user_removed') {
          deps.logger.info(
            { err: error },
            "the exchange's user was removed while Plaid exchanged its public token, and that call failed",
          );
          throw userRemoved('plaid');
        }
        throw error;
      }
    },

    async discardUnkeptToken(exchanged, failure) {
      await removeItemDirectly(deps, steps, exchanged, {
        error: failure,
        message: 'could not store a new access token; removing the Item',
      });
    },

    async describeNewItem(exchanged) {
      const details = await callProvider(deps.pool, 'accounts/get', input, () =>
        deps.provider.getAccounts(exchanged.accessToken),
      );
      const institutionId = details.item.institutionId;
      if (!institutionId) {
        throw new ProviderError('invalid_response', 'accounts/get', {
          message: 'The provider did not say which institution the new connection belongs to.',
        });
      }
      const institutionName =
        details.item.institutionName ??
        (await callProvider(deps.pool, 'institutions/get_by_id', input, () =>
          deps.provider.getInstitutionName(institutionId),
        ));
      return {
        accounts: details.accounts,
        institutionId,
        institutionName,
        accountsSignature: signAccounts(institutionId, details.accounts),
        webhook: details.item.webhook,
      };
    },

    /**
     * Every Item must report to this service: one made outside our Link tokens (or before PLAID_WEBHOOK_URL
     * was set) is pointed here. After the commit, so a failure only logs: the connection is stored, and
     * reconciliation finds such an Item's status anyway.
     */
    async afterStored(exchanged, item) {
      if (!deps.webhookUrl || item.webhook === deps.webhookUrl) return;
      await deps.provider
        .updateItemWebhook(exchanged.accessToken, deps.webhookUrl)
        .catch((error: unknown) =>
          deps.logger.warn(
            { err: error, item_id: exchanged.itemId },
            "could not point the Item's webhook here",
          ),
        );
    },

    /** Plaid's update mode needs no exchange: its owner gets the Item's accounts, as a refresh answers. */
    answerForOwnItem(connection, exchanged) {
      return refreshStoredConnection(deps, connection, exchanged.accessToken);
    },

    removeAtProvider(exchanged) {
      return deps.provider.removeItem(exchanged.accessToken);
    },
  };
  return steps;
}
