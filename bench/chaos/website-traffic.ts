import type { LinkSuccess } from 'plaid-emulator';
import { sleep } from '../processes';
import { callUntilSettled, NoAnswer, type Answer, type Settled } from './http-client';
import { asWebsite, type TrafficContext } from './traffic-context';
import type { ExchangeAttempt, KnownConnection, ProviderName } from './website-state';

/** The website's own calls: link tokens, Link, exchanges and both kinds of removal. */

export const APP_NAME = 'Chaos App';
const INSTITUTIONS = ['ins_109508', 'ins_109509', 'ins_109510', 'ins_109511', 'ins_109512'];
/** Share of exchanges that reconnect a bank the user already has: the service must refuse the duplicate. */
export const RECONNECT_SHARE = 0.08;
/** Share of public tokens submitted two or three times at once (a double click, a retry racing the first). */
const CONCURRENT_DUPLICATE_SHARE = 0.3;

const isRetryableExchange = (answer: Answer) =>
  answer.status === 503 ||
  answer.status === 504 ||
  (answer.status === 409 && answer.code === 'EXCHANGE_IN_PROGRESS');
const isUnavailable = (answer: Answer) => answer.status === 503;

interface ExchangeBody {
  accounts?: { provider_account_id?: unknown; item_id?: unknown; access_token?: unknown }[];
}

/** Final answers that took a minute or more are noted: an exchange can wait out a sweep of the service. */
const SLOW_SETTLEMENT_MS = 60_000;

function noteIfSlow(context: TrafficContext, what: string, startedAt: number, settled: Settled): void {
  const tookMs = Date.now() - startedAt;
  if (tookMs < SLOW_SETTLEMENT_MS) return;
  const answer = settled.answer
    ? `${settled.answer.status} ${settled.answer.code ?? ''}`.trim()
    : 'no answer';
  context.state.slowSettlements.push(
    `${what}: ${Math.round(tookMs / 1000)} s, ${settled.attempts} attempts, ` +
      `${settled.final ? 'final answer' : 'gave up at'} ${answer}`,
  );
}

/** The connection an exchange's 200 answer describes, or undefined when the answer does not hold one. */
function readConnection(
  provider: ProviderName,
  userId: string,
  institutionId: string,
  text: string,
): KnownConnection {
  const accounts = (JSON.parse(text) as ExchangeBody).accounts ?? [];
  const first = accounts[0];
  if (!first || typeof first.item_id !== 'string' || typeof first.access_token !== 'string') {
    throw new Error(`an exchange answered 200 without accounts: ${text.slice(0, 200)}`);
  }
  return {
    provider,
    itemId: first.item_id,
    userId,
    institutionId,
    accessToken: first.access_token,
    accountIds: accounts.map((account) => String(account.provider_account_id)),
  };
}

export async function createLinkToken(
  context: TrafficContext,
  userId = context.state.nextUserId(),
  provider: ProviderName = 'plaid',
): Promise<string | undefined> {
  const settled = await callUntilSettled(
    () =>
      context.service.call(
        provider === 'plaid' ? 'POST /create-link-token' : `POST /create-link-token (${provider})`,
        {
          method: 'POST',
          path: '/create-link-token',
          body: {
            ...(provider === 'plaid' ? {} : { provider }),
            subscription_user_id: userId,
            app_name: APP_NAME,
          },
        },
        asWebsite(context),
      ),
    // A link token changes nothing stored: a few tries, as a website would, then the user gives up.
    { retryOn: (answer) => answer.status >= 500, until: context.retryUntil(), attempts: 4 },
  );
  if (settled.answer?.status !== 200) return undefined;
  return (JSON.parse(settled.answer.text) as { link_token?: string }).link_token;
}

/** What the user's Link session gives back, and which Item it made at the emulator. */
async function completeLink(
  context: TrafficContext,
  linkToken: string,
  institutionId: string,
): Promise<LinkSuccess | undefined> {
  return context.linkGate.hold(async () => {
    let answer: Answer;
    try {
      answer = await context.emulatorHttp.call('POST /__emulator/link/complete', {
        method: 'POST',
        path: '/__emulator/link/complete',
        body: { link_token: linkToken, institution_id: institutionId },
      });
    } catch (error) {
      if (error instanceof NoAnswer) return undefined;
      throw error;
    }
    if (answer.status !== 200) {
      context.harnessErrors.push(`/__emulator/link/complete answered ${answer.status}: ${answer.text}`);
      return undefined;
    }
    const success = JSON.parse(answer.text) as LinkSuccess;
    // Link made the Item just now, and nothing else makes Items while the gate is held: it is the
    // newest one the emulator has.
    const items = context.emulator.items();
    const newest = items[items.length - 1];
    if (!newest || context.state.linkItemIds.has(newest.item_id)) {
      context.harnessErrors.push('Link completed but no new Item is at the emulator');
      return undefined;
    }
    context.state.recordLinkItem(success.public_token, newest.item_id);
    return success;
  });
}

/**
 * A user links a bank: a link token, Link, then the exchange, sometimes submitted two or three times at
 * once, each submission retried with the same public token until it gets a final answer.
 */
