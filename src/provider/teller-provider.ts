import { performance } from 'node:perf_hooks';
import type { IPolicy } from 'cockatiel';
import { Agent, request } from 'undici';
import { z } from 'zod';
import type { Logger } from '../observability/logger';
import type { BreakerState, ServiceMetrics } from '../observability/metrics';
import type { BankAccount } from '../vocabulary/bank-account';
import type { TellerCall, TellerCaller, TellerEnvironment } from '../vocabulary/teller-calls';
import type { TellerDisconnectReason } from '../vocabulary/teller-webhooks';
import {
  buildCallPolicies,
  runProviderCall,
  failureSummary,
  logBreakerState,
  type CallPolicyTuning,
} from './call-policies';
import { ProviderError } from './provider-error';
import {
  EnrollmentDisconnectedError,
  tellerAnswerToProviderError,
  toTellerProviderError,
} from './teller-error-translation';

/**
 * The service's client of Teller's API (https://teller.io/docs/api). Sources followed:
 * - https://teller.io/docs/api/authentication: every call in `development` and `production` presents the
 *   application's client certificate (mTLS); the access token is the HTTP Basic user name with an empty
 *   password (`curl -u ACCESS_TOKEN:`; also tellerhq/examples `node/teller.js`).
 * - https://teller.io/docs/api/accounts: `GET /accounts`, `GET /accounts/:id`, `DELETE /accounts/:id`, and
 *   `DELETE /accounts`, which removes every account of the token and so "effectively deletes the
 *   enrollment": the service revokes an enrollment with it (the Teller emulator's README takes the same).
 * - https://teller.io/docs/api/errors: the error object and statuses (teller-error-translation.ts).
 * No `Teller-Version` header is sent: neither the pages above nor the emulator ask for one, and without it
 * Teller answers with the application's own API version.
 */
export interface TellerProviderOptions extends CallPolicyTuning {
  /** `https://api.teller.io`, or the emulator's URL. */
  baseUrl: string;
  environment: TellerEnvironment;
  /** The application's client certificate and its key (PEM, Teller's `teller.zip`); required outside `sandbox`. */
  certificatePem?: string | undefined;
  privateKeyPem?: string | undefined;
  /** Extra CA certificates to trust (PEM): the emulator's development CA; Teller itself needs none. */
  caPem?: string | undefined;
  timeoutMs: number;
  /** Who calls through this client: its breaker, and its log lines, are named for it. */
  caller?: TellerCaller;
  metrics?: Pick<ServiceMetrics, 'observeTellerAttempt' | 'setTellerBreakerState'>;
  logger: Logger;
}

/** One of an enrollment's accounts: the service's stored shape, and what Teller says besides. */
export interface TellerAccount extends BankAccount {
  enrollmentId: string;
  /** ISO 4217. */
  currency: string;
  institution: { id: string; name: string };
  /** `open` or `closed`. */
  status: string;
}

/** What reconciliation learns of an enrollment by listing its accounts. */
export type EnrollmentCheck =
  | { state: 'healthy'; accounts: TellerAccount[] }
  | { state: 'disconnected'; reason: TellerDisconnectReason; errorCode: string };

const MAX_RESPONSE_BYTES = 1024 * 1024;
const ID = z.string().min(1).max(256);

/** https://teller.io/docs/api/accounts ("Properties"): what the service reads of an account. */
const accountSchema = z.object({
  id: ID,
  enrollment_id: ID,
  name: z.string().min(1).max(512),
  last_four: z.string().max(32).nullish(),
  type: z.string().min(1).max(64),
  subtype: z.string().max(64).nullish(),
  currency: z.string().min(1).max(16),
  status: z.string().min(1).max(32),
  institution: z.object({ id: ID, name: z.string().min(1).max(512) }),
});
const responses = {
  accounts: z.array(accountSchema).max(100),
  account: accountSchema,
};

/** Account ids are Teller's `acc_…`; anything else never reaches a URL. */
const ACCOUNT_ID = /^[A-Za-z0-9_-]{1,128}$/;

