import { readFileSync } from 'node:fs';
import type { HealthSignal } from '../../src/domain/connections/connection-health';
import { plaidErrorSignal } from '../../src/domain/connections/plaid-signals';
import {
  tellerDisconnectSignal,
  tellerEnrollmentGoneSignal,
} from '../../src/domain/connections/teller-signals';
import {
  ERROR_EXPLANATIONS,
  PLAID_ERROR_EXPLANATIONS,
  SERVICE_ERROR_EXPLANATIONS,
  TELLER_ERROR_EXPLANATIONS,
  UNKNOWN_ERROR_EXPLANATION,
  explainErrorCode,
} from '../../src/vocabulary/error-explanations';
import {
  errorCodeOfOutboxFailure,
  websiteAnswerFailure,
  websiteTimeoutFailure,
  websiteUnreachableFailure,
} from '../../src/vocabulary/outbox-failures';
import { PROVIDER_FAILURE_CODES } from '../../src/vocabulary/provider-failures';
import { TELLER_DISCONNECT_REASONS } from '../../src/vocabulary/teller-webhooks';
import {
  connectInstitution,
  getAdminConnection,
  listAdminConnections,
  postPlaidWebhook,
} from '../support/requests';
import { projectPath } from '../support/project-paths';
import { serviceForFile, uniqueUserId } from '../support/service';

/** The code an error signal records on its connection. */
function codeOf(signal: HealthSignal): string {
  if (signal.kind !== 'error') throw new Error(`not an error signal: ${signal.kind}`);
  return signal.errorCode;
}

/** Whether the registry has an entry of its own for `code` (not the generic one). */
const isExplained = (code: string) => explainErrorCode(code) !== UNKNOWN_ERROR_EXPLANATION;

describe('the registry of error explanations', () => {
  it('when every code a connection can store is looked up, then each has an explanation of its own', () => {
    const stored = [
      // Teller: each disconnection's code (webhook or API), and an enrollment gone.
      ...TELLER_DISCONNECT_REASONS.map((reason) => codeOf(tellerDisconnectSignal(reason))),
      codeOf(tellerDisconnectSignal('a reason Teller adds later')),
      codeOf(tellerEnrollmentGoneSignal()),
      // Plaid: what webhooks, calls and reconciliation record (reconcile-connections.ts).
      codeOf(plaidErrorSignal('ITEM_LOGIN_REQUIRED')),
      'ITEM_NOT_FOUND',
    ];

    expect(stored.filter((code) => !isExplained(code))).toEqual([]);
    expect(Object.keys(TELLER_ERROR_EXPLANATIONS)).toEqual(
      expect.arrayContaining(TELLER_DISCONNECT_REASONS.map((reason) => `enrollment.${reason}`)),
    );
  });

  it('when the codes the service reports in removals, reconciliations and notifications are looked up, then each has one', () => {
    const reported = [
      ...Object.values(PROVIDER_FAILURE_CODES),
      'SERVICE_ERROR',
      'TELLER_NOT_CONFIGURED',
      'TOKEN_UNREADABLE',
      ...[302, 400, 404, 410, 429, 500, 503].map((status) =>
        errorCodeOfOutboxFailure(websiteAnswerFailure(status)),
      ),
      errorCodeOfOutboxFailure(websiteTimeoutFailure(15_000)),
      errorCodeOfOutboxFailure(websiteUnreachableFailure('ECONNREFUSED')),
      errorCodeOfOutboxFailure(websiteUnreachableFailure(undefined)),
    ];

    expect(reported.filter((code) => code === null || !isExplained(code))).toEqual([]);
  });

  it('when the vocabularies are joined, then no code is in two of them and every entry is filled in', () => {
    const vocabularies = [PLAID_ERROR_EXPLANATIONS, TELLER_ERROR_EXPLANATIONS, SERVICE_ERROR_EXPLANATIONS];
    const total = vocabularies.reduce((sum, vocabulary) => sum + Object.keys(vocabulary).length, 0);

    expect(Object.keys(ERROR_EXPLANATIONS)).toHaveLength(total);
    for (const [code, explanation] of Object.entries(ERROR_EXPLANATIONS)) {
      expect([code, explanation.message.length > 10, explanation.suggested_action.length > 10]).toEqual([
        code,
        true,
        true,
      ]);
    }
  });

  it.each(['SOME_CODE_PLAID_ADDS_LATER', '', '__proto__', 'constructor', 'toString'])(
    'when a code it does not know (%p) is looked up, then the generic explanation comes back, saying so',
    (code) => {
      expect(explainErrorCode(code)).toBe(UNKNOWN_ERROR_EXPLANATION);
      expect(UNKNOWN_ERROR_EXPLANATION.message).toMatch(/no explanation for yet/);
    },
  );

  it('when the codes a last_error starts with are read back, then the code is the one it names, or null', () => {
    expect(errorCodeOfOutboxFailure('INTERNAL_SERVER_ERROR: an unexpected error occurred')).toBe(
      'INTERNAL_SERVER_ERROR',
    );
    expect(errorCodeOfOutboxFailure('enrollment.disconnected.account_locked: locked')).toBe(
      'enrollment.disconnected.account_locked',
    );
    expect(errorCodeOfOutboxFailure('SERVICE_ERROR: TypeError (see the log)')).toBe('SERVICE_ERROR');
    expect(errorCodeOfOutboxFailure('HTTP 500')).toBe('WEBSITE_FAILED');
    expect(errorCodeOfOutboxFailure('something without a code')).toBeNull();
    expect(errorCodeOfOutboxFailure(null)).toBeNull();
  });
});

