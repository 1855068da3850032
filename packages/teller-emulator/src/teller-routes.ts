import type { EmulatedAccount, EmulatedEnrollment, EnrollmentStore } from './enrollment-store';
import {
  SANDBOX_INSTITUTIONS,
  supportsBalances,
  supportsDetails,
  supportsTransactions,
} from './sandbox-data';
import { tellerErrors } from './teller-errors';

export interface RouteAnswer {
  status: number;
  /** undefined: no body (204). */
  body: unknown;
}

export interface RouteContext {
  store: EnrollmentStore;
  /** Where the links in answers point: the emulator as the client reached it. */
  baseUrl: string;
  /** The access token's enrollment; undefined for a route without authentication. */
  enrollment: EmulatedEnrollment | undefined;
  params: string[];
}

type Authenticated = Omit<RouteContext, 'enrollment'> & { enrollment: EmulatedEnrollment };

/** A route answered only for an access token's enrollment (the emulator authenticates before). */
function withEnrollment(
  answer: (context: Authenticated) => RouteAnswer,
): (context: RouteContext) => RouteAnswer {
  return (context) => {
    if (!context.enrollment) throw tellerErrors.missingAccessToken();
    return answer({ ...context, enrollment: context.enrollment });
  };
}

export interface TellerRoute {
  method: 'GET' | 'DELETE';
  pattern: RegExp;
  /** Needs an access token (every route but the institutions list). */
  authenticated: boolean;
  /** Involves end-user data, so a client certificate outside the sandbox (everything but institutions). */
  endUserData: boolean;
  answer: (context: RouteContext) => RouteAnswer;
}

const ACCOUNT_ID = '(acc_[a-z0-9]+)';

/**
 * The part of Teller's API the service uses:
 * - `GET /institutions` (https://teller.io/docs/api/institutions): no authentication.
 * - `GET /accounts`, `GET /accounts/:id` (https://teller.io/docs/api/accounts).
 * - `GET /accounts/:id/details` (https://teller.io/docs/api/account/details).
 * - `GET /accounts/:id/balances` (https://teller.io/docs/api/account/balances).
 * - `DELETE /accounts/:id`: removes the application's access to that account; `DELETE /accounts`: to
 *   every account of the enrollment, "i.e. effectively deletes the enrollment"; both answer 204 without a
 *   body (https://teller.io/docs/api/accounts, "Delete Account", "Delete Accounts").
 * Transactions, identity and payments are not emulated (404), though accounts link to transactions
 * where the institution offers them, as Teller's do.
 */
