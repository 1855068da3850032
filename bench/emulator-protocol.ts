/** Messages between the bench and a Plaid emulator it runs in a child process (bench/emulator-host.ts). */

export type HostRequest =
  | { id: number; op: 'mint-public-tokens'; count: number; institutionId: string }
  | { id: number; op: 'list-item-ids' }
  | { id: number; op: 'clear-calls' }
  /** `Plaid-Verification` values for these raw bodies, each signed at its own `iat` (Unix seconds). */
  | { id: number; op: 'sign-webhooks'; bodies: string[]; iats: number[] };

export type HostMessage =
  | { type: 'ready'; url: string }
  | { type: 'reply'; id: number; result: string[] }
  | { type: 'failed'; id: number; message: string };
