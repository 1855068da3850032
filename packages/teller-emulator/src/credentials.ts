// @peculiar/x509 needs a Reflect metadata polyfill loaded before it (its README, "Reflect Polyfill Required").
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';

// Node's WebCrypto is what @peculiar/x509 documents for Node; typed as the DOM's Crypto its provider expects
// (one program may hold both: the root's type-check includes the DOM library for its browser test).
x509.cryptoProvider.set(webcrypto as unknown as Crypto);

/** WebCrypto ECDSA P-256 with SHA-256 for every key and signature of the development PKI. */
const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 24 * 60 * 60 * 1000;
const CA_LIFETIME_MS = 5 * 365 * DAY_MS;
const LEAF_LIFETIME_MS = 365 * DAY_MS;
/** A certificate this close to its end is replaced now rather than failing a handshake later today. */
const RENEW_MARGIN_MS = DAY_MS;
const LOCK_STALE_MS = 30_000;

/** The subfolder of the data directory the emulator's files live in. */
export const CREDENTIALS_FOLDER = 'teller-emulator';

const FILES = {
  caCertificate: 'ca-certificate.pem',
  caKey: 'ca-key.pem',
  serverCertificate: 'server-certificate.pem',
  serverKey: 'server-key.pem',
  clientCertificate: 'client-certificate.pem',
  clientKey: 'client-key.pem',
} as const;

/** Where the development PKI's files are, and their contents. Keys are written with mode 0600. */
export interface EmulatorCredentials {
  directory: string;
  caCertificatePath: string;
  /** The CA's private key: it signs the server and client certificates. */
  caKeyPath: string;
  /** The HTTPS server's certificate, for `localhost`, `127.0.0.1` and `::1`. */
  serverCertificatePath: string;
  serverKeyPath: string;
  /** What the service presents to the emulator, as Teller's `certificate.pem` from `teller.zip`. */
  clientCertificatePath: string;
  /** As Teller's `private_key.pem`. */
  clientKeyPath: string;
  caCertificatePem: string;
  serverCertificatePem: string;
  serverKeyPem: string;
  clientCertificatePem: string;
  clientKeyPem: string;
}

interface Issued {
  certificate: x509.X509Certificate;
  keyPem: string;
}

/**
 * The development CA, the server certificate and the client certificate under `DATA_DIR/teller-emulator/`:
 * reused when present and valid, generated when missing or expired (or within a day of expiry), and the
 * two leaf certificates re-issued whenever the CA is new or they were not signed by it. A lock file keeps
 * two processes sharing one data directory from writing mismatched pairs.
 */
export async function ensureCredentials(
  dataDir: string,
  options: { now?: () => number } = {},
): Promise<EmulatorCredentials> {
  const now = options.now ?? Date.now;
  const directory = path.resolve(dataDir, CREDENTIALS_FOLDER);
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const file = (name: keyof typeof FILES) => path.join(directory, FILES[name]);
  const release = await acquireLock(path.join(directory, '.lock'));
  try {
    let ca = await loadValid(file('caCertificate'), file('caKey'), now());
    const caIsNew = ca === undefined;
    if (!ca) {
      ca = await issueCa(now());
      writeIssued(ca, file('caCertificate'), file('caKey'));
    }
    const signer = await importSigningKey(ca.keyPem);
    const leaf = async (kind: 'server' | 'client') => {
      const certificatePath = file(kind === 'server' ? 'serverCertificate' : 'clientCertificate');
      const keyPath = file(kind === 'server' ? 'serverKey' : 'clientKey');
      const existing = caIsNew ? undefined : await loadValid(certificatePath, keyPath, now(), ca);
      if (existing) return existing;
      const issued = await issueLeaf(kind, ca, signer, now());
      writeIssued(issued, certificatePath, keyPath);
      return issued;
    };
    const server = await leaf('server');
    const client = await leaf('client');
    return {
      directory,
      caCertificatePath: file('caCertificate'),
      caKeyPath: file('caKey'),
      serverCertificatePath: file('serverCertificate'),
      serverKeyPath: file('serverKey'),
      clientCertificatePath: file('clientCertificate'),
      clientKeyPath: file('clientKey'),
      caCertificatePem: ca.certificate.toString('pem'),
      serverCertificatePem: server.certificate.toString('pem'),
      serverKeyPem: server.keyPem,
      clientCertificatePem: client.certificate.toString('pem'),
      clientKeyPem: client.keyPem,
    };
  } finally {
    release();
  }
}

/**
 * A CA and a client certificate it signed, in memory, that are not the emulator's: what a client with
 * someone else's certificate presents (tests of the refusal use it).
 */
