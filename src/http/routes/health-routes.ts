import { AppError, databaseUnavailable } from '../../errors';
import { defineEndpoint } from '../endpoint-declaration';
import { z } from '../schemas/common-schemas';

const READINESS_TIMEOUT_MS = 1_000;

const livenessResponse = z.object({ status: z.literal('ok') }).openapi('Liveness');
const readinessResponse = z.object({ status: z.literal('ready') }).openapi('Readiness');

/** Liveness never looks outside the process. */
export const checkLiveness = defineEndpoint({
  operationId: 'checkLiveness',
  method: 'get',
  path: '/healthz',
  access: 'anyone',
  tags: ['Operations'],
  summary: 'The process is alive',
  description: 'Answers while the process runs; it looks at nothing outside the process. No secret needed.',
  response: {
    description: 'The process is alive',
    schema: livenessResponse,
    examples: { alive: { summary: 'Alive', value: { status: 'ok' } } },
  },
  errors: [],
  quietWhenHealthy: true,
  handle: () => ({ status: 'ok' as const }),
});

/** Readiness asks the database, never the provider: Plaid's health must not take instances out. */
export const checkReadiness = defineEndpoint({
  operationId: 'checkReadiness',
  method: 'get',
  path: '/readyz',
  access: 'anyone',
  tags: ['Operations'],
  summary: 'The database answers',
  description:
    "Ready when the database answers within a second; not ready once shutdown has begun. Plaid's health " +
    'affects neither. No secret needed.',
  response: {
    description: 'Ready to serve',
    schema: readinessResponse,
    examples: { ready: { summary: 'Ready', value: { status: 'ready' } } },
  },
  errors: ['SHUTTING_DOWN', 'DATABASE_UNAVAILABLE'],
  quietWhenHealthy: true,
  handle: async (_input, { isShuttingDown, isDatabaseAnswering }) => {
    if (isShuttingDown()) {
      throw new AppError('SHUTTING_DOWN', {
        detail: 'This instance is shutting down.',
      });
    }
    const answered = await isDatabaseAnswering(READINESS_TIMEOUT_MS);
    if (!answered) throw databaseUnavailable();
    return { status: 'ready' as const };
  },
});
