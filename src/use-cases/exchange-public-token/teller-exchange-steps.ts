import { signAccounts } from '../../domain/connections/connection';
import { storeRepairedEnrollment } from '../../domain/connections/enrollment-repair';
import { callProvider } from '../../domain/connections/provider-calls';
import { ProviderError } from '../../provider/provider-error';
import type { TellerAccess, UseCaseDependencies } from '../use-case-dependencies';
import type { NewItem, TellerExchangeInput } from './exchange-inputs';
import type { ProviderExchangeSteps } from './provider-steps';
import type { VerifiedEnrollment } from './teller-enrollment-check';

/**
 * Teller's part of an exchange, once its payload verified (teller-enrollment-check.ts). Connect made the
 * enrollment and handed its access token to the page, so there is nothing to exchange: the token is kept
 * before Teller is first called, as Plaid's is the moment Plaid returns it. Then `GET /accounts`
 * (https://teller.io/docs/api/accounts, "List Accounts") describes the enrollment: its accounts, and its
 * institution, which each account names. Its `item_id` is the enrollment id.
 *
 * One Teller connection per institution and user: Teller's accounts carry no mask that stays the same
 * across two enrollments of one login (the emulator's `last_four` are new each time), so the login's
 * signature is the institution alone, and the same bank again is refused as a duplicate (its new
 * enrollment revoked through the outbox, DELETE /accounts).
 */
export function tellerExchangeSteps(
  deps: UseCaseDependencies,
  teller: TellerAccess,
  input: TellerExchangeInput,
  verified: VerifiedEnrollment,
): ProviderExchangeSteps {
  const { enrollment } = input;
  const context = (itemId: string) => ({
    subscriptionUserId: input.subscriptionUserId,
    appName: input.appName,
    itemId,
  });
  return {
    provider: 'teller',

    async obtainToken() {
      const itemId = enrollment.enrollment.id;
      return {
        provider: 'teller',
        accessToken: enrollment.accessToken,
        itemId,
        ciphertext: deps.vault.encrypt(enrollment.accessToken, itemId),
        heldSince: performance.now(),
      };
    },

    async discardUnkeptToken(exchanged, failure) {
      deps.logger.error(
        { err: failure, item_id: exchanged.itemId, provider: 'teller' },
        'could not store the access token of a Teller enrollment; it stays at Teller (Connect made it), and ' +
          'the same payload can be exchanged again',
      );
    },

    async describeNewItem(exchanged): Promise<NewItem> {
      // Each of Teller's accounts is a BankAccount too: stored as the service stores any account.
      const accounts = await callProvider(deps.pool, 'GET /accounts', context(exchanged.itemId), () =>
        teller.provider.listAccounts(exchanged.accessToken),
      );
      const institution = accounts[0]?.institution;
      if (!institution) {
        throw new ProviderError('invalid_response', 'GET /accounts', {
          message: 'Teller listed no account of the new enrollment, so its institution is unknown.',
        });
      }
      return {
        accounts,
        institutionId: institution.id,
        institutionName: institution.name,
        accountsSignature: signAccounts(institution.id, []),
      };
    },

    // Teller's webhooks are the application's, set in its dashboard (https://teller.io/docs/api/webhooks):
    // nothing to point per enrollment.
    async afterStored() {},

    answerForOwnItem(connection, exchanged) {
      return storeRepairedEnrollment(deps, teller.provider, connection, {
        accessToken: exchanged.accessToken,
        ciphertext: exchanged.ciphertext,
        fingerprint: deps.vault.fingerprint(exchanged.accessToken),
      });
    },

    async removeAtProvider(exchanged) {
      // The enrollment this link token was issued to repair is a stored connection's: never revoked here.
      if (verified.repairs === exchanged.itemId) {
        deps.logger.warn(
          { item_id: exchanged.itemId, provider: 'teller' },
          'not revoking a Teller enrollment a stored connection holds (update mode)',
        );
        return;
      }
      await teller.provider.revokeEnrollment(exchanged.accessToken);
    },
  };
}
