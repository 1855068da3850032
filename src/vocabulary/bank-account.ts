/**
 * One bank account as the provider describes it and as it is stored, declared once: the provider's
 * answer, a new account row and a stored account all have this shape.
 */
export interface BankAccount {
  /** Plaid's `account_id`. */
  providerAccountId: string;
  name: string;
  officialName: string | null;
  mask: string | null;
  type: string;
  subtype: string | null;
}
