/**
 * @peculiar/x509's declarations name the WebCrypto types as a browser's globals (`CryptoKey`,
 * `BufferSource`…); Node has the same API as `webcrypto` in node:crypto. These aliases give those names
 * Node's own types, so the library's declarations are checked (skipLibCheck stays off) without the DOM lib.
 */
type NodeWebCrypto = typeof import('node:crypto').webcrypto;

declare global {
  type Crypto = NodeWebCrypto;
  type CryptoKey = import('node:crypto').webcrypto.CryptoKey;
  type CryptoKeyPair = import('node:crypto').webcrypto.CryptoKeyPair;
  type BufferSource = import('node:crypto').webcrypto.BufferSource;
  type Algorithm = import('node:crypto').webcrypto.Algorithm;
  type KeyUsage = import('node:crypto').webcrypto.KeyUsage;
  type KeyAlgorithm = import('node:crypto').webcrypto.KeyAlgorithm;
  type HashAlgorithmIdentifier = import('node:crypto').webcrypto.HashAlgorithmIdentifier;
  type AlgorithmIdentifier = import('node:crypto').webcrypto.AlgorithmIdentifier;
  type EcKeyGenParams = import('node:crypto').webcrypto.EcKeyGenParams;
  type RsaHashedKeyGenParams = import('node:crypto').webcrypto.RsaHashedKeyGenParams;
  type EcdsaParams = import('node:crypto').webcrypto.EcdsaParams;
  type RsaPssParams = import('node:crypto').webcrypto.RsaPssParams;
  type JsonWebKey = import('node:crypto').webcrypto.JsonWebKey;
  type EcKeyImportParams = import('node:crypto').webcrypto.EcKeyImportParams;
  type RsaHashedImportParams = import('node:crypto').webcrypto.RsaHashedImportParams;
}

export {};
