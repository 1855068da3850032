/**
 * The institutions and accounts the emulator offers. https://teller.io/docs/api/institutions lists each
 * institution as `{ id, name, products }`; https://teller.io/docs/guides/connect names the products
 * (`verify`, `verify.instant`, `balance`, `transactions`, `identity`, `payments`); an account's `links`
 * name only what its institution supports (https://teller.io/docs/api/accounts).
 *
 * The first three carry every data product, as Teller's sandbox institutions do ("In the sandbox
 * environment, all institutions behave identically", https://teller.io/docs/guides/sandbox). The last two
 * are the emulator's own, fictitious, with fewer products so that a client's handling of absent links can
 * be tested: Harbor Credit Union gives no account details, Prairie State Bank no balances.
 */

export const PRODUCTS = [
  'verify',
  'verify.instant',
  'verify.microdeposit',
  'balance',
  'transactions',
  'identity',
  'payments',
] as const;
export type Product = (typeof PRODUCTS)[number];

export interface SandboxInstitution {
  id: string;
  name: string;
  products: Product[];
}

export const SANDBOX_INSTITUTIONS: readonly SandboxInstitution[] = [
  { id: 'chase', name: 'Chase', products: ['verify', 'balance', 'transactions', 'identity'] },
  { id: 'wells_fargo', name: 'Wells Fargo', products: ['verify', 'balance', 'transactions', 'identity'] },
  {
    id: 'security_cu',
    name: 'Security Credit Union',
    products: ['verify', 'balance', 'transactions', 'identity'],
  },
  { id: 'harbor_cu', name: 'Harbor Credit Union', products: ['balance', 'transactions'] },
  { id: 'prairie_bank', name: 'Prairie State Bank', products: ['verify', 'transactions'] },
];

export const DEFAULT_INSTITUTION_ID = 'chase';

export function institutionById(id: string): SandboxInstitution | undefined {
  return SANDBOX_INSTITUTIONS.find((institution) => institution.id === id);
}

/** Which `links` an institution's products give an account (details need a routing number: depository only). */
export function supportsDetails(institution: SandboxInstitution, type: AccountType): boolean {
  return type === 'depository' && institution.products.some((product) => product.startsWith('verify'));
}

export function supportsBalances(institution: SandboxInstitution): boolean {
  return institution.products.includes('balance');
}

export function supportsTransactions(institution: SandboxInstitution): boolean {
  return institution.products.includes('transactions');
}

/** https://teller.io/docs/api/accounts: `type` and `subtype`. */
export type AccountType = 'depository' | 'credit';
export const DEPOSITORY_SUBTYPES = [
  'checking',
  'savings',
  'money_market',
  'certificate_of_deposit',
  'treasury',
  'sweep',
] as const;
export type AccountSubtype = (typeof DEPOSITORY_SUBTYPES)[number] | 'credit_card';

export interface AccountTemplate {
  name: string;
  type: AccountType;
  subtype: AccountSubtype;
  /** Balances in dollars and cents as Teller writes them: strings (https://teller.io/docs/api/account/balances). */
  ledger: string;
  available: string;
}

/** Every enrollment shares these three accounts, as Teller's sandbox user `username` does. */
export const ACCOUNT_TEMPLATES: readonly AccountTemplate[] = [
  {
    name: 'Everyday Checking',
    type: 'depository',
    subtype: 'checking',
    ledger: '2384.17',
    available: '2241.09',
  },
  {
    name: 'Essential Savings',
    type: 'depository',
    subtype: 'savings',
    ledger: '28575.02',
    available: '28575.02',
  },
  { name: 'Platinum Card', type: 'credit', subtype: 'credit_card', ledger: '1204.55', available: '8795.45' },
];

/** A realistic ABA routing number for each institution's details (check digit valid). */
export const ROUTING_NUMBERS: Record<string, { ach: string; wire: string }> = {
  chase: { ach: '021000021', wire: '021000021' },
  wells_fargo: { ach: '121000248', wire: '121000248' },
  security_cu: { ach: '066474405', wire: '066474405' },
  prairie_bank: { ach: '101000019', wire: '101000019' },
};
