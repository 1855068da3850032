import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { handleControl } from './control-api';
import { EmulatorServer } from 'emulator-kit';
import { errorOfFault, faultMatches, type FaultSpec } from './faults';
import { readBody, send } from './http-io';
import { applyItemEvent, isItemWebhookCode, ITEM_WEBHOOK_CODES } from './item-events';
import { itemErrorOf, ItemStore, type EmulatedItem } from './item-store';
import { LinkSessions, type LinkSuccess } from './link-sessions';
import { errors, PlaidEmulatorError, randomId } from './plaid-error-bodies';
import { plaidRoutes, type PlaidRoute } from './plaid-routes';
import { institutionFor, type Body } from './request-checks';
import { WebhookKeys, type SignatureOptions, type WebhookVerificationJwk } from './webhook-keys';
import { WebhookSender, type SentWebhook } from './webhook-sender';

export type { EmulatedAccount, EmulatedItem, ItemError } from './item-store';
export type { FaultSpec } from './faults';
export type { LinkSuccess } from './link-sessions';
export type { SentWebhook } from './webhook-sender';
export type { SignatureOptions, WebhookVerificationJwk } from './webhook-keys';

export const CONTROL_PREFIX = '/__emulator';

export interface EmulatorOptions {
  /** When set, only this pair is accepted; otherwise any non-empty pair is. */
  credentials?: { clientId: string; secret: string };
  now?: () => number;
}

export interface RecordedCall {
  path: string;
  body: unknown;
  /** 0 until answered, and for a dropped connection. */
  status: number;
  at: string;
}

export interface ItemWebhookResult {
  /** The webhook's body, sent to `delivered_to`. */
  body: Body;
  /** The Item's webhook URL; null when it has none and nothing was sent (the event still happened). */
  delivered_to: string | null;
}

/**
 * An in-memory emulator of the part of Plaid's HTTP API this service uses, faithful to its
 * request/response shapes and error objects, that signs and sends webhooks as Plaid does, with a
 * control API (under `/__emulator`) for fault injection, Link and Item events.
 */
export class PlaidEmulator extends EmulatorServer<FaultSpec, string, RecordedCall> {
  private readonly now: () => number;
  private readonly store: ItemStore;
  private readonly links: LinkSessions;
  private readonly keys: WebhookKeys;
  private readonly sender: WebhookSender;
  private readonly routes: Record<string, PlaidRoute>;

  constructor(private readonly options: EmulatorOptions = {}) {
    super({ matches: faultMatches, send });
    this.now = options.now ?? Date.now;
    this.store = new ItemStore(this.now);
    this.links = new LinkSessions(this.store, this.now);
    this.keys = new WebhookKeys(this.now);
    this.sender = new WebhookSender(this.keys, this.now);
    this.routes = plaidRoutes({
      store: this.store,
      links: this.links,
      keys: this.keys,
      now: this.now,
      notify: (item, body) => this.notify(item, body),
    });
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    await this.serve(
      http.createServer((req, res) => void this.handle(req, res)),
      port,
      host,
    );
    return this.url;
  }

  get url(): string {
    const address = this.address();
    if (!address) throw new Error('the emulator is not listening');
    return `http://${address.address}:${address.port}`;
  }

  async close(): Promise<void> {
    this.sender.close();
    await this.closeServer();
  }

  calls(path?: string): RecordedCall[] {
    return this.recorded.filter((call) => path === undefined || call.path === path);
  }

  items(): EmulatedItem[] {
    return this.store.all();
  }

  /** Forgets Items, tokens, faults, calls and sent webhooks; the signing keys stay, as Plaid's would. */
  reset(): void {
    this.store.clear();
    this.links.clear();
    this.clearFaults();
    this.clearCalls();
    this.clearWebhooks();
  }

  /** What Plaid Link hands the website after a user logs in: a public token for a new Item. */
  createPublicToken(
    institutionId = 'ins_109508',
    options: { loginRequired?: boolean; webhook?: string } = {},
  ): string {
    return this.store.issuePublicToken({
      institution: institutionFor(institutionId),
      products: ['transactions'],
      webhook: options.webhook ?? null,
      error: options.loginRequired ? itemErrorOf(errors.itemLoginRequired()) : null,
    });
  }

