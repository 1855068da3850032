import { buildWebhookDelivery, tellerSignature } from 'teller-emulator';
import { thrownBy, WebhookReceiver } from 'test-kit';
import {
  TELLER_WEBHOOK_CLOCK_SKEW_SECONDS,
  TELLER_WEBHOOK_MAX_AGE_SECONDS,
  TellerWebhookVerificationError,
  isWellFormedTellerSignature,
  verifyTellerWebhook,
} from '../../src/provider/teller-webhook-verifier';
import { startTellerEmulator, type TellerFixture } from '../support/teller';

const refusalOf = (verify: () => unknown) => thrownBy(verify, TellerWebhookVerificationError);

const SECRET = 'whsec-current-0f9e';
const OLD_SECRET = 'whsec-previous-71aa';
const event = {
  type: 'enrollment.disconnected',
  payload: { enrollment_id: 'enr_oiffb5cocakqmksbkg001', reason: 'disconnected.account_locked' },
};

/** A delivery as Teller signs it, at `signedAt` (ms), with `secrets`. */
const deliveryOf = (secrets: string[], signedAt = Date.now()) => {
  const delivery = buildWebhookDelivery(event, { secrets, signedAt });
  return { raw: Buffer.from(delivery.rawBody, 'utf8'), header: delivery.headers['teller-signature'] };
};

describe('Teller’s webhook signatures', () => {
  let teller: TellerFixture;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    teller = await startTellerEmulator();
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await receiver.close();
    await teller.close();
  });

  it('when the emulator delivers enrollment.disconnected signed with the service’s secret, then it verifies and its t is kept', async () => {
    teller.emulator.configureWebhook({ url: receiver.url('/webhooks/teller'), secrets: [SECRET] });
    const { enrollment } = teller.connect();

    teller.emulator.disconnectEnrollment(enrollment.id, 'disconnected.credentials_invalid');
    await teller.emulator.flushWebhooks();

    const [delivered] = receiver.at('/webhooks/teller');
    const header = delivered?.headers['teller-signature'] as string;
    const verified = verifyTellerWebhook(delivered!.raw, header, [SECRET]);
    expect(verified.signedAt).toBe(Number(/t=(\d+)/.exec(header)?.[1]));
    expect(Math.abs(verified.signedAt - Date.now() / 1000)).toBeLessThan(10);
    expect(delivered?.body).toMatchObject({
      type: 'enrollment.disconnected',
      payload: { enrollment_id: enrollment.id },
    });
  });

  it('when Teller signs with two secrets during its rotation, then each configured secret alone verifies (several v1s)', () => {
    const { raw, header } = deliveryOf([OLD_SECRET, SECRET]);

    expect(header.match(/v1=/g)).toHaveLength(2);
    expect(() => verifyTellerWebhook(raw, header, [SECRET])).not.toThrow();
    expect(() => verifyTellerWebhook(raw, header, [OLD_SECRET])).not.toThrow();
  });

  it('when the service rotates its secret, then a delivery signed with either configured secret verifies', () => {
    const configured = [SECRET, OLD_SECRET];
    const previous = deliveryOf([OLD_SECRET]);
    const current = deliveryOf([SECRET]);

    expect(() => verifyTellerWebhook(previous.raw, previous.header, configured)).not.toThrow();
    expect(() => verifyTellerWebhook(current.raw, current.header, configured)).not.toThrow();
    expect(refusalOf(() => verifyTellerWebhook(previous.raw, previous.header, [SECRET])).reason).toBe(
      'bad_signature',
    );
  });

  it('when the body was altered after signing, then bad_signature', () => {
    const { raw, header } = deliveryOf([SECRET]);
    const altered = Buffer.from(
      raw.toString('utf8').replace('account_locked', 'enrollment_inactive'),
      'utf8',
    );

    expect(refusalOf(() => verifyTellerWebhook(altered, header, [SECRET])).reason).toBe('bad_signature');
  });

  it('when the signature was made with a secret the service does not hold, then bad_signature', () => {
    const { raw, header } = deliveryOf(['someone-elses-secret']);

    expect(refusalOf(() => verifyTellerWebhook(raw, header, [SECRET, OLD_SECRET])).reason).toBe(
      'bad_signature',
    );
  });

  it('when t was changed after signing (a replay made to look fresh), then bad_signature', () => {
    const signedAt = Date.now() - 10 * 60_000;
    const { raw, header } = deliveryOf([SECRET], signedAt);
    const refreshed = header.replace(/t=\d+/, `t=${Math.floor(Date.now() / 1000)}`);

    expect(refusalOf(() => verifyTellerWebhook(raw, refreshed, [SECRET])).reason).toBe('bad_signature');
  });

  it(`when the signature is older than ${TELLER_WEBHOOK_MAX_AGE_SECONDS} s, then stale; just inside the window it verifies`, () => {
    const now = Date.now();
    const stale = deliveryOf([SECRET], now - (TELLER_WEBHOOK_MAX_AGE_SECONDS + 5) * 1000);
    const fresh = deliveryOf([SECRET], now - (TELLER_WEBHOOK_MAX_AGE_SECONDS - 5) * 1000);

    expect(refusalOf(() => verifyTellerWebhook(stale.raw, stale.header, [SECRET], now)).reason).toBe('stale');
    expect(() => verifyTellerWebhook(fresh.raw, fresh.header, [SECRET], now)).not.toThrow();
  });

  it('when the signature is dated ahead of the clock beyond the skew, then future', () => {
    const now = Date.now();
    const ahead = deliveryOf([SECRET], now + (TELLER_WEBHOOK_CLOCK_SKEW_SECONDS + 60) * 1000);

    expect(refusalOf(() => verifyTellerWebhook(ahead.raw, ahead.header, [SECRET], now)).reason).toBe(
      'future',
    );
  });

  it('when one of several v1s is valid and the others are not, then it verifies; a later scheme is ignored', () => {
    const { raw } = deliveryOf([SECRET]);
    const t = Math.floor(Date.now() / 1000);
    const valid = tellerSignature(raw.toString('utf8'), [SECRET], t).split(',')[1];
    const header = `t=${t},v1=${'0'.repeat(64)},${valid},v2=whatever`;

    expect(() => verifyTellerWebhook(raw, header, [SECRET])).not.toThrow();
  });

  it('when the header is missing or not t=…,v1=…, then missing_header or malformed, and the early check says so too', () => {
    const { raw, header } = deliveryOf([SECRET]);
    const malformed = [
      'v1=abc',
      `t=abc,${header.split(',')[1]}`,
      header.split(',')[0]!,
      `${header},${header.split(',')[0]}`,
      `${header.split(',')[0]},v1=nothex`,
      `${header.split(',')[0]}${`,v1=${'a'.repeat(64)}`.repeat(9)}`,
    ];

    expect(refusalOf(() => verifyTellerWebhook(raw, undefined, [SECRET])).reason).toBe('missing_header');
    expect(refusalOf(() => verifyTellerWebhook(raw, ' ', [SECRET])).reason).toBe('missing_header');
    for (const value of malformed) {
      expect(refusalOf(() => verifyTellerWebhook(raw, value, [SECRET])).reason).toBe('malformed');
      expect(isWellFormedTellerSignature(value)).toBe(false);
    }
    expect(isWellFormedTellerSignature(header)).toBe(true);
    expect(isWellFormedTellerSignature(undefined)).toBe(false);
  });
});
