import { createHash, createHmac, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/observability/logger';
import type { WebhookVerificationKey } from '../../src/provider/account-provider';
import { ProviderError } from '../../src/provider/provider-error';
import {
  createWebhookVerifier,
  NEW_KID_LOOKUPS_PER_SOURCE_PER_MINUTE,
  WebhookVerificationError,
  type WebhookVerifierOptions,
} from '../../src/provider/webhook-verifier';
import { rejectionOf } from 'test-kit';

/** "Plaid": real P-256 key pairs, and /webhook_verification_key/get over them, counting its calls. */
function fakePlaidKeys() {
  const privateKeys = new Map<string, KeyObject>();
  const published = new Map<string, WebhookVerificationKey>();
  const calls: string[] = [];
  let outage = false;
  return {
    calls,
    issue(options: { kid?: string; expiredAt?: number | null; curve?: string } = {}) {
      const kid = options.kid ?? randomUUID();
      const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: options.curve ?? 'P-256' });
      const jwk = publicKey.export({ format: 'jwk' });
      privateKeys.set(kid, privateKey);
      published.set(kid, {
        alg: 'ES256',
        crv: jwk.crv!,
        kid,
        kty: 'EC',
        x: jwk.x!,
        y: jwk.y!,
        createdAt: 1_700_000_000,
        expiredAt: options.expiredAt ?? null,
      });
      return { kid, privateKey, publicKey };
    },
    retire(kid: string, expiredAt: number) {
      published.set(kid, { ...published.get(kid)!, expiredAt });
    },
    setOutage(down: boolean) {
      outage = down;
    },
    async fetchKey(kid: string): Promise<WebhookVerificationKey> {
      calls.push(kid);
      await new Promise((resolve) => setImmediate(resolve));
      if (outage) throw new ProviderError('unavailable', 'webhook_verification_key/get', { httpStatus: 503 });
      const key = published.get(kid);
      if (!key) {
        throw new ProviderError('rejected', 'webhook_verification_key/get', {
          errorType: 'INVALID_INPUT',
          errorCode: 'INVALID_WEBHOOK_VERIFICATION_KEY_ID',
          httpStatus: 400,
        });
      }
      return { ...key };
    },
  };
}

const base64url = (value: string | Buffer) => Buffer.from(value).toString('base64url');

function signedJwt(
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
  signWith: (input: Buffer) => Buffer,
): string {
  const input = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
  return `${input}.${base64url(signWith(Buffer.from(input)))}`;
}

const es256 = (privateKey: KeyObject) => (input: Buffer) =>
  sign('sha256', input, { key: privateKey, dsaEncoding: 'ieee-p1363' });
const sha256Hex = (body: Buffer) => createHash('sha256').update(body).digest('hex');

const START = Date.parse('2026-05-01T12:00:00Z');

function setUp(options: Partial<WebhookVerifierOptions> = {}) {
  const plaid = fakePlaidKeys();
  const clock = { now: START };
  const logs: string[] = [];
  const logger = createLogger({
    level: 'trace',
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs.push(chunk.toString('utf8'));
        done();
      },
    }),
  });
  const verifier = createWebhookVerifier({
    fetchKey: (kid) => plaid.fetchKey(kid),
    clock: () => clock.now,
    logger,
    ...options,
  });
  const nowSeconds = () => Math.floor(clock.now / 1000);
  /** What Plaid would send: the body bytes and a Plaid-Verification header over them. */
  const webhook = (
    key: { kid: string; privateKey: KeyObject },
    overrides: { iat?: number; body?: Buffer; claims?: Record<string, unknown> } = {},
  ) => {
    const body =
      overrides.body ??
      Buffer.from(
        JSON.stringify({ webhook_type: 'ITEM', webhook_code: 'ERROR', item_id: `item-${randomUUID()}` }),
      );
    const header = signedJwt(
      { alg: 'ES256', kid: key.kid, typ: 'JWT' },
      { iat: overrides.iat ?? nowSeconds(), request_body_sha256: sha256Hex(body), ...overrides.claims },
      es256(key.privateKey),
    );
    return { body, header };
  };
  return { plaid, clock, logs, verifier, webhook, nowSeconds };
}

