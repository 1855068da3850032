import { performance } from 'node:perf_hooks';
import { trace } from '@opentelemetry/api';
import type { AxiosResponse } from 'axios';
import type { IPolicy } from 'cockatiel';
import {
  Configuration,
  CountryCode,
  PlaidApi,
  PlaidEnvironments,
  Products,
  type LinkTokenCreateRequest,
} from 'plaid';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import type { Logger } from '../observability/logger';
import type { BreakerState, ServiceMetrics } from '../observability/metrics';
import type { PlaidCaller, PlaidOperation } from '../vocabulary/plaid-calls';
import type {
  AccountProvider,
  CreateLinkTokenInput,
  BankAccount,
  ProviderItem,
  WebhookVerificationKey,
} from './account-provider';
import {
  buildCallPolicies,
  runProviderCall,
  failureSummary,
  logBreakerState,
  type CallPolicyTuning,
} from './call-policies';
import { toProviderError } from './plaid-error-translation';
import { ProviderError } from './provider-error';

export interface PlaidProviderOptions extends CallPolicyTuning {
  clientId: string;
  secret: string;
  env: 'sandbox' | 'production';
  baseUrl?: string | undefined;
  timeoutMs: number;
  products: string[];
  countryCodes: string[];
  language: string;
  webhookUrl?: string | undefined;
  redirectUri?: string | undefined;
  /** Who calls through this client: its breaker, metrics and log lines are named for it. */
  caller?: PlaidCaller;
  /** How many institution names are kept, and how long each; see INSTITUTION_NAMES. */
  institutionNames?: { max: number; ttlMs: number };
  metrics?: Pick<ServiceMetrics, 'observePlaidAttempt' | 'setBreakerState'>;
  logger: Logger;
}

/**
 * Institution names barely ever change, and a few hundred institutions make most connections: a
 * name is asked of Plaid once a day at most, and the cache stays under a megabyte whatever asks.
 */
const INSTITUTION_NAMES = { max: 2_000, ttlMs: 24 * 60 * 60 * 1000 };

const MAX_RESPONSE_BYTES = 1024 * 1024;
const TOKEN_TEXT = z.string().min(1).max(256);
const accessTokenSchema = z.string().regex(/^access-[a-z]+-[A-Za-z0-9-]{1,200}$/);
const nullableText = z.string().max(512).nullish();

const base64url = z.string().regex(/^[A-Za-z0-9_-]{1,128}$/);

const itemSchema = z.object({
  item_id: TOKEN_TEXT,
  institution_id: z.string().max(256).nullish(),
  institution_name: z.string().max(512).nullish(),
  webhook: z.string().max(2048).nullish(),
  error: z.object({ error_code: z.string().max(128), error_type: z.string().max(128).nullish() }).nullish(),
  consent_expiration_time: z.string().max(64).nullish(),
});
const responses = {
  linkToken: z.object({
    link_token: z.string().regex(/^link-[a-z]+-[A-Za-z0-9-]+$/),
    expiration: z.string(),
  }),
  exchange: z.object({ access_token: accessTokenSchema, item_id: TOKEN_TEXT }),
  item: z.object({ item: itemSchema }),
  accounts: z.object({
    item: itemSchema,
    accounts: z
      .array(
        z.object({
          account_id: TOKEN_TEXT,
          name: z.string().min(1).max(512),
          official_name: nullableText,
          mask: z.string().max(32).nullish(),
          type: z.string().min(1).max(64),
          subtype: z.string().max(64).nullish(),
        }),
      )
      .max(100),
  }),
  institution: z.object({
    institution: z.object({ institution_id: TOKEN_TEXT, name: z.string().min(1).max(512) }),
  }),
  webhookKey: z.object({
    key: z.object({
      alg: z.string().min(1).max(32),
      crv: z.string().min(1).max(32),
      kid: TOKEN_TEXT,
      kty: z.string().min(1).max(32),
      x: base64url,
      y: base64url,
      created_at: z.number().int().nonnegative(),
      expired_at: z.number().int().nonnegative().nullish(),
    }),
  }),
};

export class PlaidProvider implements AccountProvider {
  private readonly api: PlaidApi;
  private readonly repeatable: IPolicy;
  private readonly once: IPolicy;
  /** Concurrent look-ups of one institution share one call; a failure is not kept. */
  private readonly institutionNames: LRUCache<string, string>;

