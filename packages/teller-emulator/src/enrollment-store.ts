import { accessToken, isoSeconds, randomDigits, tellerId } from './ids';
import type { DisconnectReason } from './teller-errors';
import {
  ACCOUNT_TEMPLATES,
  ROUTING_NUMBERS,
  type AccountSubtype,
  type AccountType,
  type SandboxInstitution,
} from './sandbox-data';

export type EnrollmentStatus = 'connected' | 'disconnected' | 'revoked';

export interface EmulatedAccount {
  id: string;
  enrollment_id: string;
  name: string;
  type: AccountType;
  subtype: AccountSubtype;
  last_four: string;
  currency: 'USD';
  status: 'open' | 'closed';
  account_number: string;
  ledger: string;
  available: string;
  /** The application's access was removed with `DELETE /accounts/{id}`; the account is gone from the API. */
  deleted: boolean;
}

export interface EmulatedEnrollment {
  id: string;
  user_id: string;
  institution: SandboxInstitution;
  access_token: string;
  status: EnrollmentStatus;
  disconnect_reason: DisconnectReason | null;
  created_at: string;
  accounts: EmulatedAccount[];
}

/** What `GET /__emulator/enrollments` shows: the state, without the access token. */
export interface EnrollmentView {
  id: string;
  user_id: string;
  institution: { id: string; name: string };
  status: EnrollmentStatus;
  disconnect_reason: DisconnectReason | null;
  created_at: string;
  accounts: {
    id: string;
    name: string;
    type: AccountType;
    subtype: AccountSubtype;
    last_four: string;
    status: 'open' | 'closed';
    deleted: boolean;
  }[];
}

/** Enrollments, their accounts and their access tokens, in memory (as the Plaid emulator keeps its Items). */
export class EnrollmentStore {
  private readonly enrollments = new Map<string, EmulatedEnrollment>();
  private readonly byToken = new Map<string, EmulatedEnrollment>();

  constructor(
    private readonly environment: string,
    private readonly now: () => number,
  ) {}

  clear(): void {
    this.enrollments.clear();
    this.byToken.clear();
  }

  create(institution: SandboxInstitution, userId: string): EmulatedEnrollment {
    const id = tellerId('enr');
    const enrollment: EmulatedEnrollment = {
      id,
      user_id: userId,
      institution,
      access_token: accessToken(this.environment),
      status: 'connected',
      disconnect_reason: null,
      created_at: isoSeconds(this.now()),
      accounts: ACCOUNT_TEMPLATES.map((template) => {
        const accountNumber = randomDigits(12).replace(/^0/, '1');
        return {
          id: tellerId('acc'),
          enrollment_id: id,
          name: template.name,
          type: template.type,
          subtype: template.subtype,
          last_four: accountNumber.slice(-4),
          currency: 'USD',
          status: 'open',
          account_number: accountNumber,
          ledger: template.ledger,
          available: template.available,
          deleted: false,
        };
      }),
    };
    this.enrollments.set(id, enrollment);
    this.byToken.set(enrollment.access_token, enrollment);
    return enrollment;
  }

  byId(id: string): EmulatedEnrollment | undefined {
    return this.enrollments.get(id);
  }

  /** The enrollment a token opens; undefined for an unknown token. A revoked one is still found. */
  byAccessToken(token: string): EmulatedEnrollment | undefined {
    return this.byToken.get(token);
  }

  all(): EmulatedEnrollment[] {
    return [...this.enrollments.values()];
  }

  routingNumbers(enrollment: EmulatedEnrollment): { ach: string; wire: string } {
    return ROUTING_NUMBERS[enrollment.institution.id] ?? { ach: '011000015', wire: '011000015' };
  }
}

export function viewOf(enrollment: EmulatedEnrollment): EnrollmentView {
  return {
    id: enrollment.id,
    user_id: enrollment.user_id,
    institution: { id: enrollment.institution.id, name: enrollment.institution.name },
    status: enrollment.status,
    disconnect_reason: enrollment.disconnect_reason,
    created_at: enrollment.created_at,
    accounts: enrollment.accounts.map((account) => ({
      id: account.id,
      name: account.name,
      type: account.type,
      subtype: account.subtype,
      last_four: account.last_four,
      status: account.status,
      deleted: account.deleted,
    })),
  };
}
