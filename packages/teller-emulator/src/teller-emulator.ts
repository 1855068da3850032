// Why this file is long: it is the emulated Teller server as one object — its listener (mTLS), the routes of
// Teller's API, its control routes and the webhooks it sends — sharing one enrollment store and fault queue;
// the wire details live in the modules it imports.

import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { completeConnect, type ConnectRequest, type ConnectSuccess } from './connect';
import { handleControl } from './control-api';
import { ensureCredentials, type EmulatorCredentials } from './credentials';
import { EnrollmentStore, viewOf, type EmulatedEnrollment, type EnrollmentView } from './enrollment-store';
import { EmulatorServer } from 'emulator-kit';
import { errorOfFault, faultMatches, normaliseFault, type FaultCall, type FaultSpec } from './faults';
import { BodyTooLargeError, readBody, send } from './http-io';
import { isoSeconds, tellerId } from './ids';
import { TellerApiError, tellerErrors, type DisconnectReason } from './teller-errors';
import { matchRoute } from './teller-routes';
import { TokenSigningKeys, type PublishedSigningKey } from './token-signing';
import { DEFAULT_RETRY_DELAYS_MS, WebhookSender, type SentWebhook } from './webhook-sender';
import { tellerSignature, type TellerWebhookEvent } from './webhook-signing';

export const CONTROL_PREFIX = '/__emulator';

/** Teller's three environments (https://teller.io/docs/guides/environments); the emulator runs as one. */
export const TELLER_ENVIRONMENTS = ['sandbox', 'development', 'production'] as const;
export type TellerEnvironment = (typeof TELLER_ENVIRONMENTS)[number];

export interface WebhookSettings {
  /** Where webhooks go (Teller's dashboard setting); null sends none. */
  url: string | null;
  /** The signing secrets; each delivery carries one `v1` signature per secret (rotation). */
  secrets: readonly string[];
}

export interface TellerEmulatorOptions {
  /** The data directory; the CA, certificates and keys go in its `teller-emulator/` folder. */
  dataDir: string;
  /** Default `sandbox`: no client certificate needed. Elsewhere, API calls without one are refused. */
  environment?: TellerEnvironment;
  webhook?: WebhookSettings;
  /** Delays between delivery attempts of a webhook (default 1, 4, 16, 64, 256 s: six attempts). */
  webhookRetryDelaysMs?: readonly number[];
  /** CA certificates (PEM) to trust for HTTPS webhook receivers, besides the public roots and its own CA. */
  webhookTrustedCas?: readonly string[];
  now?: () => number;
}

/** How the client authenticated the TLS connection (https://teller.io/docs/api/authentication, mTLS). */
export type ClientCertificateState = 'verified' | 'absent' | 'untrusted';

export interface RecordedCall {
  method: string;
  path: string;
  /** 0 until answered, and for a dropped connection. */
  status: number;
  at: string;
  /** The enrollment the access token opened; null without a usable token. */
  enrollment_id: string | null;
  client_certificate: ClientCertificateState;
}

export interface WebhookSent {
  id: string;
  /** The configured URL it went to; null when none is configured (the event still happened). */
  delivered_to: string | null;
}

/**
 * An emulator of the part of Teller's API the service uses (https://teller.io/docs/api), over HTTPS with
 * a development CA and client certificates, with Teller Connect's signed success payload and signed,
 * retried webhooks, and a control API under `/__emulator` for Connect, enrollment events, faults and the
 * call log, shaped like the Plaid emulator's.
 */
export class TellerEmulator extends EmulatorServer<FaultSpec, FaultCall, RecordedCall> {
  readonly environment: TellerEnvironment;
  private readonly now: () => number;
  private readonly store: EnrollmentStore;
  private webhook: { url: string | null; secrets: string[] };
  private sender: WebhookSender | undefined;
  private keys: TokenSigningKeys | undefined;
  private prepared: EmulatorCredentials | undefined;