  constructor(private readonly options: PlaidProviderOptions) {
    // The SDK joins basePath and path as strings: a trailing slash would request `//link/token/create`.
    const basePath = (options.baseUrl ?? (PlaidEnvironments[options.env] as string)).replace(/\/+$/, '');
    this.api = new PlaidApi(
      new Configuration({
        basePath,
        baseOptions: {
          headers: { 'PLAID-CLIENT-ID': options.clientId, 'PLAID-SECRET': options.secret },
          timeout: options.timeoutMs,
          // axios would otherwise send even loopback traffic through HTTP_PROXY.
          proxy: false,
          maxRedirects: 0,
          maxContentLength: MAX_RESPONSE_BYTES,
          maxBodyLength: MAX_RESPONSE_BYTES,
        },
      }),
    );
    const policies = buildCallPolicies(options, (state) => this.reportBreakerState(state));
    this.repeatable = policies.repeatable;
    this.once = policies.once;
    const names = options.institutionNames ?? INSTITUTION_NAMES;
    this.institutionNames = new LRUCache<string, string>({
      max: names.max,
      ttl: names.ttlMs,
      fetchMethod: (institutionId) => this.fetchInstitutionName(institutionId),
    });
  }

  private get caller(): PlaidCaller {
    return this.options.caller ?? 'request';
  }

  /** The breaker's gauge, and its one log line. */
  private reportBreakerState(state: BreakerState): void {
    this.options.metrics?.setBreakerState(this.caller, state);
    logBreakerState(this.options.logger, 'Plaid', this.caller, state, this.options);
  }

  /**
   * One call: its attempts under the policy, each measured and, when it fails, one log line (no stack:
   * Plaid's code says what happened). A span covers the call, with the attempts' HTTP spans inside.
   */
  private call<T>(
    operation: PlaidOperation,
    policy: IPolicy,
    schema: z.ZodType<T>,
    send: () => Promise<AxiosResponse<unknown>>,
  ): Promise<T> {
    return runProviderCall({
      spanName: `plaid ${operation}`,
      prefix: 'plaid',
      attributes: { 'plaid.operation': operation, 'plaid.caller': this.caller },
      policy,
      attempt: async (attempt) => {
        const started = performance.now();
        try {
          const response = await send();
          const parsed = schema.safeParse(response.data);
          if (!parsed.success) {
            throw new ProviderError('invalid_response', operation, {
              message: `${operation} answered without the fields the service needs`,
            });
          }
          const requestId = (response.data as { request_id?: unknown }).request_id;
          this.recordAttempt(operation, attempt, started, {
            requestId: typeof requestId === 'string' ? requestId : null,
          });
          return parsed.data;
        } catch (error) {
          const failure = toProviderError(operation, error);
          this.recordAttempt(operation, attempt, started, { failure });
          throw failure;
        }
      },
      toFailure: (error) => toProviderError(operation, error),
      failureAttributes: (failure) =>
        failure.providerRequestId ? { 'plaid.request_id': failure.providerRequestId } : undefined,
    });
  }