  /** What Link's `onSuccess` would give for this link token (see `POST /__emulator/link/complete`). */
  completeLink(linkToken: string, institutionId?: string): LinkSuccess {
    return this.links.complete(linkToken, institutionId);
  }

  /** Makes an ITEM event happen to the Item and sends its webhook (see `POST /__emulator/items/{id}/webhook`). */
  sendItemWebhook(itemId: string, webhookCode: string, fields: Body = {}): ItemWebhookResult {
    const item = this.store.byId(itemId);
    if (!item) throw errors.invalidField(`no Item ${itemId}`);
    if (!isItemWebhookCode(webhookCode)) {
      throw errors.invalidField(`webhook_code must be one of ${ITEM_WEBHOOK_CODES.join(', ')}`);
    }
    const body = applyItemEvent(this.store, item, webhookCode, fields, this.now());
    this.notify(item, body);
    return { body, delivered_to: item.webhook };
  }

  webhooksSent(): SentWebhook[] {
    return this.sender.sent();
  }

  clearWebhooks(): void {
    this.sender.clear();
  }

  /** Resolves once every webhook sent so far has been answered, failed or timed out. */
  flushWebhooks(): Promise<void> {
    return this.sender.flush();
  }

  /** Signs with a new key; the old ones stay retrievable with `expired_at` set. Returns the new key. */
  rotateWebhookKey(): WebhookVerificationJwk {
    return this.keys.rotate();
  }

  webhookKeys(): WebhookVerificationJwk[] {
    return this.keys.list();
  }

  /** A `Plaid-Verification` value for these bytes, signed with the current key; options forge one. */
  signWebhook(rawBody: string, options?: SignatureOptions): string {
    return this.keys.sign(rawBody, options);
  }

  private notify(item: EmulatedItem, body: Body): void {
    if (!item.webhook) return;
    const sent = this.sender.send(item.webhook, body);
    item.last_webhook = { sent_at: sent.at.replace(/\.\d{3}Z$/, 'Z'), code_sent: String(body.webhook_code) };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const requestId = randomId(15);
    let raw: string;
    try {
      raw = await readBody(req);
    } catch {
      return send(res, 413, errors.invalidBody().toBody(requestId));
    }
    if (path.startsWith(`${CONTROL_PREFIX}/`)) {
      return handleControl(
        this,
        req.method ?? 'GET',
        path.slice(CONTROL_PREFIX.length),
        { raw, contentType: req.headers['content-type'] },
        res,
      );
    }

    let body: unknown = raw;
    try {
      body = raw === '' ? undefined : JSON.parse(raw);
    } catch {
      // reported below, after the fault and route checks Plaid would make first
    }
    const answer = this.recordCall({ path, body, status: 0, at: new Date(this.now()).toISOString() }, res);
    const faulted = await this.playFaultFor(path, req, answer, (fault) => {
      const injected = errorOfFault(fault);
      return injected && { status: injected.status, body: injected.toBody(requestId) };
    });
    if (faulted) return;

    try {
      const route = this.routes[path];
      if (req.method !== 'POST' || !route) throw errors.notFound();
      const isJson = /^application\/json\b/i.test(req.headers['content-type'] ?? '');
      if (!isJson || typeof body !== 'object' || body === null || Array.isArray(body))
        throw errors.invalidBody();
      this.checkCredentials(req, body as Body);
      answer(200, { ...route(body as Body), request_id: requestId });
    } catch (error) {
      const plaidError = error instanceof PlaidEmulatorError ? error : errors.internal();
      answer(plaidError.status, plaidError.toBody(requestId));
    }
  }

  /** Headers win over body fields when both are sent; the SDK only ever sends headers. */
  private checkCredentials(req: IncomingMessage, body: Body): void {
    const header = (name: string) => {
      const value = req.headers[name];
      return typeof value === 'string' && value !== '' ? value : undefined;
    };
    const clientId = header('plaid-client-id') ?? body.client_id;
    const secret = header('plaid-secret') ?? body.secret;
    if (typeof clientId !== 'string' || clientId === '') {
      throw errors.invalidField('client_id must be a properly formatted, non-empty string');
    }
    if (typeof secret !== 'string' || secret === '') {
      throw errors.invalidField('secret must be a properly formatted, non-empty string');
    }
    const expected = this.options.credentials;
    if (expected && (expected.clientId !== clientId || expected.secret !== secret))
      throw errors.invalidApiKeys();
  }
}
