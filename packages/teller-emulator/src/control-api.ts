import type { ServerResponse } from 'node:http';
import { ConnectRefusal } from './connect';
import { faultSpecProblem, type FaultSpec } from './faults';
import { send } from './http-io';
import { DISCONNECT_REASONS, isDisconnectReason } from './teller-errors';
import type { TellerEmulator } from './teller-emulator';

const ENROLLMENT = /^\/enrollments\/(enr_[a-z0-9]+)$/;
const ENROLLMENT_DISCONNECT = /^\/enrollments\/(enr_[a-z0-9]+)\/disconnect$/;
const ACCOUNT_CLOSE = /^\/accounts\/(acc_[a-z0-9]+)\/close$/;

/** `application/json`, with or without parameters (`; charset=utf-8`). */
const isJson = (contentType: string | undefined) =>
  contentType?.split(';')[0]?.trim().toLowerCase() === 'application/json';

type Body = Record<string, unknown>;

class ControlRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The control API under `/__emulator`, a path Teller never uses, with the Plaid emulator's conventions:
 * JSON in and out, `{ "error": "…" }` for a refused control request, faults by path, a call log.
 *
 * A POST or PUT must say `Content-Type: application/json` (an empty body is `{}`): a page open in a
 * developer's browser can send a cross-origin POST only as a "simple" request (a form's or text/plain
 * body), and JSON would need a preflight this server never grants, so no web page can drive the
 * emulator. A DELETE may come without a body or content type: browsers preflight every cross-origin DELETE.
 */
export function handleControl(
  emulator: TellerEmulator,
  method: string,
  path: string,
  request: { raw: string; contentType: string | undefined },
  res: ServerResponse,
): void {
  const needsJson = method !== 'GET' && method !== 'HEAD' && !(method === 'DELETE' && request.raw === '');
  if (needsJson && !isJson(request.contentType)) {
    return send(res, 415, {
      error: 'control requests with a body (POST, PUT) must be sent as Content-Type: application/json',
    });
  }
  let body: Body;
  try {
    const parsed: unknown = request.raw === '' ? {} : JSON.parse(request.raw);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
      throw new Error('not an object');
    body = parsed as Body;
  } catch {
    return send(res, 400, { error: 'body must be a JSON object' });
  }
  try {
    const [status, answerBody] = answer(emulator, method, path, body);
    send(res, status, answerBody);
  } catch (error) {
    if (error instanceof ControlRefusal || error instanceof ConnectRefusal) {
      return send(res, error.status, { error: error.message });
    }
    send(res, 500, { error: error instanceof Error ? error.message : String(error) });
  }
}

function optionalString(body: Body, field: string): string | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw new ControlRefusal(400, `${field} must be a string`);
  return value;
}