  private recordAttempt(
    operation: PlaidOperation,
    attempt: number,
    started: number,
    result: { requestId: string | null } | { failure: ProviderError },
  ): void {
    const seconds = (performance.now() - started) / 1000;
    const fields = {
      operation,
      caller: this.caller,
      attempt,
      duration_ms: Math.round(seconds * 1000),
    };
    if ('requestId' in result) {
      this.options.metrics?.observePlaidAttempt({ operation, caller: this.caller, outcome: 'ok', seconds });
      trace.getActiveSpan()?.setAttribute('plaid.request_id', result.requestId ?? '');
      // Built only when it is written: at the usual `info` level, every call would make it for nothing.
      if (this.options.logger.isLevelEnabled('debug')) {
        this.options.logger.debug({ ...fields, plaid_request_id: result.requestId }, 'Plaid call');
      }
      return;
    }
    const { failure } = result;
    this.options.metrics?.observePlaidAttempt({
      operation,
      caller: this.caller,
      outcome: failure.kind,
      seconds,
      plaidErrorCode: failure.errorCode,
    });
    // A call that got no answer has no Plaid fields: the network's cause (ENOTFOUND, ECONNREFUSED, a
    // timeout) says what happened, and where.
    const network = failure.network;
    this.options.logger.warn(
      {
        ...fields,
        kind: failure.kind,
        error_type: failure.errorType,
        error_code: failure.errorCode,
        plaid_request_id: failure.providerRequestId,
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
      `Plaid call failed: ${operation} ${failureSummary(failure)}`,
    );
  }

  async createLinkToken(input: CreateLinkTokenInput): Promise<{ linkToken: string; expiration: string }> {
    const request: LinkTokenCreateRequest = {
      client_name: input.clientName,
      language: this.options.language,
      country_codes: this.options.countryCodes as CountryCode[],
      user: { client_user_id: input.clientUserId },
      ...(input.accessToken
        ? // Update mode also lets the user share accounts added at the bank (NEW_ACCOUNTS_AVAILABLE).
          { access_token: input.accessToken, update: { account_selection_enabled: true } }
        : { products: this.options.products as Products[] }),
      ...(this.options.webhookUrl ? { webhook: this.options.webhookUrl } : {}),
      ...(this.options.redirectUri ? { redirect_uri: this.options.redirectUri } : {}),
    };
    const data = await this.call('link/token/create', this.repeatable, responses.linkToken, () =>
      this.api.linkTokenCreate(request),
    );
    return { linkToken: data.link_token, expiration: data.expiration };
  }

  /** Never retried: a sent exchange may have created a billed Item whose token we would never see. */
  async exchangePublicToken(publicToken: string): Promise<{ accessToken: string; itemId: string }> {
    const data = await this.call('item/public_token/exchange', this.once, responses.exchange, () =>
      this.api.itemPublicTokenExchange({ public_token: publicToken }),
    );
    return { accessToken: data.access_token, itemId: data.item_id };
  }

  async getItem(accessToken: string): Promise<ProviderItem> {
    const data = await this.call('item/get', this.repeatable, responses.item, () =>
      this.api.itemGet({ access_token: accessToken }),
    );
    return toItem(data.item);
  }

  async getAccounts(accessToken: string): Promise<{ item: ProviderItem; accounts: BankAccount[] }> {
    const data = await this.call('accounts/get', this.repeatable, responses.accounts, () =>
      this.api.accountsGet({ access_token: accessToken }),
    );
    return {
      item: toItem(data.item),
      accounts: data.accounts.map((account) => ({
        providerAccountId: account.account_id,
        name: account.name,
        officialName: account.official_name ?? null,
        mask: account.mask ?? null,
        type: account.type,
        subtype: account.subtype ?? null,
      })),
    };
  }

  async getInstitutionName(institutionId: string): Promise<string> {
    const name = await this.institutionNames.fetch(institutionId);
    // Only a fetchMethod that answers undefined leaves fetch without a value; this one throws instead.
    if (name === undefined) throw new Error(`no name for institution ${institutionId}`);
    return name;
  }

  private async fetchInstitutionName(institutionId: string): Promise<string> {
    const data = await this.call('institutions/get_by_id', this.repeatable, responses.institution, () =>
      this.api.institutionsGetById({
        institution_id: institutionId,
        country_codes: this.options.countryCodes as CountryCode[],
      }),
    );
    return data.institution.name;
  }

  async removeItem(accessToken: string): Promise<void> {
    await this.call('item/remove', this.repeatable, z.object({}).passthrough(), () =>
      this.api.itemRemove({ access_token: accessToken }),
    );
  }

  async getWebhookVerificationKey(kid: string): Promise<WebhookVerificationKey> {
    const { key } = await this.call(
      'webhook_verification_key/get',
      this.repeatable,
      responses.webhookKey,
      () => this.api.webhookVerificationKeyGet({ key_id: kid }),
    );
    return {
      alg: key.alg,
      crv: key.crv,
      kid: key.kid,
      kty: key.kty,
      x: key.x,
      y: key.y,
      createdAt: key.created_at,
      expiredAt: key.expired_at ?? null,
    };
  }

  /** Repeatable: setting the same URL twice only makes Plaid send one more WEBHOOK_UPDATE_ACKNOWLEDGED. */
  async updateItemWebhook(accessToken: string, webhookUrl: string): Promise<ProviderItem> {
    const data = await this.call('item/webhook/update', this.repeatable, responses.item, () =>
      this.api.itemWebhookUpdate({ access_token: accessToken, webhook: webhookUrl }),
    );
    return toItem(data.item);
  }
}

function toItem(item: z.infer<typeof itemSchema>): ProviderItem {
  return {
    itemId: item.item_id,
    institutionId: item.institution_id ?? null,
    institutionName: item.institution_name ?? null,
    errorCode: item.error?.error_code ?? null,
    errorType: item.error?.error_type ?? null,
    webhook: item.webhook ?? null,
    consentExpirationTime: item.consent_expiration_time ?? null,
  };
}