export async function linkAndExchange(context: TrafficContext): Promise<void> {
  const { random, state } = context;
  const reconnect = random.chance(RECONNECT_SHARE) ? state.peek(random) : undefined;
  const userId = reconnect?.userId ?? state.nextUserId();
  const institutionId = reconnect?.institutionId ?? random.pick(INSTITUTIONS);
  const linkToken = await createLinkToken(context, userId);
  if (!linkToken) return;
  const success = await completeLink(context, linkToken, institutionId);
  if (!success) return;
  const attempt: ExchangeAttempt = {
    provider: 'plaid',
    publicToken: success.public_token,
    userId,
    linkItemId: state.linkItems.get(success.public_token) as string,
    answers: [],
    unresolved: 0,
  };
  state.exchanges.push(attempt);
  const body = {
    public_token: success.public_token,
    subscription_user_id: userId,
    app_name: APP_NAME,
    // With Link's metadata a duplicate is refused before Plaid exchanges anything; without, after.
    ...(random.chance(0.5) ? { metadata: success.metadata } : {}),
  };
  await submitExchange(context, {
    attempt,
    body,
    institutionId,
    label: 'POST /exchange-public-token',
    noteAs: `exchange for ${userId}`,
  });
}

/**
 * One link's exchange as the website sends it: sometimes two or three copies at once (a double click, a
 * retry racing the first), each retried with the same body until it gets a final answer, recorded on
 * `attempt`; a 200 adds the connection it describes. `onFinalAnswer` hears each copy that got one.
 */
export async function submitExchange(
  context: TrafficContext,
  submission: {
    attempt: ExchangeAttempt;
    body: Record<string, unknown>;
    institutionId: string;
    /** The request ledger's name for these calls. */
    label: string;
    /** How a slow final answer is noted. */
    noteAs: string;
    onFinalAnswer?: () => void;
  },
): Promise<void> {
  const { random, state } = context;
  const { attempt, body } = submission;
  const copies = random.chance(CONCURRENT_DUPLICATE_SHARE) ? random.integer(2, 3) : 1;
  const delays = Array.from({ length: copies }, (_, index) => (index === 0 ? 0 : random.between(0, 40)));
  await Promise.all(
    delays.map(async (delay) => {
      await sleep(delay);
      const startedAt = Date.now();
      const settled = await callUntilSettled(
        () =>
          context.service.call(
            submission.label,
            { method: 'POST', path: '/exchange-public-token', body },
            asWebsite(context),
          ),
        { retryOn: isRetryableExchange, until: context.retryUntil() },
      );
      noteIfSlow(context, submission.noteAs, startedAt, settled);
      if (!settled.final || !settled.answer) {
        attempt.unresolved += 1;
        return;
      }
      submission.onFinalAnswer?.();
      const { status, code, text } = settled.answer;
      if (status !== 200) {
        attempt.answers.push({ status, code });
        return;
      }
      const connection = readConnection(attempt.provider, attempt.userId, submission.institutionId, text);
      attempt.answers.push({ status, itemId: connection.itemId });
      state.addConnection(connection);
    }),
  );
}

/** Removes one account of a connection; retried until the service says 200 or 404. */
export async function removeAccount(context: TrafficContext): Promise<void> {
  const { state } = context;
  const connection = state.take(context.random);
  if (!connection) return linkAndExchange(context);
  const accountId = context.random.pick(connection.accountIds);
  // Its last account (as far as the website knows; a revocation may have taken others) takes the
  // connection with it.
  if (connection.accountIds.length <= 1) state.mayBeRemoved.add(connection.itemId);
  const settled = await callUntilSettled(
    () =>
      context.service.call(
        'POST /remove-account',
        {
          method: 'POST',
          path: '/remove-account',
          body: { subscription_user_id: connection.userId, provider_account_id: accountId },
        },
        asWebsite(context),
      ),
    { retryOn: isUnavailable, until: context.retryUntil() },
  );
  if (!settled.final || !settled.answer) {
    state.mayBeRemoved.add(connection.itemId);
    state.uncertainAccounts.add(connection.itemId);
    state.forget(connection);
    return;
  }
  const { status, text } = settled.answer;
  if (status === 200 || status === 404) {
    connection.accountIds = connection.accountIds.filter((id) => id !== accountId);
    state.goneAccounts.add(accountId);
  }
  if (status === 200) {
    const institutionRemoved = (JSON.parse(text) as { institution_removed?: boolean }).institution_removed;
    state.accountRemovals.push({
      accountId,
      itemId: connection.itemId,
      institutionRemoved: institutionRemoved === true,
    });
    if (institutionRemoved) {
      state.mayBeRemoved.add(connection.itemId);
      state.removedItems.add(connection.itemId);
      state.forget(connection);
      return;
    }
  }
  state.giveBack(connection);
}

/** Removes a whole connection; retried until the service says 200 or 404. */
export async function removeInstitution(context: TrafficContext): Promise<void> {
  const { state } = context;
  const connection = state.take(context.random);
  if (!connection) return linkAndExchange(context);
  state.mayBeRemoved.add(connection.itemId);
  const settled = await callUntilSettled(
    () =>
      context.service.call(
        'POST /remove-institution',
        {
          method: 'POST',
          path: '/remove-institution',
          // A Teller connection by its item_id, as docs/website-guide.md tells the website ("Teller
          // connections: what a removal does at Teller"): /remove-institution's access_token must look
          // like a Plaid access token, so the Teller token the exchange answered with is refused (400).
          body:
            connection.provider === 'teller'
              ? { subscription_user_id: connection.userId, item_id: connection.itemId }
              : { subscription_user_id: connection.userId, access_token: connection.accessToken },
        },
        asWebsite(context),
      ),
    { retryOn: isUnavailable, until: context.retryUntil() },
  );
  const status = settled.final ? settled.answer?.status : undefined;
  if (status === 200) state.removedItems.add(connection.itemId);
  if (status === 200 || status === 404 || status === undefined) state.forget(connection);
  else state.giveBack(connection);
}
