import { MAX_CODE_LENGTH, wireText, z } from './common-schemas';

/** The shape every admin answer explains its error codes with, declared once. */

/** Longest message or suggested action in the registry of explanations, with room to grow. */
const MAX_EXPLANATION_LENGTH = 400;

/**
 * An error code in plain words, from the one registry (src/vocabulary/error-explanations.ts): declared once,
 * beside every `error_code` (and `last_error`) an admin answer carries, as `error_explanation`.
 */
const errorExplanationSchema = z
  .object({
    message: wireText(MAX_EXPLANATION_LENGTH).openapi({
      description: "What happened to the user's bank connection, in plain words.",
      example: "The bank no longer accepts the user's saved login, so no new data arrives.",
    }),
    suggested_action: wireText(MAX_EXPLANATION_LENGTH).openapi({
      description: 'What support staff should do next.',
      example: "Ask the user to reconnect the bank through the website's update flow.",
    }),
  })
  .openapi('ErrorExplanation', {
    description:
      'An error code explained for support staff. A code the service has no entry for (one a provider ' +
      'added) gets a generic explanation that says so.',
  });

/** `error_explanation`: the explanation of the error code beside it, null when there is no error. */
export const errorExplanationField = (of: string) =>
  // A union, not .nullable(): the document must say "the schema, or null" (anyOf), not both at once.
  z.union([errorExplanationSchema, z.null()]).openapi({
    description: `${of} in plain words, with what to do next; null when there is no error.`,
  });

/** The code a `last_error` carries, read back from it (src/vocabulary/outbox-failures.ts). */
export function outboxErrorCode() {
  return wireText(MAX_CODE_LENGTH)
    .nullable()
    .openapi({
      description:
        'The code `last_error` carries: the provider’s or the service’s code it starts with (a removal), or the ' +
        'service’s name for a notification’s failure (`WEBSITE_FAILED`, `WEBSITE_TIMEOUT`…); null without an ' +
        'error, or when none can be read from it.',
      example: 'INTERNAL_SERVER_ERROR',
    });
}