export class TellerProvider {
  private readonly agent: Agent;
  private readonly origin: URL;
  /** The base URL without a trailing slash: each call's path is appended to it. */
  private readonly base: string;
  private readonly repeatable: IPolicy;

  constructor(private readonly options: TellerProviderOptions) {
    const hasCertificate = Boolean(options.certificatePem && options.privateKeyPem);
    // As Teller's own example refuses to start (tellerhq/examples `node/teller.js`): outside the sandbox
    // every call would be refused with 400 "Missing certificate".
    if (options.environment !== 'sandbox' && !hasCertificate) {
      throw new Error(`Teller's ${options.environment} environment needs the client certificate and key`);
    }
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.origin = new URL(this.base);
    this.agent = new Agent({
      connect: {
        ...(hasCertificate ? { cert: options.certificatePem, key: options.privateKeyPem } : {}),
        ...(options.caPem ? { ca: options.caPem } : {}),
        timeout: options.timeoutMs,
      },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      maxResponseSize: MAX_RESPONSE_BYTES,
    });
    const policies = buildCallPolicies(options, (state) => this.reportBreakerState(state));
    // Every Teller call this service makes is a read or a delete: each is safe to repeat.
    this.repeatable = policies.repeatable;
  }

  private get caller(): TellerCaller {
    return this.options.caller ?? 'request';
  }

  /** Closes the connections kept open to Teller. */
  async close(): Promise<void> {
    await this.agent.close();
  }

  /** The breaker's gauge, and its one log line. */
  private reportBreakerState(state: BreakerState): void {
    this.options.metrics?.setTellerBreakerState(this.caller, state);
    logBreakerState(this.options.logger, 'Teller', this.caller, state, this.options);
  }

  /** One HTTP exchange with Teller: a 2xx answers its JSON body (undefined for 204), else it throws. */
  private async send(
    operation: TellerCall,
    method: 'GET' | 'DELETE',
    path: string,
    accessToken: string,
  ): Promise<unknown> {
    const response = await request(`${this.base}${path}`, {
      method,
      dispatcher: this.agent,
      headers: {
        accept: 'application/json',
        // https://teller.io/docs/api/authentication: the token is the user name, the password empty.
        authorization: `Basic ${Buffer.from(`${accessToken}:`, 'utf8').toString('base64')}`,
      },
      signal: AbortSignal.timeout(this.options.timeoutMs),
    });
    const text = await response.body.text();
    let body: unknown = undefined;
    if (text !== '') {
      try {
        body = JSON.parse(text) as unknown;
      } catch {
        body = undefined;
        if (response.statusCode < 300) {
          throw new ProviderError('invalid_response', operation, {
            httpStatus: response.statusCode,
            message: `${operation} answered a body that is not JSON`,
          });
        }
      }
    }
    if (response.statusCode >= 200 && response.statusCode < 300) return body;
    const retryAfter = response.headers['retry-after'];
    throw tellerAnswerToProviderError(operation, {
      status: response.statusCode,
      body,
      retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
    });
  }

  /**
   * One call: its attempts under the policy, each measured and, when it fails, one log line. A span
   * covers the call.
   */
  private call<T>(operation: TellerCall, schema: z.ZodType<T>, send: () => Promise<unknown>): Promise<T> {
    const toFailure = (error: unknown) => toTellerProviderError(operation, error, this.origin.hostname);
    return runProviderCall({
      spanName: `teller ${operation}`,
      prefix: 'teller',
      attributes: { 'teller.call': operation, 'teller.caller': this.caller },
      policy: this.repeatable,
      attempt: async (attempt) => {
        const started = performance.now();
        try {
          const parsed = schema.safeParse(await send());
          if (!parsed.success) {
            throw new ProviderError('invalid_response', operation, {
              message: `${operation} answered without the fields the service needs`,
            });
          }
          this.recordAttempt(operation, attempt, started, null);
          return parsed.data;
        } catch (error) {
          const failure = toFailure(error);
          this.recordAttempt(operation, attempt, started, failure);
          throw failure;
        }
      },
      toFailure,
    });
  }

