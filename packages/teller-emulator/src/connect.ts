import type { EmulatedEnrollment, EnrollmentStore } from './enrollment-store';
import { tellerId } from './ids';
import { DEFAULT_INSTITUTION_ID, institutionById, SANDBOX_INSTITUTIONS } from './sandbox-data';
import type { TokenSigningKeys } from './token-signing';

/**
 * What Teller Connect hands the page's `onSuccess` (https://teller.io/docs/guides/connect, "Handling a
 * Successful Enrollment"): the access token, the Teller user, the enrollment and its institution's name,
 * and, when the page passed a `nonce`, `signatures`.
 */
export interface ConnectSuccess {
  accessToken: string;
  user: { id: string };
  enrollment: { id: string; institution: { name: string } };
  signatures?: string[];
}

export interface ConnectRequest {
  /** The nonce the page passed to Connect; without one, Connect returns no `signatures`. */
  nonce?: string;
  /** An institution id from `GET /institutions` (default `chase`); for a repair, the enrollment's own. */
  institution?: string;
  /** The Teller user to enroll for (an existing or new `usr_…` id); a new user when absent. */
  userId?: string;
  /** Connect opened with `enrollmentId` (update mode): repairs that enrollment. */
  enrollmentId?: string;
}

/** A request Connect could not complete, with the control API's status for it. */
export class ConnectRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The message Connect's signatures sign (https://teller.io/docs/guides/connect, "Verifying Enrollment
 * Object Signature"): `nonce`, `accessToken`, `userId`, `enrollmentId` and `environment`, in that order,
 * joined with dots, as UTF-8.
 */
export function connectSignatureMessage(fields: {
  nonce: string;
  accessToken: string;
  userId: string;
  enrollmentId: string;
  environment: string;
}): string {
  return [fields.nonce, fields.accessToken, fields.userId, fields.enrollmentId, fields.environment].join('.');
}

const MAX_NONCE_LENGTH = 1024;
const USER_ID = /^usr_[a-z0-9]{1,64}$/;

/**
 * A user finishing Teller Connect. Without `enrollmentId`, a new enrollment at the institution with its
 * accounts and a new access token. With it, update mode: "After successful re-authentication, the
 * existing enrollment is restored and the same `accessToken` continues to work"
 * (https://teller.io/docs/guides/connect, "Repairing Disconnected Enrollments"), so the payload names the
 * same enrollment, user and token, signed over the new nonce.
 */
export function completeConnect(
  store: EnrollmentStore,
  keys: TokenSigningKeys,
  environment: string,
  request: ConnectRequest,
): { success: ConnectSuccess; enrollment: EmulatedEnrollment; repaired: boolean } {
  const { nonce, institution: institutionId, userId, enrollmentId } = request;
  if (nonce !== undefined && (nonce === '' || nonce.length > MAX_NONCE_LENGTH)) {
    throw new ConnectRefusal(
      400,
      `nonce must be a non-empty string of at most ${MAX_NONCE_LENGTH} characters`,
    );
  }
  if (userId !== undefined && !USER_ID.test(userId)) {
    throw new ConnectRefusal(400, 'user_id must be a Teller user id such as usr_oiin624kqjrg2mp2ea000');
  }
  const institution = institutionById(institutionId ?? DEFAULT_INSTITUTION_ID);
  if (!institution) {
    throw new ConnectRefusal(
      400,
      `institution must be one of ${SANDBOX_INSTITUTIONS.map((candidate) => candidate.id).join(', ')}`,
    );
  }

  let enrollment: EmulatedEnrollment;
  let repaired = false;
  if (enrollmentId !== undefined) {
    const existing = store.byId(enrollmentId);
    if (!existing) throw new ConnectRefusal(404, `no enrollment ${enrollmentId}`);
    if (existing.status === 'revoked') {
      throw new ConnectRefusal(
        409,
        `enrollment ${enrollmentId} was deleted (DELETE /accounts); it cannot be repaired`,
      );
    }
    if (institutionId !== undefined && institutionId !== existing.institution.id) {
      throw new ConnectRefusal(
        400,
        `enrollment ${enrollmentId} is at ${existing.institution.id}, not ${institutionId}`,
      );
    }
    if (userId !== undefined && userId !== existing.user_id) {
      throw new ConnectRefusal(
        400,
        `enrollment ${enrollmentId} belongs to ${existing.user_id}, not ${userId}`,
      );
    }
    existing.status = 'connected';
    existing.disconnect_reason = null;
    enrollment = existing;
    repaired = true;
  } else {
    enrollment = store.create(institution, userId ?? tellerId('usr'));
  }

  const success: ConnectSuccess = {
    accessToken: enrollment.access_token,
    user: { id: enrollment.user_id },
    enrollment: { id: enrollment.id, institution: { name: enrollment.institution.name } },
  };
  if (nonce !== undefined) {
    success.signatures = keys.sign(
      connectSignatureMessage({
        nonce,
        accessToken: enrollment.access_token,
        userId: enrollment.user_id,
        enrollmentId: enrollment.id,
        environment,
      }),
    );
  }
  return { success, enrollment, repaired };
}
