import type { ConnectedAccount } from '../../domain/connections/connection';
import type { ExchangeClaim } from '../../repository/exchanges-repository';
import type { ProviderName } from '../../vocabulary/providers';
import type { ExchangedItem, NewItem } from './exchange-inputs';

/**
 * What differs between aggregators in an exchange, and only that: how the new access token is had, how
 * the new Item is described, what follows its storing, how a stored connection that already holds it is
 * answered, and how it is removed at once. The claim, the token kept before anything else, the fences of
 * `/remove-user`, the take-over, the abandonment and the storing (exchange-steps.ts, abandon-exchange.ts,
 * exchange-public-token.ts) are the same for every aggregator. Plaid's are plaid-exchange-steps.ts,
 * Teller's teller-exchange-steps.ts; one is built per request.
 */
export interface ProviderExchangeSteps<Item extends NewItem = NewItem> {
  readonly provider: ProviderName;
  /**
   * The new Item's access token. Plaid's exchange makes the Item (and a failure gives the claim back);
   * Teller's enrollment was made by Connect and its token came verified with the request.
   */
  obtainToken(claim: ExchangeClaim): Promise<ExchangedItem>;
  /**
   * No record of the token could be written, so nothing would ever remove the Item: Plaid's, just made by
   * this request, is removed now. A Teller enrollment existed since Connect, whatever this request does,
   * and the same payload can be sent again, so it is left. Each logs the failure once.
   */
  discardUnkeptToken(exchanged: ExchangedItem, failure: unknown): Promise<void>;
  /** The provider's description of the new Item: its accounts and institution. */
  describeNewItem(exchanged: ExchangedItem): Promise<Item>;
  /** After the connection committed: a failure only logs. */
  afterStored(exchanged: ExchangedItem, item: Item): Promise<void>;
  /**
   * The user's own stored connection already holds the Item: its accounts as the provider now says
   * (Plaid: a refresh; Teller: the repaired enrollment, with the token Connect handed back).
   */
  answerForOwnItem(
    connection: { id: string; subscriptionUserId: string; itemId: string },
    exchanged: ExchangedItem,
  ): Promise<ConnectedAccount[]>;
  /**
   * The last resort when no removal of the Item could be queued: removed at the provider directly. Never an
   * Item a stored connection may hold (Teller: the enrollment a link token was issued to repair).
   */
  removeAtProvider(exchanged: ExchangedItem): Promise<void>;
}
