/** Plaid Sandbox's test institutions and the accounts a default `user_good` Item has. */

export interface SandboxInstitution {
  institutionId: string;
  name: string;
  products: string[];
  countryCodes: string[];
  routingNumbers: string[];
  oauth: boolean;
  url: string | null;
  primaryColor: string | null;
}

const US_DEPOSITORY_PRODUCTS = [
  'assets',
  'auth',
  'balance',
  'identity',
  'investments',
  'liabilities',
  'transactions',
];

export const SANDBOX_INSTITUTIONS: SandboxInstitution[] = [
  ['ins_109508', 'First Platypus Bank', ['011000138']],
  ['ins_109509', 'First Gingham Credit Union', ['011000028']],
  ['ins_109510', 'Tattersall Federal Credit Union', ['011000015']],
  ['ins_109511', 'Tartan Bank', ['011000390']],
  ['ins_109512', 'Houndstooth Bank', ['011000536']],
  ['ins_130016', 'First Platypus Balance Bank', ['011000138']],
].map(([institutionId, name, routingNumbers]) => ({
  institutionId: institutionId as string,
  name: name as string,
  products: US_DEPOSITORY_PRODUCTS,
  countryCodes: ['US'],
  routingNumbers: routingNumbers as string[],
  oauth: false,
  url: 'https://plaid.com',
  primaryColor: '#1f1f1f',
}));

export interface SandboxAccountTemplate {
  name: string;
  officialName: string | null;
  mask: string;
  type: string;
  subtype: string;
  available: number | null;
  current: number;
  limit: number | null;
}

export const USER_GOOD_ACCOUNTS: SandboxAccountTemplate[] = [
  [
    'Plaid Checking',
    'Plaid Gold Standard 0% Interest Checking',
    '0000',
    'depository',
    'checking',
    100,
    110,
    null,
  ],
  [
    'Plaid Saving',
    'Plaid Silver Standard 0.1% Interest Saving',
    '1111',
    'depository',
    'savings',
    200,
    210,
    null,
  ],
  ['Plaid CD', 'Plaid Bronze Standard 0.2% Interest CD', '2222', 'depository', 'cd', null, 1000, null],
  [
    'Plaid Credit Card',
    'Plaid Diamond 12.5% APR Interest Credit Card',
    '3333',
    'credit',
    'credit card',
    null,
    410,
    2000,
  ],
  [
    'Plaid Money Market',
    'Plaid Platinum Standard 1.85% Interest Money Market',
    '4444',
    'depository',
    'money market',
    43200,
    43200,
    null,
  ],
  ['Plaid IRA', null, '5555', 'investment', 'ira', null, 320.76, null],
  ['Plaid 401k', null, '6666', 'investment', '401k', null, 23631.9805, null],
  ['Plaid Student Loan', null, '7777', 'loan', 'student', null, 65262, null],
  ['Plaid Mortgage', null, '8888', 'loan', 'mortgage', null, 56302.06, null],
  ['Plaid HSA', 'Plaid Cares Health Savings Account', '9001', 'depository', 'hsa', 6009, 6009, null],
  [
    'Plaid Cash Management',
    'Plaid Growth Cash Management',
    '9002',
    'depository',
    'cash management',
    12060,
    12060,
    null,
  ],
  [
    'Plaid Business Credit Card',
    'Plaid Platinum Small Business Credit Card',
    '9999',
    'credit',
    'credit card',
    4980,
    5020,
    10000,
  ],
].map(([name, officialName, mask, type, subtype, available, current, limit]) => ({
  name: name as string,
  officialName: officialName as string | null,
  mask: mask as string,
  type: type as string,
  subtype: subtype as string,
  available: available as number | null,
  current: current as number,
  limit: limit as number | null,
}));

/**
 * The account a `NEW_ACCOUNTS_AVAILABLE` event opens at the bank. Sandbox has no fixed one, so this is
 * the emulator's own; the nth new account of an Item gets mask `910n`, away from `user_good`'s masks.
 */
export const NEW_ACCOUNT_TEMPLATE: SandboxAccountTemplate = {
  name: 'Plaid New Checking',
  officialName: 'Plaid Gold Standard 0% Interest Checking',
  mask: '9100',
  type: 'depository',
  subtype: 'checking',
  available: 500,
  current: 500,
  limit: null,
};

export const VALID_PRODUCTS = new Set([
  'assets',
  'auth',
  'identity',
  'investments',
  'investments_auth',
  'liabilities',
  'payment_initiation',
  'identity_verification',
  'transactions',
  'credit_details',
  'income',
  'income_verification',
  'standing_orders',
  'transfer',
  'employment',
  'recurring_transactions',
  'signal',
  'statements',
]);

export const VALID_COUNTRY_CODES = new Set([
  'US',
  'GB',
  'ES',
  'NL',
  'FR',
  'IE',
  'CA',
  'DE',
  'IT',
  'PL',
  'DK',
  'NO',
  'SE',
  'EE',
  'LT',
  'LV',
  'PT',
  'BE',
  'AT',
  'FI',
]);

export const VALID_LANGUAGES = new Set([
  'da',
  'nl',
  'en',
  'et',
  'fr',
  'de',
  'hi',
  'it',
  'lv',
  'lt',
  'no',
  'pl',
  'pt',
  'ro',
  'es',
  'sv',
  'vi',
]);
