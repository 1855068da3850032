import type { TrafficContext } from './traffic-context';
import { APP_NAME, createLinkToken, RECONNECT_SHARE, submitExchange } from './website-traffic';
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
  await submitExchange(context, {
    attempt,
    body,
    institutionId,
    label: 'POST /exchange-public-token (teller)',
    noteAs: `Teller exchange for ${userId}`,
    // An enrollment one copy got a final answer for reached the service: the checks hold it to Teller's.
    onFinalAnswer: () => state.tellerGiven.add(enrollmentId),
  });
}