const refusalOf = (verification: Promise<unknown>) => rejectionOf(verification, WebhookVerificationError);

describe('Plaid webhook verification', () => {
  it('when Plaid signs a webhook, then its parsed body and kid come back', async () => {
    const { plaid, verifier, webhook, nowSeconds } = setUp();
    const key = plaid.issue();
    const { body, header } = webhook(key);

    const verified = await verifier.verify(body, header);

    expect(verified).toEqual({ body: JSON.parse(body.toString()), kid: key.kid, issuedAt: nowSeconds() });
    expect(plaid.calls).toEqual([key.kid]);
  });

  it('when the signature was made with another key under Plaid’s kid, then bad_signature', async () => {
    const { plaid, verifier, webhook } = setUp();
    const key = plaid.issue();
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const { body, header } = webhook({ kid: key.kid, privateKey: attacker.privateKey });

    const refusal = await refusalOf(verifier.verify(body, header));

    expect(refusal.reason).toBe('bad_signature');
  });

  it.each([
    ['none', () => Buffer.alloc(0)],
    [
      'RS256',
      (input: Buffer) =>
        sign('sha256', input, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey),
    ],
    [
      'ES384',
      (input: Buffer) => sign('sha384', input, generateKeyPairSync('ec', { namedCurve: 'P-384' }).privateKey),
    ],
  ])('when the header says alg %s, then unsupported_alg before any key is fetched', async (alg, signWith) => {
    const { plaid, verifier, nowSeconds } = setUp();
    const key = plaid.issue();
    const body = Buffer.from('{"webhook_type":"ITEM"}');
    const header = signedJwt(
      { alg, kid: key.kid, typ: 'JWT' },
      { iat: nowSeconds(), request_body_sha256: sha256Hex(body) },
      signWith,
    );

    const refusal = await refusalOf(verifier.verify(body, header));

    expect(refusal.reason).toBe('unsupported_alg');
    expect(plaid.calls).toEqual([]);
  });

  it('when HS256 is signed with Plaid’s public key as the secret (key confusion), then unsupported_alg', async () => {
    const { plaid, verifier, webhook, nowSeconds } = setUp();
    const key = plaid.issue();
    const genuine = webhook(key);
    await verifier.verify(genuine.body, genuine.header);
    const body = Buffer.from('{"webhook_type":"ITEM","webhook_code":"USER_PERMISSION_REVOKED"}');
    const claims = { iat: nowSeconds(), request_body_sha256: sha256Hex(body) };
    const pem = key.publicKey.export({ format: 'pem', type: 'spki' });
    const jwkText = JSON.stringify(key.publicKey.export({ format: 'jwk' }));

    const refusals = await Promise.all(
      [pem, jwkText].map((secret) =>
        refusalOf(
          verifier.verify(
            body,
            signedJwt({ alg: 'HS256', kid: key.kid, typ: 'JWT' }, claims, (input) =>
              createHmac('sha256', secret).update(input).digest(),
            ),
          ),
        ),
      ),
    );

    expect(refusals.map((refusal) => refusal.reason)).toEqual(['unsupported_alg', 'unsupported_alg']);
  });

  it('when iat is more than 5 minutes old, then stale; at exactly 5 minutes it still verifies', async () => {
    const { plaid, verifier, webhook, nowSeconds } = setUp();
    const key = plaid.issue();
    const old = webhook(key, { iat: nowSeconds() - 301 });
    const edge = webhook(key, { iat: nowSeconds() - 300 });

    const refusal = await refusalOf(verifier.verify(old.body, old.header));
    const verified = await verifier.verify(edge.body, edge.header);

    expect(refusal.reason).toBe('stale');
    expect(verified.kid).toBe(key.kid);
  });

  it('when iat is in the future beyond the skew, then future; a few seconds ahead still verifies', async () => {
    const { plaid, verifier, webhook, nowSeconds } = setUp();
    const key = plaid.issue();
    const ahead = webhook(key, { iat: nowSeconds() + 60 });
    const slightlyAhead = webhook(key, { iat: nowSeconds() + 4 });

    const refusal = await refusalOf(verifier.verify(ahead.body, ahead.header));
    const verified = await verifier.verify(slightlyAhead.body, slightlyAhead.header);

    expect(refusal.reason).toBe('future');
    expect(verified.kid).toBe(key.kid);
  });

  it('when one byte of the body changes after signing, then body_mismatch', async () => {
    const { plaid, verifier, webhook } = setUp();
    const key = plaid.issue();
    const { body, header } = webhook(key, {
      body: Buffer.from('{"webhook_type":"ITEM","webhook_code":"ERROR","item_id":"item-1"}'),
    });
    const tampered = Buffer.from(body);
    tampered[tampered.length - 3] = '2'.charCodeAt(0);

    const refusal = await refusalOf(verifier.verify(tampered, header));

    expect(refusal.reason).toBe('body_mismatch');
  });

  it('when the body is the same JSON re-serialised, then body_mismatch: only the raw bytes count', async () => {
    const { plaid, verifier, webhook } = setUp();
    const key = plaid.issue();
    const { body, header } = webhook(key, { body: Buffer.from('{ "webhook_type": "ITEM" }') });

    const refusal = await refusalOf(
      verifier.verify(Buffer.from(JSON.stringify(JSON.parse(body.toString()))), header),
    );

    expect(refusal.reason).toBe('body_mismatch');
  });

  it.each([undefined, '', '   '])('when the header is %j, then missing_header', async (header) => {
    const { verifier } = setUp();

    const refusal = await refusalOf(verifier.verify(Buffer.from('{}'), header));

    expect(refusal.reason).toBe('missing_header');
  });

  it.each([
    ['not a JWT', 'hello'],
    ['two segments', 'eyJhbGciOiJFUzI1NiJ9.e30'],
    ['a header that is not JSON', `${base64url('not json')}.e30.c2ln`],
    ['no kid', `${base64url('{"alg":"ES256"}')}.e30.c2ln`],
    ['a kid that is not a string', `${base64url('{"alg":"ES256","kid":7}')}.e30.c2ln`],
    ['a kid with odd characters', `${base64url('{"alg":"ES256","kid":"a b\\n"}')}.e30.c2ln`],
    ['a huge header', `${'a'.repeat(5000)}.e30.c2ln`],
  ])('when the header is malformed (%s), then malformed and no key is fetched', async (_case, header) => {
    const { plaid, verifier } = setUp();

    const refusal = await refusalOf(verifier.verify(Buffer.from('{}'), header));

    expect(refusal.reason).toBe('malformed');
    expect(plaid.calls).toEqual([]);
  });

  it('when a validly signed JWT lacks request_body_sha256, then malformed', async () => {
    const { plaid, verifier, webhook } = setUp();
    const key = plaid.issue();
    const { body, header } = webhook(key, { claims: { request_body_sha256: undefined } });

    const refusal = await refusalOf(verifier.verify(body, header));

    expect(refusal.reason).toBe('malformed');
  });

  it('when the kid is one Plaid never issued, then unknown_key', async () => {
    const { plaid, verifier, webhook } = setUp();
    const forged = {
      kid: randomUUID(),
      privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
    };
    const { body, header } = webhook(forged);

    const refusal = await refusalOf(verifier.verify(body, header));

    expect(refusal.reason).toBe('unknown_key');
    expect(plaid.calls).toEqual([forged.kid]);
  });

  it('when Plaid says the key expired, then expired_key; a key expiring later still verifies', async () => {
    const { plaid, verifier, webhook, nowSeconds } = setUp();
    const retired = plaid.issue({ expiredAt: nowSeconds() - 60 });
    const retiringLater = plaid.issue({ expiredAt: nowSeconds() + 3600 });
    const old = webhook(retired);
    const current = webhook(retiringLater);

    const refusal = await refusalOf(verifier.verify(old.body, old.header));
    const verified = await verifier.verify(current.body, current.header);

    expect(refusal.reason).toBe('expired_key');
    expect(verified.kid).toBe(retiringLater.kid);
  });

  it('when a cached key reaches its expired_at, then it stops verifying without asking Plaid again', async () => {
    const { plaid, clock, verifier, webhook, nowSeconds } = setUp();
    const key = plaid.issue({ expiredAt: nowSeconds() + 120 });
    const first = webhook(key);
    await verifier.verify(first.body, first.header);
    clock.now += 121_000;
    const later = webhook(key);

    const refusal = await refusalOf(verifier.verify(later.body, later.header));

    expect(refusal.reason).toBe('expired_key');
    expect(plaid.calls).toEqual([key.kid]);
  });

  it('when Plaid answers with a key that is not P-256, then unknown_key', async () => {
    const { plaid, verifier, webhook } = setUp();
    const key = plaid.issue({ curve: 'P-384' });
    const { body, header } = webhook(key);

    const refusal = await refusalOf(verifier.verify(body, header));

    expect(refusal.reason).toBe('unknown_key');
  });

  it('when 20 webhooks with one new kid arrive at once, then Plaid is asked once and all verify', async () => {
    const { plaid, verifier, webhook } = setUp();
    const key = plaid.issue();
    const burst = Array.from({ length: 20 }, () => webhook(key));

    const results = await Promise.all(burst.map(({ body, header }) => verifier.verify(body, header)));

    expect(results.map((result) => result.kid)).toEqual(Array(20).fill(key.kid));
    expect(plaid.calls).toEqual([key.kid]);
  });

  it('when 20 webhooks with one unknown kid arrive at once, then Plaid is asked once and all are refused', async () => {
    const { plaid, verifier, webhook } = setUp();
    const forged = {
      kid: randomUUID(),
      privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
    };
    const burst = Array.from({ length: 20 }, () => webhook(forged));

    const refusals = await Promise.all(
      burst.map(({ body, header }) => refusalOf(verifier.verify(body, header))),
    );

    expect(new Set(refusals.map((refusal) => refusal.reason))).toEqual(new Set(['unknown_key']));
    expect(plaid.calls).toEqual([forged.kid]);
  });

  it('when a key is cached, then later webhooks are verified without fetching it again', async () => {
    const { plaid, clock, verifier, webhook } = setUp();
    const key = plaid.issue();

    for (let minute = 0; minute < 5; minute += 1) {
      const { body, header } = webhook(key);
      await verifier.verify(body, header);
      clock.now += 60_000;
    }

    expect(plaid.calls).toEqual([key.kid]);
  });

  it('when the same unknown kid comes back, then it is refused from memory until its 5 minutes are up', async () => {
    const { plaid, clock, verifier, webhook } = setUp();
    const forged = {
      kid: randomUUID(),
      privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
    };

    for (let attempt = 0; attempt < 5; attempt += 1) {
      const { body, header } = webhook(forged);
      expect((await refusalOf(verifier.verify(body, header))).reason).toBe('unknown_key');
    }
    const callsWhileRemembered = plaid.calls.length;
    clock.now += 301_000;
    const { body, header } = webhook(forged);
    await refusalOf(verifier.verify(body, header));

    expect(callsWhileRemembered).toBe(1);
    expect(plaid.calls).toEqual([forged.kid, forged.kid]);
  });

  it('when many random kids arrive from one address, then at most 20 lookups a minute reach Plaid for it, the rest are throttled, and the budget renews', async () => {
    const { plaid, clock, verifier, webhook, logs } = setUp();
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const attack = () =>
      Promise.all(
        Array.from({ length: 50 }, () => {
          const { body, header } = webhook({ kid: randomUUID(), privateKey: attacker });
          return refusalOf(verifier.verify(body, header, '203.0.113.7'));
        }),
      );

    const refusals = await attack();
    const callsInFirstMinute = plaid.calls.length;
    clock.now += 60_000;
    await attack();

    expect(refusals.filter((refusal) => refusal.reason === 'unknown_key')).toHaveLength(20);
    expect(refusals.filter((refusal) => refusal.reason === 'key_lookup_throttled')).toHaveLength(30);
    expect(callsInFirstMinute).toBe(20);
    expect(plaid.calls).toHaveLength(40);
    expect(logs.filter((line) => line.includes('too many unknown webhook key ids'))).toHaveLength(2);
  });

  it('when one address has spent its lookups, then a new kid from another address is still looked up and verifies', async () => {
    const { plaid, verifier, webhook } = setUp();
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    for (let attempt = 0; attempt < 25; attempt += 1) {
      const { body, header } = webhook({ kid: randomUUID(), privateKey: attacker });
      await refusalOf(verifier.verify(body, header, '203.0.113.7'));
    }
    const key = plaid.issue();
    const genuine = webhook(key);

    const verified = await verifier.verify(genuine.body, genuine.header, '52.21.26.131');

    expect(verified.kid).toBe(key.kid);
    expect(plaid.calls).toHaveLength(21);
  });

  it('when many addresses look up new kids, then the total per minute stays bounded for every address together', async () => {
    const { plaid, verifier, webhook } = setUp({
      newKidLookupsPerSourcePerMinute: 3,
      newKidLookupsPerMinute: 5,
    });
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;

    const refusals = await Promise.all(
      Array.from({ length: 12 }, (_, index) => {
        const { body, header } = webhook({ kid: randomUUID(), privateKey: attacker });
        return refusalOf(verifier.verify(body, header, `203.0.113.${index}`));
      }),
    );

    expect(plaid.calls).toHaveLength(5);
    expect(refusals.filter((refusal) => refusal.reason === 'key_lookup_throttled')).toHaveLength(7);
  });

  it('when new kids arrive from many addresses of one IPv6 /64, then they spend one source’s lookups and Plaid’s genuine webhook still verifies', async () => {
    const { plaid, verifier, webhook } = setUp();
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    // More forgeries than the whole minute's budget (600), each from its own address of one /64.
    const flood = 650;
    const refusals = [];
    for (let attempt = 0; attempt < flood; attempt += 1) {
      const { body, header } = webhook({ kid: randomUUID(), privateKey: attacker });
      const address = `2001:db8:77:88:${(attempt >> 16) & 0xffff}:${attempt & 0xffff}:${attempt % 7}:1`;
      refusals.push(await refusalOf(verifier.verify(body, header, address)));
    }
    const key = plaid.issue();
    const genuine = webhook(key);

    const verified = await verifier.verify(genuine.body, genuine.header, '2600:1f18:abc:1::15');

    expect(refusals.filter((refusal) => refusal.reason === 'unknown_key')).toHaveLength(
      NEW_KID_LOOKUPS_PER_SOURCE_PER_MINUTE,
    );
    expect(verified.kid).toBe(key.kid);
    expect(plaid.calls).toHaveLength(NEW_KID_LOOKUPS_PER_SOURCE_PER_MINUTE + 1);
  });

  it('when an IPv4 address comes back IPv4-mapped, or an IPv6 one in another spelling, then it is the same source; the next /64 is another', async () => {
    const { plaid, verifier, webhook } = setUp({ newKidLookupsPerSourcePerMinute: 2 });
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const reasonFrom = async (source: string) => {
      const { body, header } = webhook({ kid: randomUUID(), privateKey: attacker });
      return (await refusalOf(verifier.verify(body, header, source))).reason;
    };

    const reasons = [
      await reasonFrom('203.0.113.7'),
      await reasonFrom('203.0.113.7'),
      await reasonFrom('::ffff:203.0.113.7'),
      await reasonFrom('::FFFF:cb00:7107'),
      await reasonFrom('203.0.113.8'),
      await reasonFrom('2001:db8:1:2::1'),
      await reasonFrom('2001:DB8:1:2:ffff:0:0:9'),
      await reasonFrom('2001:0db8:0001:0002:0000:0000:0000:0042'),
      await reasonFrom('fe80::1%eth0'),
      await reasonFrom('2001:db8:1:3::1'),
    ];

    expect(reasons).toEqual([
      'unknown_key',
      'unknown_key',
      'key_lookup_throttled',
      'key_lookup_throttled',
      'unknown_key',
      'unknown_key',
      'unknown_key',
      'key_lookup_throttled',
      'unknown_key',
      'unknown_key',
    ]);
    expect(plaid.calls).toHaveLength(7);
  });

  it('when a forgery does not bind its body or is not fresh, then it is refused without any key lookup', async () => {
    const { plaid, verifier, webhook, nowSeconds } = setUp();
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const unbound = webhook(
      { kid: randomUUID(), privateKey: attacker },
      { claims: { request_body_sha256: 'f'.repeat(64) } },
    );
    const old = webhook({ kid: randomUUID(), privateKey: attacker }, { claims: { iat: nowSeconds() - 600 } });

    const refusals = [
      await refusalOf(verifier.verify(unbound.body, unbound.header, '203.0.113.7')),
      await refusalOf(verifier.verify(old.body, old.header, '203.0.113.7')),
    ];

    expect(refusals.map((refusal) => refusal.reason)).toEqual(['body_mismatch', 'stale']);
    expect(plaid.calls).toEqual([]);
  });

  it('when the lookup budget is spent, then a key already cached keeps verifying', async () => {
    const { plaid, verifier, webhook } = setUp({ newKidLookupsPerSourcePerMinute: 2 });
    const key = plaid.issue();
    const attacker = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const first = webhook(key);
    await verifier.verify(first.body, first.header);
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const { body, header } = webhook({ kid: randomUUID(), privateKey: attacker });
      await refusalOf(verifier.verify(body, header));
    }
    const later = webhook(key);

    const verified = await verifier.verify(later.body, later.header);

    expect(verified.kid).toBe(key.kid);
    expect(plaid.calls).toHaveLength(2);
  });

  it('when Plaid cannot be reached for a new kid, then key_unavailable, and the next delivery asks again', async () => {
    const { plaid, verifier, webhook } = setUp();
    const key = plaid.issue();
    plaid.setOutage(true);
    const first = webhook(key);
    const refusal = await refusalOf(verifier.verify(first.body, first.header));
    plaid.setOutage(false);
    const redelivery = webhook(key);

    const verified = await verifier.verify(redelivery.body, redelivery.header);

    expect(refusal.reason).toBe('key_unavailable');
    expect(verified.kid).toBe(key.kid);
    expect(plaid.calls).toEqual([key.kid, key.kid]);
  });

  it('when Plaid rotates to a new kid, then the old key is re-checked and refused once Plaid retired it', async () => {
    const { plaid, verifier, webhook, nowSeconds } = setUp();
    const oldKey = plaid.issue();
    const before = webhook(oldKey);
    await verifier.verify(before.body, before.header);
    plaid.retire(oldKey.kid, nowSeconds() - 1);
    const newKey = plaid.issue();
    const rotated = webhook(newKey);

    await verifier.verify(rotated.body, rotated.header);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const signedWithOld = webhook(oldKey);
    const refusal = await refusalOf(verifier.verify(signedWithOld.body, signedWithOld.header));

    expect(refusal.reason).toBe('expired_key');
    expect(plaid.calls).toEqual([oldKey.kid, newKey.kid, oldKey.kid]);
  });

  it('when a cached key is an hour old, then it keeps verifying while Plaid is asked about it in the background', async () => {
    const { plaid, clock, verifier, webhook, nowSeconds } = setUp();
    const key = plaid.issue();
    const first = webhook(key);
    await verifier.verify(first.body, first.header);
    clock.now += 3_600_000;
    plaid.retire(key.kid, nowSeconds() - 1);
    const served = webhook(key);

    const verified = await verifier.verify(served.body, served.header);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const afterRecheck = webhook(key);
    const refusal = await refusalOf(verifier.verify(afterRecheck.body, afterRecheck.header));

    expect(verified.kid).toBe(key.kid);
    expect(refusal.reason).toBe('expired_key');
    expect(plaid.calls).toEqual([key.kid, key.kid]);
  });

  it('when webhooks are verified or refused, then no log line holds the header or the body', async () => {
    const { plaid, verifier, webhook, logs } = setUp();
    const key = plaid.issue();
    const secretMarker = `marker-${randomUUID()}`;
    const good = webhook(key, { body: Buffer.from(JSON.stringify({ note: secretMarker })) });
    const forged = webhook(
      { kid: randomUUID(), privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey },
      { body: Buffer.from(JSON.stringify({ note: secretMarker })) },
    );

    await verifier.verify(good.body, good.header);
    await refusalOf(verifier.verify(forged.body, forged.header));
    await refusalOf(verifier.verify(Buffer.from(secretMarker), good.header));

    expect(logs.length).toBeGreaterThan(0);
    const written = logs.join('\n');
    expect(written).not.toContain(secretMarker);
    expect(written).not.toContain(good.header.split('.')[2]);
    expect(written).not.toContain(forged.header.split('.')[1]);
  });
});
