import { sleep } from '../processes';
import { callUntilSettled } from './http-client';
import { asWebsite, type TrafficContext } from './traffic-context';
import {
  APP_NAME,
  CONCURRENT_DUPLICATE_SHARE,
  createLinkToken,
  isRetryableExchange,
  noteIfSlow,
  readConnection,
  RECONNECT_SHARE,
} from './website-traffic';
import type { ExchangeAttempt } from './website-state';

/**
 * The website linking a bank through Teller: a Teller link token (its nonce), Teller Connect at the
 * emulator (in this process, as the user's browser would finish it), then the exchange of Connect's signed
 * payload (https://teller.io/docs/guides/connect), sometimes submitted two or three times at once, and
 * sometimes the same bank again for a user who has it (refused: 409 DUPLICATE_INSTITUTION, the new
 * enrollment revoked). Removals are the website's lanes (website-traffic.ts), whatever the provider.
 */

/** The emulator's sandbox institutions. */
const TELLER_INSTITUTIONS = ['chase', 'wells_fargo', 'security_cu', 'harbor_cu', 'prairie_bank'];

export async function linkAndExchangeTeller(context: TrafficContext): Promise<void> {
  const { random, state } = context;
  const reconnect = random.chance(RECONNECT_SHARE) ? state.peek(random, 'teller') : undefined;
  const userId = reconnect?.userId ?? state.nextUserId();
  const institutionId = reconnect?.institutionId ?? random.pick(TELLER_INSTITUTIONS);
  const nonce = await createLinkToken(context, userId, 'teller');
  if (!nonce) return;
  const enrollment = context.teller.completeConnect({ nonce, institution: institutionId });
  const enrollmentId = enrollment.enrollment.id;
  state.tellerEnrollments.add(enrollmentId);
  const attempt: ExchangeAttempt = {
    provider: 'teller',
    publicToken: enrollmentId,
    userId,
    linkItemId: enrollmentId,
    answers: [],
    unresolved: 0,
  };
  state.exchanges.push(attempt);
  const body = { provider: 'teller', enrollment, subscription_user_id: userId, app_name: APP_NAME };
  const copies = random.chance(CONCURRENT_DUPLICATE_SHARE) ? random.integer(2, 3) : 1;
  const delays = Array.from({ length: copies }, (_, index) => (index === 0 ? 0 : random.between(0, 40)));
  await Promise.all(
    delays.map(async (delay) => {
      await sleep(delay);
      const startedAt = Date.now();
      const settled = await callUntilSettled(
        () =>
          context.service.call(
            'POST /exchange-public-token (teller)',
            { method: 'POST', path: '/exchange-public-token', body },
            asWebsite(context),
          ),
        { retryOn: isRetryableExchange, until: context.retryUntil() },
      );
      noteIfSlow(context, `Teller exchange for ${userId}`, startedAt, settled);
      if (!settled.final || !settled.answer) {
        attempt.unresolved += 1;
        return;
      }
      state.tellerGiven.add(enrollmentId);
      const { status, code, text } = settled.answer;
      if (status !== 200) {
        attempt.answers.push({ status, code });
        return;
      }
      const connection = readConnection('teller', userId, institutionId, text);
      attempt.answers.push({ status, itemId: connection.itemId });
      state.addConnection(connection);
    }),
  );
}