  constructor(private readonly options: TellerEmulatorOptions) {
    super({ matches: faultMatches, normalise: normaliseFault, send });
    const environment = options.environment ?? 'sandbox';
    if (!TELLER_ENVIRONMENTS.includes(environment)) {
      throw new Error(`environment must be one of ${TELLER_ENVIRONMENTS.join(', ')}`);
    }
    this.environment = environment;
    this.now = options.now ?? Date.now;
    this.store = new EnrollmentStore(environment, this.now);
    this.webhook = checkedWebhook(options.webhook ?? { url: null, secrets: [] });
  }

  /** Loads or generates the CA, certificates and token-signing key; `listen` does it too. */
  async prepare(): Promise<EmulatorCredentials> {
    if (!this.prepared) {
      const credentials = await ensureCredentials(this.options.dataDir, { now: this.now });
      this.keys = new TokenSigningKeys(credentials.directory);
      this.sender = new WebhookSender({
        now: this.now,
        retryDelaysMs: this.options.webhookRetryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS,
        trustedCas: [credentials.caCertificatePem, ...(this.options.webhookTrustedCas ?? [])],
      });
      this.prepared = credentials;
    }
    return this.prepared;
  }

  /** Listens with HTTPS; resolves to the base URL (`https://127.0.0.1:<port>`). */
  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    const credentials = await this.prepare();
    const server = https.createServer(
      {
        key: credentials.serverKeyPem,
        cert: credentials.serverCertificatePem,
        ca: [credentials.caCertificatePem],
        // Asked for, verified against the CA, but not required at the TLS level: the HTTP layer refuses
        // as Teller does (a 400 body, not a failed handshake), and the control API needs none.
        requestCert: true,
        rejectUnauthorized: false,
      },
      (req, res) => void this.handle(req, res),
    );
    await this.serve(server, port, host);
    return this.url;
  }

  get url(): string {
    const address = this.address();
    if (!address) throw new Error('the Teller emulator is not listening');
    const host =
      address.address === '0.0.0.0' || address.address === '::'
        ? 'localhost'
        : address.family === 'IPv6'
          ? `[${address.address}]`
          : address.address;
    return `https://${host}:${address.port}`;
  }

  /** The CA, server and client certificate files (after `listen` or `prepare`). */
  get credentials(): EmulatorCredentials {
    if (!this.prepared) throw new Error('call listen() or prepare() first');
    return this.prepared;
  }

  async close(): Promise<void> {
    this.sender?.close();
    await this.closeServer();
  }

  /** What a user finishing Teller Connect hands the page (see `POST /__emulator/connect/complete`). */
  completeConnect(request: ConnectRequest): ConnectSuccess {
    return completeConnect(this.store, this.signingKeys(), this.environment, request).success;
  }

  /** The current token-signing public key, as the service configures it. */
  tokenSigningKey(): PublishedSigningKey {
    return this.signingKeys().published()[0] as PublishedSigningKey;
  }

  /** Every key Connect signs with: the current one first, then the previous one after a rotation. */
  tokenSigningKeys(): PublishedSigningKey[] {
    return this.signingKeys().published();
  }

  /** A new token-signing key; the old one keeps signing beside it, as during Teller's own rotations. */
  rotateTokenSigningKey(): PublishedSigningKey[] {
    this.signingKeys().rotate();
    return this.tokenSigningKeys();
  }

  retirePreviousTokenSigningKey(): PublishedSigningKey[] {
    this.signingKeys().retirePrevious();
    return this.tokenSigningKeys();
  }

  enrollments(): EnrollmentView[] {
    return this.store.all().map(viewOf);
  }

  enrollment(enrollmentId: string): EnrollmentView | undefined {
    const enrollment = this.store.byId(enrollmentId);
    return enrollment && viewOf(enrollment);
  }

  /**
   * The enrollment breaks at the bank: API calls about it answer 404 `enrollment.<reason>` and an
   * `enrollment.disconnected` webhook goes out (https://teller.io/docs/api/webhooks). A deleted
   * (revoked) enrollment cannot disconnect.
   */
  disconnectEnrollment(enrollmentId: string, reason: DisconnectReason): WebhookSent {
    const enrollment = this.existing(enrollmentId);
    if (enrollment.status === 'revoked') throw new Error(`enrollment ${enrollmentId} was deleted`);
    enrollment.status = 'disconnected';
    enrollment.disconnect_reason = reason;
    return this.notify('enrollment.disconnected', { enrollment_id: enrollment.id, reason });
  }

  /** The bank closed the account: it and its sub-resources answer 410 `account.closed`. */
  closeAccount(accountId: string): EnrollmentView {
    for (const enrollment of this.store.all()) {
      const account = enrollment.accounts.find((candidate) => candidate.id === accountId);
      if (account) {
        account.status = 'closed';
        return viewOf(enrollment);
      }
    }
    throw new Error(`no account ${accountId}`);
  }

  /** `webhook.test`, as the dashboard's test button sends it: an empty payload. */
  sendTestWebhook(): WebhookSent {
    return this.notify('webhook.test', {});
  }

  webhookSettings(): { url: string | null; secret_count: number } {
    return { url: this.webhook.url, secret_count: this.webhook.secrets.length };
  }

  /** Changes the webhook URL and/or secrets, as the dashboard's application settings do. */
  configureWebhook(settings: Partial<WebhookSettings>): { url: string | null; secret_count: number } {
    this.webhook = checkedWebhook({
      url: settings.url === undefined ? this.webhook.url : settings.url,
      secrets: settings.secrets ?? this.webhook.secrets,
    });
    return this.webhookSettings();
  }

  /** A `Teller-Signature` value for these bytes, with the configured secrets unless others are given. */
  signWebhook(rawBody: string, options: { secrets?: readonly string[]; signedAt?: number } = {}): string {
    return tellerSignature(
      rawBody,
      options.secrets ?? this.webhook.secrets,
      (options.signedAt ?? this.now()) / 1000,
    );
  }

  webhooksSent(): SentWebhook[] {
    return this.sender?.sent() ?? [];
  }

  clearWebhooks(): void {
    this.sender?.clear();
  }

  /** Resolves once every webhook sent so far has been delivered or has used up its retries. */
  flushWebhooks(): Promise<void> {
    return this.sender?.flush() ?? Promise.resolve();
  }

  calls(filter: { method?: string; path?: string } = {}): RecordedCall[] {
    return this.recorded.filter(
      (call) =>
        (filter.method === undefined || call.method === filter.method.toUpperCase()) &&
        (filter.path === undefined || call.path === filter.path),
    );
  }

  /** Forgets enrollments, faults, calls and sent webhooks; keys, certificates and settings stay. */
  reset(): void {
    this.store.clear();
    this.clearFaults();
    this.clearCalls();
    this.clearWebhooks();
  }

  private signingKeys(): TokenSigningKeys {
    if (!this.keys) throw new Error('call listen() or prepare() first');
    return this.keys;
  }

  private existing(enrollmentId: string): EmulatedEnrollment {
    const enrollment = this.store.byId(enrollmentId);
    if (!enrollment) throw new Error(`no enrollment ${enrollmentId}`);
    return enrollment;
  }

  private notify(type: string, payload: Record<string, unknown>): WebhookSent {
    const event: TellerWebhookEvent = {
      id: tellerId('wh'),
      payload,
      timestamp: isoSeconds(this.now()),
      type,
    };
    const { url } = this.webhook;
    if (url && this.sender) this.sender.send(url, event, () => this.webhook.secrets);
    return { id: event.id, delivered_to: url };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    let raw: string;
    try {
      raw = await readBody(req);
    } catch (error) {
      if (!(error instanceof BodyTooLargeError)) return void req.socket.destroy();
      const refusal = tellerErrors.bodyTooLarge();
      return send(
        res,
        refusal.status,
        path.startsWith(`${CONTROL_PREFIX}/`) ? { error: refusal.message } : refusal.toBody(),
      );
    }
    if (path.startsWith(`${CONTROL_PREFIX}/`)) {
      return handleControl(
        this,
        method,
        path.slice(CONTROL_PREFIX.length),
        { raw, contentType: req.headers['content-type'] },
        res,
      );
    }

    const certificate = certificateState(req);
    const call: RecordedCall = {
      method,
      path,
      status: 0,
      at: new Date(this.now()).toISOString(),
      enrollment_id: null,
      client_certificate: certificate,
    };
    const answer = this.recordCall(call, res);
    const faulted = await this.playFaultFor({ method, path }, req, answer, (fault) => {
      const injected = errorOfFault(fault);
      return injected && { status: injected.status, body: injected.toBody() };
    });
    if (faulted) return;

    try {
      const matched = matchRoute(method, path);
      // https://teller.io/docs/api/authentication: "mTLS is required for all API requests that involve
      // end-user data, i.e. all requests in development and production"; not in the sandbox, but "if used,
      // client certificates are validated in the sandbox environment" too.
      if (certificate === 'untrusted') throw tellerErrors.untrustedCertificate();
      const endUserData = matched?.route.endUserData ?? true;
      if (endUserData && certificate === 'absent' && this.environment !== 'sandbox') {
        throw tellerErrors.missingCertificate();
      }
      if (!matched) throw tellerErrors.notFound();
      let enrollment: EmulatedEnrollment | undefined;
      if (matched.route.authenticated) {
        enrollment = this.authenticate(req);
        call.enrollment_id = enrollment.id;
      }
      const result = matched.route.answer({
        store: this.store,
        baseUrl: this.baseUrlFor(req),
        enrollment,
        params: matched.params,
      });
      answer(result.status, result.body);
    } catch (error) {
      const tellerError = error instanceof TellerApiError ? error : tellerErrors.internal();
      answer(tellerError.status, tellerError.toBody());
    }
  }

  /**
   * "Access tokens are encoded using the HTTP Basic Auth scheme" with the token as the user name
   * (https://teller.io/docs/api/authentication; "the password field should be left empty and is ignored",
   * https://teller.io/docs/api/2020-10-12). No usable token is 401; an unknown or revoked one is 403
   * (https://teller.io/docs/api/errors).
   */
  private authenticate(req: IncomingMessage): EmulatedEnrollment {
    const match = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(req.headers.authorization ?? '');
    if (!match) throw tellerErrors.missingAccessToken();
    const credentials = Buffer.from(match[1] as string, 'base64').toString('utf8');
    const colon = credentials.indexOf(':');
    const token = colon === -1 ? credentials : credentials.slice(0, colon);
    if (token === '') throw tellerErrors.missingAccessToken();
    const enrollment = this.store.byAccessToken(token);
    if (!enrollment || enrollment.status === 'revoked') throw tellerErrors.invalidAccessToken();
    return enrollment;
  }

  /** Links point back at the emulator as the client addressed it (Teller's point at https://api.teller.io). */
  private baseUrlFor(req: IncomingMessage): string {
    const host = req.headers.host;
    return host && /^[A-Za-z0-9.:[\]-]+$/.test(host) ? `https://${host}` : this.url;
  }
}

function certificateState(req: IncomingMessage): ClientCertificateState {
  const socket = req.socket as TLSSocket;
  const peer = socket.getPeerCertificate();
  if (!peer || Object.keys(peer).length === 0) return 'absent';
  return socket.authorized ? 'verified' : 'untrusted';
}

function checkedWebhook(settings: WebhookSettings): { url: string | null; secrets: string[] } {
  const secrets = [...settings.secrets];
  if (secrets.some((secret) => typeof secret !== 'string' || secret === '')) {
    throw new Error('webhook signing secrets must be non-empty strings');
  }
  if (settings.url !== null) {
    let url: URL | undefined;
    try {
      url = new URL(settings.url);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw new Error('the webhook URL must be an absolute http or https URL');
    }
    if (secrets.length === 0) throw new Error('a webhook URL needs at least one signing secret');
  }
  return { url: settings.url, secrets };
}