function answer(emulator: TellerEmulator, method: string, path: string, body: Body): [number, unknown] {
  const route = `${method} ${path}`;

  const disconnect = ENROLLMENT_DISCONNECT.exec(path);
  if (disconnect && method === 'POST') {
    const enrollmentId = disconnect[1] as string;
    const current = emulator.enrollment(enrollmentId);
    if (!current) throw new ControlRefusal(404, `no enrollment ${enrollmentId}`);
    if (current.status === 'revoked') {
      throw new ControlRefusal(
        409,
        `enrollment ${enrollmentId} was deleted (DELETE /accounts); it cannot disconnect`,
      );
    }
    const reason = body.reason ?? 'disconnected';
    if (!isDisconnectReason(reason)) {
      throw new ControlRefusal(400, `reason must be one of ${DISCONNECT_REASONS.join(', ')}`);
    }
    const webhook = emulator.disconnectEnrollment(enrollmentId, reason);
    return [200, { enrollment: emulator.enrollment(enrollmentId), webhook }];
  }

  const enrollment = ENROLLMENT.exec(path);
  if (enrollment && method === 'GET') {
    const view = emulator.enrollment(enrollment[1] as string);
    if (!view) throw new ControlRefusal(404, `no enrollment ${enrollment[1]}`);
    return [200, { enrollment: view }];
  }

  const close = ACCOUNT_CLOSE.exec(path);
  if (close && method === 'POST') {
    const accountId = close[1] as string;
    if (!emulator.enrollments().some((view) => view.accounts.some((account) => account.id === accountId))) {
      throw new ControlRefusal(404, `no account ${accountId}`);
    }
    return [200, { enrollment: emulator.closeAccount(accountId) }];
  }

  switch (route) {
    case 'POST /connect/complete': {
      if (body.nonce !== undefined && typeof body.nonce !== 'string') {
        throw new ControlRefusal(400, 'nonce must be a string');
      }
      return [
        200,
        emulator.completeConnect({
          nonce: optionalString(body, 'nonce'),
          institution: optionalString(body, 'institution'),
          userId: optionalString(body, 'user_id'),
          enrollmentId: optionalString(body, 'enrollment_id'),
        }),
      ];
    }
    case 'GET /token-signing-key':
      return [200, { ...emulator.tokenSigningKey(), keys: emulator.tokenSigningKeys() }];
    case 'POST /token-signing-key/rotate': {
      const keys = emulator.rotateTokenSigningKey();
      return [201, { ...emulator.tokenSigningKey(), keys }];
    }
    case 'DELETE /token-signing-key/previous': {
      const keys = emulator.retirePreviousTokenSigningKey();
      return [200, { ...emulator.tokenSigningKey(), keys }];
    }
    case 'GET /enrollments':
      return [200, { enrollments: emulator.enrollments() }];
    case 'GET /webhook':
      return [200, emulator.webhookSettings()];
    case 'PUT /webhook': {
      const url = body.url;
      const secrets = body.secrets;
      if (url !== undefined && url !== null && typeof url !== 'string') {
        throw new ControlRefusal(400, 'url must be a string or null');
      }
      if (
        secrets !== undefined &&
        !(Array.isArray(secrets) && secrets.every((secret) => typeof secret === 'string'))
      ) {
        throw new ControlRefusal(400, 'secrets must be an array of strings');
      }
      try {
        return [
          200,
          emulator.configureWebhook({
            url: url as string | null | undefined,
            secrets: secrets as string[] | undefined,
          }),
        ];
      } catch (error) {
        throw new ControlRefusal(400, (error as Error).message);
      }
    }
    case 'POST /webhooks/test':
      return [200, { webhook: emulator.sendTestWebhook() }];
    case 'GET /webhooks':
      return [200, { webhooks: emulator.webhooksSent() }];
    case 'DELETE /webhooks':
      emulator.clearWebhooks();
      return [200, { webhooks: [] }];
    case 'POST /faults': {
      const problem = faultSpecProblem(body);
      if (problem) throw new ControlRefusal(400, problem);
      emulator.injectFault(body as unknown as FaultSpec);
      return [201, { faults: emulator.pendingFaults() }];
    }
    case 'GET /faults':
      return [200, { faults: emulator.pendingFaults() }];
    case 'DELETE /faults':
      emulator.clearFaults();
      return [200, { faults: [] }];
    case 'GET /calls':
      return [200, { calls: emulator.calls() }];
    case 'DELETE /calls':
      emulator.clearCalls();
      return [200, { calls: [] }];
    case 'GET /credentials': {
      const credentials = emulator.credentials;
      return [
        200,
        {
          directory: credentials.directory,
          ca_certificate: credentials.caCertificatePath,
          client_certificate: credentials.clientCertificatePath,
          client_key: credentials.clientKeyPath,
          ca_certificate_pem: credentials.caCertificatePem,
        },
      ];
    }
    case 'POST /reset':
      emulator.reset();
      return [200, { reset: true }];
    default:
      throw new ControlRefusal(404, `unknown control route ${route}`);
  }
}