describe('the guides and the registry', () => {
  const guide = (file: string) => readFileSync(projectPath(file), 'utf8');

  it('when the admin guide’s table is compared with the registry, then it lists every code with its very words, in the registry’s order', () => {
    // The table is written by `npm run config-docs` (the configuration reference's test checks it byte for
    // byte); here, that it holds every code with its very words.
    const text = guide('docs/admin-guide.md');
    const table = text.slice(
      text.indexOf('<!-- error-explanations: written by'),
      text.indexOf('<!-- error-explanations: end -->'),
    );
    const rows = table.split('\n').filter((line) => line.startsWith('| '));
    const codesIn = (markdown: string) =>
      [...markdown.matchAll(/^\| [^|]+\| `([^`]+)`/gm)].map((match) => match[1]);

    expect(table.length).toBeGreaterThan(100);
    expect(codesIn(table)).toEqual(['error_code', ...Object.keys(ERROR_EXPLANATIONS)]);
    for (const [code, { message, suggested_action }] of Object.entries(ERROR_EXPLANATIONS)) {
      const row = rows.find((line) => line.includes(`| \`${code}\` `)) ?? '';
      expect([code, row.includes(message), row.includes(suggested_action)]).toEqual([code, true, true]);
    }
    expect(rows.at(-1)).toContain(UNKNOWN_ERROR_EXPLANATION.message);
  });

  it('when the website guide’s connection health tables name a code, then the registry explains it, and a login to repeat is what it suggests', () => {
    const text = guide('docs/website-guide.md');
    const health = text.slice(
      text.indexOf('## Connection health'),
      text.indexOf('## Notifications to the website'),
    );
    const plaidCodes = [...new Set([...health.matchAll(/`(ITEM_[A-Z_]+)`/g)].map((match) => match[1]!))];
    const tellerCodes = [
      ...new Set([...health.matchAll(/`(disconnected[a-z_.]*)`/g)].map((match) => `enrollment.${match[1]}`)),
    ];

    expect(plaidCodes).toEqual(expect.arrayContaining(['ITEM_LOGIN_REQUIRED', 'ITEM_NOT_FOUND']));
    expect(tellerCodes).toHaveLength(TELLER_DISCONNECT_REASONS.length);
    expect([...plaidCodes, ...tellerCodes].filter((code) => !isExplained(code))).toEqual([]);
    // The guide: login_required is repaired by the user logging in again; ITEM_NOT_FOUND by removing and linking again.
    expect(explainErrorCode('ITEM_LOGIN_REQUIRED').suggested_action).toMatch(/reconnect/);
    expect(explainErrorCode('ITEM_NOT_FOUND').suggested_action).toMatch(
      /remove this bank .* connect it again/,
    );
    for (const reason of TELLER_DISCONNECT_REASONS) {
      expect([reason, explainErrorCode(`enrollment.${reason}`).suggested_action]).toEqual([
        reason,
        expect.stringMatching(/reconnect/),
      ]);
    }
  });
});

