import fc from 'fast-check';
import type { ZodObject } from 'zod';
import { adminStats, call, declaredEndpoints, listAdminAccounts } from '../support/requests';
import { serviceForFile } from '../support/service';

/** Every endpoint that takes the website's JSON body, from the declarations. */
const BODY_ENDPOINTS = declaredEndpoints((endpoint) => endpoint.access === 'internal' && !!endpoint.body);
/** Every field any of them reads, from their body schemas. */
const FIELDS = [
  ...new Set(BODY_ENDPOINTS.flatMap((endpoint) => Object.keys((endpoint.body!.schema as ZodObject).shape))),
];
const TOKEN_TEXT = /(access|public|link)-(sandbox|production)-/;

/** Whether a lone UTF-16 surrogate hides anywhere in a value, keys included. */
const hasIllFormedString = (value: unknown): boolean =>
  typeof value === 'string'
    ? !value.isWellFormed()
    : typeof value === 'object' && value !== null
      ? Object.entries(value).some(([key, item]) => !key.isWellFormed() || hasIllFormedString(item))
      : false;

/** Values a careless or hostile caller might put in a field. */
const fieldValue = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.string({ unit: 'binary', maxLength: 50 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 }), { maxKeys: 3 }),
  fc.constantFrom(
    'public-sandbox-11111111-2222-3333-4444-555555555555',
    'access-sandbox-11111111-2222-3333-4444-555555555555',
    "'; DROP TABLE accounts; --",
    '../../etc/passwd',
    '\u0000',
  ),
);

describe('input fuzzing', () => {
  const service = serviceForFile();

  it('when any body of any shape is posted to any endpoint, then it is never a 5xx, every error is a problem, no error carries a token, and a lone surrogate is a 400', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...BODY_ENDPOINTS.map((endpoint) => endpoint.operationId)),
        fc.dictionary(fc.constantFrom(...FIELDS, 'extra', '__proto__', 'constructor'), fieldValue, {
          maxKeys: 6,
        }),
        async (operationId, body) => {
          const response = await call(service, operationId).send(body);

          expect(response.status).toBeLessThan(500);
          if (hasIllFormedString(body)) expect(response.status).toBe(400);
          if (response.status >= 400) {
            expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
            expect(response.body.status).toBe(response.status);
            // Only a success may carry a token (a new link token, or the connection's access token).
            expect(response.text).not.toMatch(TOKEN_TEXT);
          }
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 300) },
    );
  });

  it('when any header value is sent as the secret, then the answer is 401, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc
          .string({ minLength: 1, maxLength: 2_000 })
          .filter((value) => /^[\x21-\x7e][\x20-\x7e]*$/.test(value.trim()) && value === value.trim()),
        async (secret) => {
          const response = await adminStats(service).set('X-Internal-Secret', secret);

          expect(response.status).toBe(401);
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 300) },
    );
  });

  it('when any query string is sent to the admin list, then it is answered without a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.dictionary(
          fc.constantFrom(
            'limit',
            'cursor',
            'type',
            'created_after',
            'created_before',
            'institution_id',
            'x',
          ),
          fc.string({ maxLength: 40 }),
          { maxKeys: 4 },
        ),
        async (query) => {
          const response = await listAdminAccounts(service, query);

          expect(response.status).toBeLessThan(500);
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 200) },
    );
  });
});
