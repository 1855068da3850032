// Named one by one (no `export *`): Node finds the names of a CommonJS module that the service loads
// with `import()` only in this form.
export {
  CONTROL_PREFIX,
  PlaidEmulator,
  type EmulatedAccount,
  type EmulatedItem,
  type EmulatorOptions,
  type FaultSpec,
  type ItemError,
  type ItemWebhookResult,
  type LinkSuccess,
  type RecordedCall,
  type SentWebhook,
  type SignatureOptions,
  type WebhookVerificationJwk,
} from './plaid-emulator';
export {
  SANDBOX_INSTITUTIONS,
  USER_GOOD_ACCOUNTS,
  type SandboxAccountTemplate,
  type SandboxInstitution,
} from './sandbox-data';
