/**
 * PLACEHOLDER, replaced at merge by the error-code registry's branch (issue 26, item 3): the same export,
 * with every code Plaid and Teller answer. Here only so that the admin user view can be built and tested.
 */
export interface ErrorExplanation {
  message: string;
  suggested_action: string;
}

const KNOWN: Record<string, ErrorExplanation> = {
  ITEM_LOGIN_REQUIRED: {
    message: 'The bank needs the user to sign in again before it shares any more data.',
    suggested_action: 'Ask the user to reconnect the bank through Link in update mode.',
  },
  PENDING_EXPIRATION: {
    message: 'The user’s consent to share data with this app ends soon.',
    suggested_action: 'Ask the user to renew access through Link in update mode before it expires.',
  },
};

/** A code's plain-language meaning and the next step; a generic one for a code not known. */
export function explainErrorCode(code: string): ErrorExplanation {
  return (
    KNOWN[code] ?? {
      message: `The provider reported the error ${code}.`,
      suggested_action: 'Look the code up in the provider’s documentation, or ask the engineers on call.',
    }
  );
}
