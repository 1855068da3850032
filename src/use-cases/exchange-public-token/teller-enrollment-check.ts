import { AppError } from '../../errors';
import { ConnectVerificationError } from '../../provider/teller-connect-verifier';
import { bindLinkNonce, listNoncesOfUser } from '../../repository/link-nonces-repository';
import type { TellerAccess, UseCaseDependencies } from '../use-case-dependencies';
import type { TellerExchangeInput } from './exchange-inputs';

/**
 * Whether Teller Connect's payload may be exchanged for this user, decided before anything is stored
 * and before Teller is called: its signatures verify (https://teller.io/docs/guides/connect, "Verifying
 * Enrollment Object Signature") over a nonce this service issued to this user, with the service's own
 * Teller environment in the signed message, so a payload signed for another environment fails like a
 * forged one; and that nonce is unexpired and unused, or already this enrollment's.
 */

/** The payload verified: the nonce its signatures are over, and what that nonce was issued for. */
export interface VerifiedEnrollment {
  nonce: string;
  /** The enrollment the nonce was issued to repair (update mode), if any. */
  repairs: string | null;
}

/**
 * The payload does not name its nonce, so the user's newest nonces are tried in turn; Ed25519 verifies
 * in tens of microseconds, and per-user limits keep the list short. A nonce older than this many newer
 * ones is not tried.
 */
export const MAX_NONCES_TRIED = 32;

/** Why a payload was refused: for the request's log line (the website gets one problem for all). */
type RefusalReason = 'no_signatures' | 'malformed' | 'bad_signature' | 'nonce_expired' | 'nonce_used';

const REFUSAL_DETAILS: Record<RefusalReason, string> = {
  no_signatures:
    'The enrollment carries no signatures: open Teller Connect with the nonce of a Teller link token.',
  malformed: 'The enrollment’s signatures are not base64 Ed25519 signatures.',
  bad_signature:
    'No signature of the enrollment verifies over a Teller link token issued to this user in this service’s ' +
    'Teller environment.',
  nonce_expired:
    'The Teller link token expired before this enrollment was exchanged; start Teller Connect again.',
  nonce_used: 'The Teller link token was already used for another enrollment; start Teller Connect again.',
};

/** Payloads refused each count against the exchange limit, as a public token Plaid refuses does. */
async function refuse(
  deps: Pick<UseCaseDependencies, 'perUserLimits'>,
  input: TellerExchangeInput,
  reason: RefusalReason,
): Promise<never> {
  await deps.perUserLimits.consume('exchange', input.subscriptionUserId);
  throw new AppError('INVALID_ENROLLMENT', {
    detail: REFUSAL_DETAILS[reason],
    logFields: { reason, enrollment_id: input.enrollment.enrollment.id },
  });
}

export async function verifyTellerEnrollment(
  deps: Pick<UseCaseDependencies, 'pool' | 'perUserLimits'>,
  teller: Pick<TellerAccess, 'connect' | 'connectVerifier'>,
  input: TellerExchangeInput,
): Promise<VerifiedEnrollment> {
  const { enrollment } = input;
  const candidates = await listNoncesOfUser(deps.pool, input.subscriptionUserId, MAX_NONCES_TRIED);
  let verified: VerifiedEnrollment | undefined;
  for (const candidate of candidates) {
    try {
      teller.connectVerifier.verify({
        nonce: candidate.nonce,
        accessToken: enrollment.accessToken,
        userId: enrollment.user.id,
        enrollmentId: enrollment.enrollment.id,
        environment: teller.connect.environment,
        signatures: enrollment.signatures,
      });
      verified = { nonce: candidate.nonce, repairs: candidate.repairEnrollmentId };
      break;
    } catch (error) {
      if (!(error instanceof ConnectVerificationError)) throw error;
      // Signatures that are no signatures fail alike over every nonce: no need to try the others.
      if (error.reason !== 'bad_signature') return refuse(deps, input, error.reason);
    }
  }
  if (!verified) return refuse(deps, input, 'bad_signature');
  const binding = await bindLinkNonce(deps.pool, {
    nonce: verified.nonce,
    subscriptionUserId: input.subscriptionUserId,
    enrollmentId: enrollment.enrollment.id,
  });
  if (binding === 'expired') return refuse(deps, input, 'nonce_expired');
  if (binding === 'used') return refuse(deps, input, 'nonce_used');
  return verified;
}
