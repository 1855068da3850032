import type { PlaidEmulator, RecordedCall } from 'plaid-emulator';

const EXCHANGE_PATH = '/item/public_token/exchange';

/**
 * Which public tokens Plaid exchanged: only their Items are the service's to store or remove (an
 * Item Link made whose token was never exchanged gave the service nothing to know it by). The
 * emulator records every call it gets; the exchange calls are kept here and the record is cleared, so
 * that a long run does not keep every call. A kept call still gets its status when it is answered.
 */
export class ExchangedTokens {
  private readonly calls: RecordedCall[] = [];

  collect(emulator: PlaidEmulator): void {
    const recorded = emulator.calls();
    emulator.clearCalls();
    for (const call of recorded) if (call.path === EXCHANGE_PATH) this.calls.push(call);
  }

  /** Public tokens Plaid answered 200 for. */
  exchanged(): Set<string> {
    const tokens = new Set<string>();
    for (const call of this.calls) {
      const token = (call.body as { public_token?: unknown } | undefined)?.public_token;
      if (call.status === 200 && typeof token === 'string') tokens.add(token);
    }
    return tokens;
  }
}