export const TELLER_ROUTES: readonly TellerRoute[] = [
  {
    method: 'GET',
    pattern: /^\/institutions$/,
    authenticated: false,
    endUserData: false,
    answer: () => ({
      status: 200,
      body: SANDBOX_INSTITUTIONS.map(({ id, name, products }) => ({ id, name, products: [...products] })),
    }),
  },
  {
    method: 'GET',
    pattern: /^\/accounts$/,
    authenticated: true,
    endUserData: true,
    answer: withEnrollment(({ enrollment, baseUrl }) => {
      refuseDisconnected(enrollment);
      const accounts = enrollment.accounts.filter((account) => !account.deleted);
      return { status: 200, body: accounts.map((account) => wireAccount(account, enrollment, baseUrl)) };
    }),
  },
  {
    method: 'DELETE',
    pattern: /^\/accounts$/,
    authenticated: true,
    endUserData: true,
    // Removing access needs no session at the bank: allowed on a disconnected enrollment too (assumption).
    answer: withEnrollment(({ enrollment }) => {
      enrollment.status = 'revoked';
      for (const account of enrollment.accounts) account.deleted = true;
      return { status: 204, body: undefined };
    }),
  },
  {
    method: 'GET',
    pattern: new RegExp(`^/accounts/${ACCOUNT_ID}$`),
    authenticated: true,
    endUserData: true,
    answer: withEnrollment(({ enrollment, baseUrl, params }) => {
      const account = readableAccount(enrollment, params[0]);
      return { status: 200, body: wireAccount(account, enrollment, baseUrl) };
    }),
  },
  {
    method: 'DELETE',
    pattern: new RegExp(`^/accounts/${ACCOUNT_ID}$`),
    authenticated: true,
    endUserData: true,
    answer: withEnrollment(({ enrollment, params }) => {
      const account = enrollment.accounts.find(
        (candidate) => candidate.id === params[0] && !candidate.deleted,
      );
      if (!account) throw tellerErrors.notFound();
      account.deleted = true;
      return { status: 204, body: undefined };
    }),
  },
  {
    method: 'GET',
    pattern: new RegExp(`^/accounts/${ACCOUNT_ID}/details$`),
    authenticated: true,
    endUserData: true,
    answer: withEnrollment(({ store, enrollment, baseUrl, params }) => {
      const account = readableAccount(enrollment, params[0]);
      if (!supportsDetails(enrollment.institution, account.type)) throw tellerErrors.notFound();
      const routing = store.routingNumbers(enrollment);
      return {
        status: 200,
        body: {
          account_id: account.id,
          account_number: account.account_number,
          routing_numbers: { ach: routing.ach, wire: routing.wire, bacs: null },
          links: {
            self: `${baseUrl}/accounts/${account.id}/details`,
            account: `${baseUrl}/accounts/${account.id}`,
          },
        },
      };
    }),
  },
  {
    method: 'GET',
    pattern: new RegExp(`^/accounts/${ACCOUNT_ID}/balances$`),
    authenticated: true,
    endUserData: true,
    answer: withEnrollment(({ enrollment, baseUrl, params }) => {
      const account = readableAccount(enrollment, params[0]);
      if (!supportsBalances(enrollment.institution)) throw tellerErrors.notFound();
      return {
        status: 200,
        body: {
          account_id: account.id,
          ledger: account.ledger,
          available: account.available,
          links: {
            self: `${baseUrl}/accounts/${account.id}/balances`,
            account: `${baseUrl}/accounts/${account.id}`,
          },
        },
      };
    }),
  },
];

export function matchRoute(
  method: string,
  path: string,
): { route: TellerRoute; params: string[] } | undefined {
  for (const route of TELLER_ROUTES) {
    const match = route.pattern.exec(path);
    if (match && route.method === method) return { route, params: match.slice(1) };
  }
  return undefined;
}

/**
 * "When your application makes a request involving a disconnected enrollment Teller returns a 404
 * status code with an error code beginning with `enrollment.disconnected`" (https://teller.io/docs/api/errors).
 */
function refuseDisconnected(enrollment: EmulatedEnrollment): void {
  if (enrollment.status === 'disconnected') {
    throw tellerErrors.enrollmentDisconnected(enrollment.disconnect_reason ?? 'disconnected');
  }
}

/** An account whose data may be read: the enrollment connected, the account shared, not deleted, open. */
function readableAccount(enrollment: EmulatedEnrollment, accountId: string | undefined): EmulatedAccount {
  refuseDisconnected(enrollment);
  const account = enrollment.accounts.find((candidate) => candidate.id === accountId && !candidate.deleted);
  if (!account) throw tellerErrors.notFound();
  // https://teller.io/docs/api/accounts: a closed account and its sub-resources answer 410 `account.closed`.
  if (account.status === 'closed') throw tellerErrors.accountClosed();
  return account;
}

/** https://teller.io/docs/api/accounts ("Properties"): `links` names only what the institution supports. */
export function wireAccount(account: EmulatedAccount, enrollment: EmulatedEnrollment, baseUrl: string) {
  const self = `${baseUrl}/accounts/${account.id}`;
  const links: Record<string, string> = { self };
  if (supportsDetails(enrollment.institution, account.type)) links.details = `${self}/details`;
  if (supportsBalances(enrollment.institution)) links.balances = `${self}/balances`;
  if (supportsTransactions(enrollment.institution)) links.transactions = `${self}/transactions`;
  return {
    id: account.id,
    enrollment_id: enrollment.id,
    name: account.name,
    last_four: account.last_four,
    type: account.type,
    subtype: account.subtype,
    currency: account.currency,
    status: account.status,
    institution: { id: enrollment.institution.id, name: enrollment.institution.name },
    links,
  };
}
