import type { TokenReencryptionRun } from '../../use-cases/reencrypt-tokens';
import { defineEndpoint } from '../endpoint-declaration';
import { MAX_FAILURE_LENGTH, runIdSchema } from '../schemas/admin-schemas';
import { count, wireText, wireTimestamp, z } from '../schemas/common-schemas';

const runId = () =>
  runIdSchema(
    'The run, as `POST /admin/tokens/reencrypt` answered it.',
    '9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f',
  );

const keyId = () =>
  z
    .string()
    .regex(/^[0-9a-f]{8}$/)
    .openapi({
      maxLength: 8,
      description:
        'The id of the key every token is re-encrypted under (the first `TOKEN_ENCRYPTION_KEY` of the ' +
        'instance that runs it), as `tokens_by_key` in `/admin/stats` names keys: the first 8 hex ' +
        'characters of the SHA-256 of the key’s bytes.',
      example: '3f9a0c1d',
    });

const reencryptionStartedResponse = z
  .object({ run_id: runId(), key_id: keyId() })
  .openapi('TokenReencryptionStarted');

const reencryptionRunResponse = z
  .object({
    run_id: runId(),
    state: z.enum(['running', 'done', 'failed']).openapi({
      description:
        '`failed` when the run stopped early (its instance shut down or stopped answering, or the ' +
        'database failed); what it re-encrypted stays re-encrypted, and a new run takes up what is left.',
    }),
    key_id: keyId(),
    total: count().openapi({ description: 'Stored tokens under another key when the run started.' }),
    reencrypted: count().openapi({ description: 'Tokens re-encrypted under `key_id` so far.' }),
    deferred: count().openapi({
      description:
        'Times a token was left because its row changed or was busy at the moment of the write (it is ' +
        'never overwritten); such a token is tried again in a later pass.',
    }),
    unreadable: count().openapi({
      description:
        'Tokens no configured key decrypts (their key was dropped, or the row is damaged): left as they ' +
        'are, each logged with its `item_id` and key id.',
    }),
    remaining: count()
      .nullable()
      .openapi({
        description:
          'Tokens still under another key when the run ended (0: the older keys can go once ' +
          '`tokens_by_key` agrees); null while running and for a failed run.',
      }),
    started_at: wireTimestamp(),
    finished_at: wireTimestamp().nullable().openapi({ description: 'Null while running.' }),
    failure: wireText(MAX_FAILURE_LENGTH)
      .nullable()
      .openapi({ description: 'Why a failed run stopped; null otherwise.' }),
  })
  .openapi('TokenReencryptionRun');

export const createTokenReencryption = defineEndpoint({
  operationId: 'createTokenReencryption',
  method: 'post',
  path: '/admin/tokens/reencrypt',
  access: 'admin',
  tags: ['Admin'],
  summary: 'Re-encrypt every stored access token under the first configured key',
  description:
    'The last step of a key rotation (see docs/operating.md, Rotating the encryption key): every stored ' +
    'access token (connections, exchanges under way, Item removals not done yet) sealed under another ' +
    'key than the first `TOKEN_ENCRYPTION_KEY` is sealed again under it, so that the older keys can be ' +
    'dropped. This starts a run in the background and answers its `run_id` and the target `key_id` at ' +
    'once; follow it with ' +
    '`GET /admin/tokens/reencrypt/{run_id}` (`npm run reencrypt-tokens` runs one in the foreground). ' +
    'Start it only once every instance runs with the new key first.\n\n' +
    'Tokens go in batches of `TOKEN_REENCRYPT_BATCH_SIZE`: each a read that takes no lock, then one ' +
    'statement that rewrites only the rows that still hold what was read and that no transaction holds ' +
    '(`SKIP LOCKED`), so requests are never waited for and a concurrent change is never overwritten; a row ' +
    'left so is tried again in a later pass. A run picks only tokens not yet under the first key: one ' +
    'interrupted is taken up by the next. One run at a time across instances (and the script): while ' +
    'one runs, this answers `409 TOKEN_REENCRYPTION_RUNNING` whose `detail` names it. A run whose ' +
    'instance stopped heart-beating for two minutes is marked `failed` by the next `POST` or `GET`; at ' +
    'shutdown a run in progress ends `failed` (`stopped at shutdown`). No token or ciphertext is ever in ' +
    'an answer or a log line.',
  response: {
    status: 202,
    description: 'The run started; it goes on in the background',
    schema: reencryptionStartedResponse,
    examples: {
      started: {
        summary: 'A run started',
        value: { run_id: '9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f', key_id: '3f9a0c1d' },
      },
    },
  },
  errors: ['TOKEN_REENCRYPTION_RUNNING', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async (_input, { useCases }) => {
    const { runId, keyId: target } = await useCases.tokenReencryption.start();
    return { run_id: runId, key_id: target };
  },
});

export const getTokenReencryption = defineEndpoint({
  operationId: 'getTokenReencryption',
  method: 'get',
  path: '/admin/tokens/reencrypt/{run_id}',
  access: 'admin',
  tags: ['Admin'],
  summary: 'A token re-encryption run: its state and progress',
  description:
    'Progress is saved after each batch, so a running run shows how far it is. A run whose instance ' +
    'stopped answering for two minutes is reported `failed`. A malformed id is `400 VALIDATION_FAILED`, ' +
    'an unknown one `404 NOT_FOUND`. `tokens_by_key` in `/admin/stats` says what is left under each key.',
  params: { schema: z.object({ run_id: runId() }) },
  response: {
    description: 'The run',
    schema: reencryptionRunResponse,
    examples: {
      done: {
        summary: 'A finished run that left nothing under an older key',
        value: {
          run_id: '9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f',
          state: 'done',
          key_id: '3f9a0c1d',
          total: 1204,
          reencrypted: 1204,
          deferred: 1,
          unreadable: 0,
          remaining: 0,
          started_at: '2026-11-22T02:13:13.177Z',
          finished_at: '2026-11-22T02:13:15.502Z',
          failure: null,
        },
      },
    },
  },
  errors: ['NOT_FOUND', 'DATABASE_UNAVAILABLE'],
  rateLimit: 'per-admin-secret',
  handle: async ({ params }, { useCases }) =>
    toWireRun(await useCases.tokenReencryption.getRun(params.run_id)),
});

function toWireRun(run: TokenReencryptionRun) {
  return {
    run_id: run.runId,
    state: run.state,
    key_id: run.keyId,
    total: run.total,
    reencrypted: run.reencrypted,
    deferred: run.deferred,
    unreadable: run.unreadable,
    remaining: run.remaining,
    started_at: run.startedAt.toISOString(),
    finished_at: run.finishedAt?.toISOString() ?? null,
    failure: run.failure,
  };
}
