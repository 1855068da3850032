/**
 * Why: the root's type-check is one program with the DOM library (test/http/api-docs.test.ts drives a
 * browser), where @peculiar/x509's `cryptoProvider.set` takes the DOM's `Crypto`, which Node's
 * `webcrypto` does not match type for type (the Teller emulator's own program aliases those names to
 * Node's, packages/teller-emulator/src/webcrypto-globals.d.ts). The emulator's sources hand it Node's
 * `webcrypto`, as @peculiar/x509 documents for Node; this overload lets the root check them. Remove it
 * once the emulator's call type-checks in a program with the DOM library.
 */
import type { webcrypto } from 'node:crypto';

declare module '@peculiar/x509' {
  interface CryptoProvider {
    set(value: webcrypto.Crypto): this;
  }
}