  private recordAttempt(
    operation: TellerCall,
    attempt: number,
    started: number,
    failure: ProviderError | null,
  ): void {
    const seconds = (performance.now() - started) / 1000;
    const fields = { call: operation, caller: this.caller, attempt, duration_ms: Math.round(seconds * 1000) };
    if (failure === null) {
      this.options.metrics?.observeTellerAttempt({ call: operation, outcome: 'ok', seconds });
      this.options.logger.debug(fields, 'Teller call');
      return;
    }
    this.options.metrics?.observeTellerAttempt({
      call: operation,
      outcome: failure.kind,
      seconds,
      tellerErrorCode: failure.errorCode,
    });
    const network = failure.network;
    this.options.logger.warn(
      {
        ...fields,
        kind: failure.kind,
        error_code: failure.errorCode,
        http_status: failure.httpStatus,
        ...(network
          ? {
              network_error: network.code,
              syscall: network.syscall,
              host: network.host,
              ...(network.port === null ? {} : { port: network.port }),
            }
          : {}),
      },
      `Teller call failed: ${operation} ${failureSummary(failure)}`,
    );
  }

  /** `GET /accounts`: the enrollment's accounts (https://teller.io/docs/api/accounts, "List Accounts"). */
  async listAccounts(accessToken: string): Promise<TellerAccount[]> {
    const accounts = await this.call('GET /accounts', responses.accounts, () =>
      this.send('GET /accounts', 'GET', '/accounts', accessToken),
    );
    return accounts.map(toAccount);
  }

  /** `GET /accounts/{id}` ("Get Account"). */
  async getAccount(accessToken: string, accountId: string): Promise<TellerAccount> {
    const path = accountPath('GET /accounts/{id}', accountId);
    const account = await this.call('GET /accounts/{id}', responses.account, () =>
      this.send('GET /accounts/{id}', 'GET', path, accessToken),
    );
    return toAccount(account);
  }

  /**
   * `DELETE /accounts/{id}` ("Delete Account"): the application's access to that account ends. Repeated
   * after a lost answer, Teller says 404: the caller reads that `item_gone` as done.
   */
  async deleteAccount(accessToken: string, accountId: string): Promise<void> {
    const path = accountPath('DELETE /accounts/{id}', accountId);
    await this.call('DELETE /accounts/{id}', z.undefined(), () =>
      this.send('DELETE /accounts/{id}', 'DELETE', path, accessToken),
    );
  }

  /**
   * `DELETE /accounts` ("Delete Accounts"): every account of the token, which "effectively deletes the
   * enrollment", i.e. revokes it. Afterwards the token answers 403 (`item_gone`), which a retrying
   * caller reads as already done (the emulator's README, assumption 9).
   */
  async revokeEnrollment(accessToken: string): Promise<void> {
    await this.call('DELETE /accounts', z.undefined(), () =>
      this.send('DELETE /accounts', 'DELETE', '/accounts', accessToken),
    );
  }

  /**
   * Reconciliation's look at an enrollment: its accounts when Teller can reach the bank, else the reason
   * it is disconnected. Any other failure is thrown as it came.
   */
  async checkEnrollment(accessToken: string): Promise<EnrollmentCheck> {
    try {
      return { state: 'healthy', accounts: await this.listAccounts(accessToken) };
    } catch (error) {
      if (error instanceof EnrollmentDisconnectedError) {
        return { state: 'disconnected', reason: error.reason, errorCode: error.errorCode ?? error.reason };
      }
      throw error;
    }
  }
}

function accountPath(operation: TellerCall, accountId: string): string {
  if (!ACCOUNT_ID.test(accountId)) {
    throw new ProviderError('rejected', operation, {
      message: 'not a Teller account id',
      reachedProvider: false,
    });
  }
  return `/accounts/${accountId}`;
}

function toAccount(account: z.infer<typeof accountSchema>): TellerAccount {
  return {
    providerAccountId: account.id,
    name: account.name,
    // Teller has no official name distinct from `name`.
    officialName: null,
    mask: account.last_four ?? null,
    type: account.type,
    subtype: account.subtype ?? null,
    enrollmentId: account.enrollment_id,
    currency: account.currency,
    institution: { id: account.institution.id, name: account.institution.name },
    status: account.status,
  };
}