export async function issueForeignClientCertificate(): Promise<{
  caCertificatePem: string;
  certificatePem: string;
  keyPem: string;
}> {
  const ca = await issueCa(Date.now(), 'Some Other CA');
  const client = await issueLeaf('client', ca, await importSigningKey(ca.keyPem), Date.now());
  return {
    caCertificatePem: ca.certificate.toString('pem'),
    certificatePem: client.certificate.toString('pem'),
    keyPem: client.keyPem,
  };
}

async function loadValid(
  certificatePath: string,
  keyPath: string,
  now: number,
  issuer?: Issued,
): Promise<Issued | undefined> {
  if (!existsSync(certificatePath) || !existsSync(keyPath)) return undefined;
  try {
    const certificate = new x509.X509Certificate(readFileSync(certificatePath, 'utf8'));
    const keyPem = readFileSync(keyPath, 'utf8');
    if (certificate.notBefore.getTime() > now) return undefined;
    if (certificate.notAfter.getTime() - RENEW_MARGIN_MS <= now) return undefined;
    if (!(await keyMatches(certificate, keyPem))) return undefined;
    if (
      issuer &&
      !(await certificate.verify({ publicKey: issuer.certificate.publicKey, signatureOnly: true }))
    ) {
      return undefined;
    }
    // A key file copied in with looser permissions is tightened, not reused as it is.
    if ((statSync(keyPath).mode & 0o777) !== 0o600) chmodSync(keyPath, 0o600);
    return { certificate, keyPem };
  } catch {
    return undefined;
  }
}

async function keyMatches(certificate: x509.X509Certificate, keyPem: string): Promise<boolean> {
  const fromKey = createPrivateKey(keyPem).export({ format: 'jwk' });
  const fromCertificate = await webcrypto.subtle.exportKey('jwk', await certificate.publicKey.export());
  return fromKey.x === fromCertificate.x && fromKey.y === fromCertificate.y;
}

async function generateKeys(): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify']);
}

async function keyPemOf(keys: CryptoKeyPair): Promise<string> {
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return x509.PemConverter.encode(pkcs8, 'PRIVATE KEY');
}

async function importSigningKey(keyPem: string): Promise<CryptoKey> {
  const der = x509.PemConverter.decodeFirst(keyPem);
  return webcrypto.subtle.importKey('pkcs8', der, KEY_ALGORITHM, false, ['sign']);
}

/** A positive serial of 16 random bytes (RFC 5280: at most 20 octets, never negative). */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return bytes.toString('hex');
}

async function issueCa(now: number, name = 'Teller Emulator Development CA'): Promise<Issued> {
  const keys = await generateKeys();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name: `CN=${name}, O=teller-emulator`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + CA_LIFETIME_MS),
    keys,
    signingAlgorithm: KEY_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certificate, keyPem: await keyPemOf(keys) };
}

async function issueLeaf(
  kind: 'server' | 'client',
  ca: Issued,
  caKey: CryptoKey,
  now: number,
): Promise<Issued> {
  const keys = await generateKeys();
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    await x509.AuthorityKeyIdentifierExtension.create(ca.certificate.publicKey),
  ];
  if (kind === 'server') {
    extensions.push(
      new x509.SubjectAlternativeNameExtension([
        { type: 'dns', value: 'localhost' },
        { type: 'ip', value: '127.0.0.1' },
        { type: 'ip', value: '::1' },
      ]),
    );
  }
  const certificate = await x509.X509CertificateGenerator.create({
    serialNumber: serialNumber(),
    subject:
      kind === 'server' ? 'CN=localhost, O=teller-emulator' : 'CN=teller-emulator client, O=teller-emulator',
    issuer: ca.certificate.subject,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(Math.min(now + LEAF_LIFETIME_MS, ca.certificate.notAfter.getTime())),
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: KEY_ALGORITHM,
    extensions,
  });
  return { certificate, keyPem: await keyPemOf(keys) };
}

/** Written to a temporary name and renamed, so a reader never sees half a file; keys 0600. */
function writeIssued(issued: Issued, certificatePath: string, keyPath: string): void {
  writeAtomically(keyPath, issued.keyPem, 0o600);
  writeAtomically(certificatePath, issued.certificate.toString('pem'), 0o644);
}

export function writeAtomically(file: string, contents: string, mode: number): void {
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSync(temporary, contents, { mode });
  chmodSync(temporary, mode);
  renameSync(temporary, file);
}

/** An exclusive lock file; one older than 30 s is a crashed holder's and is taken over. */
async function acquireLock(lockPath: string): Promise<() => void> {
  for (;;) {
    try {
      closeSync(openSync(lockPath, 'wx', 0o600));
      return () => rmSync(lockPath, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      try {
        if (Date.now() - statSync(lockPath).mtimeMs > LOCK_STALE_MS) rmSync(lockPath, { force: true });
      } catch {
        // released meanwhile
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}