describe('a broken connection in the admin views', () => {
  const service = serviceForFile();

  const sendWebhook = (body: Record<string, unknown>) => {
    const raw = JSON.stringify({ environment: 'sandbox', ...body });
    return postPlaidWebhook(service, raw, service.emulator.signWebhook(raw));
  };

  it('when Plaid says an Item needs a new login, then its record and its view carry the code with its explanation, and the repair clears both', async () => {
    const user = uniqueUserId('broken');
    const { itemId } = await connectInstitution(service, user);
    const error = { error_type: 'ITEM_ERROR', error_code: 'ITEM_LOGIN_REQUIRED', error_message: 'login' };
    expect(
      (await sendWebhook({ webhook_type: 'ITEM', webhook_code: 'ERROR', item_id: itemId, error })).status,
    ).toBe(200);

    const listed = await listAdminConnections(service, { item_id: itemId });
    const viewed = await getAdminConnection(service, itemId);
    const exported = await listAdminConnections(service, { item_id: itemId }, { accept: 'text/csv' });

    const explained = {
      status: 'login_required',
      error_code: 'ITEM_LOGIN_REQUIRED',
      error_explanation: PLAID_ERROR_EXPLANATIONS.ITEM_LOGIN_REQUIRED,
    };
    expect(listed.body.connections).toEqual([expect.objectContaining(explained)]);
    expect(viewed.body.connection).toEqual(expect.objectContaining(explained));
    // The view's events explain the codes they recorded; an event that recorded none says null.
    const [statusChange, exchanged] = viewed.body.events;
    expect(statusChange).toMatchObject({
      kind: 'connection_status_changed',
      detail: { error_code: 'ITEM_LOGIN_REQUIRED' },
      error_explanation: PLAID_ERROR_EXPLANATIONS.ITEM_LOGIN_REQUIRED,
    });
    expect(exchanged).toMatchObject({ kind: 'exchange_completed', error_explanation: null });
    expect(PLAID_ERROR_EXPLANATIONS.ITEM_LOGIN_REQUIRED.suggested_action).toMatch(
      /reconnect the bank through the website's update flow/,
    );
    const [header, row] = exported.text.trimEnd().split('\n');
    expect(header!.split(',').slice(-2)).toEqual(['error_message', 'error_suggested_action']);
    expect(row).toContain(`,ITEM_LOGIN_REQUIRED,`);
    expect(row!.endsWith(`,${PLAID_ERROR_EXPLANATIONS.ITEM_LOGIN_REQUIRED.suggested_action}`)).toBe(true);

    await sendWebhook({ webhook_type: 'ITEM', webhook_code: 'LOGIN_REPAIRED', item_id: itemId });
    const repaired = await listAdminConnections(service, { item_id: itemId });
    expect(repaired.body.connections[0]).toMatchObject({
      status: 'good',
      error_code: null,
      error_explanation: null,
    });
  });

  it('when an Item carries a code the registry does not know, then its record says so honestly instead of failing', async () => {
    const user = uniqueUserId('unknown-code');
    const { itemId } = await connectInstitution(service, user);
    const error = { error_type: 'ITEM_ERROR', error_code: 'A_CODE_PLAID_ADDED_LATER', error_message: 'new' };
    await sendWebhook({ webhook_type: 'ITEM', webhook_code: 'ERROR', item_id: itemId, error });

    const listed = await listAdminConnections(service, { item_id: itemId });

    expect(listed.status).toBe(200);
    expect(listed.body.connections[0]).toMatchObject({
      status: 'error',
      error_code: 'A_CODE_PLAID_ADDED_LATER',
      error_explanation: UNKNOWN_ERROR_EXPLANATION,
    });
  });
});
