import { createPrivateKey, X509Certificate } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureCredentials, issueForeignClientCertificate, type EmulatorCredentials } from '../src';

const YEAR_MS = 365 * 24 * 60 * 60 * 1000;

function mode(file: string): number {
  return statSync(file).mode & 0o777;
}

describe('the development CA and certificates in DATA_DIR/teller-emulator', () => {
  let dataDir: string;

  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'teller-credentials-'));
  });
  afterEach(() => {
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('when the data directory is empty, then a CA, a server certificate for localhost, 127.0.0.1 and ::1 and a client certificate are made, signed by the CA, keys 0600', async () => {
    const credentials = await ensureCredentials(dataDir);

    expect(credentials.directory).toBe(path.join(dataDir, 'teller-emulator'));
    expect(mode(credentials.directory)).toBe(0o700);
    for (const key of [credentials.caKeyPath, credentials.serverKeyPath, credentials.clientKeyPath]) {
      expect(mode(key)).toBe(0o600);
    }
    const ca = new X509Certificate(readFileSync(credentials.caCertificatePath));
    const server = new X509Certificate(readFileSync(credentials.serverCertificatePath));
    const client = new X509Certificate(readFileSync(credentials.clientCertificatePath));
    expect(ca.ca).toBe(true);
    expect(ca.verify(ca.publicKey)).toBe(true);
    for (const leaf of [server, client]) {
      expect(leaf.ca).toBe(false);
      expect(leaf.verify(ca.publicKey)).toBe(true);
      expect(leaf.checkIssued(ca)).toBe(true);
    }
    expect(server.checkHost('localhost')).toBe('localhost');
    expect(server.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(server.checkIP('::1')).toBe('::1');
    expect(client.checkPrivateKey(createPrivateKey(credentials.clientKeyPem))).toBe(true);
  });

  it('when started again on the same directory, then every file is reused as it is', async () => {
    const first = await ensureCredentials(dataDir);
    const second = await ensureCredentials(dataDir);

    expect(pems(second)).toEqual(pems(first));
  });

  it('when the client certificate is missing, then a new one is issued by the same CA and the rest is kept', async () => {
    const first = await ensureCredentials(dataDir);
    rmSync(first.clientCertificatePath);

    const second = await ensureCredentials(dataDir);

    expect(second.caCertificatePem).toBe(first.caCertificatePem);
    expect(second.serverCertificatePem).toBe(first.serverCertificatePem);
    expect(second.clientCertificatePem).not.toBe(first.clientCertificatePem);
    const ca = new X509Certificate(second.caCertificatePem);
    expect(new X509Certificate(second.clientCertificatePem).verify(ca.publicKey)).toBe(true);
  });

  it('when the CA has expired, then the CA and both certificates are made anew', async () => {
    const sixYearsAgo = Date.now() - 6 * YEAR_MS;
    const old = await ensureCredentials(dataDir, { now: () => sixYearsAgo });
    expect(Date.parse(new X509Certificate(old.caCertificatePem).validTo)).toBeLessThan(Date.now());

    const renewed = await ensureCredentials(dataDir);

    expect(renewed.caCertificatePem).not.toBe(old.caCertificatePem);
    expect(renewed.serverCertificatePem).not.toBe(old.serverCertificatePem);
    expect(renewed.clientCertificatePem).not.toBe(old.clientCertificatePem);
    expect(Date.parse(new X509Certificate(renewed.caCertificatePem).validTo)).toBeGreaterThan(Date.now());
  });

  it('when only the leaf certificates have expired, then they are re-issued by the same CA', async () => {
    const fresh = await ensureCredentials(dataDir);
    const twoYearsLater = Date.now() + 2 * YEAR_MS;

    const later = await ensureCredentials(dataDir, { now: () => twoYearsLater });

    expect(later.caCertificatePem).toBe(fresh.caCertificatePem);
    expect(later.clientCertificatePem).not.toBe(fresh.clientCertificatePem);
    expect(later.serverCertificatePem).not.toBe(fresh.serverCertificatePem);
  });

  it('when a certificate was not signed by the CA, then it is replaced by one that is', async () => {
    const first = await ensureCredentials(dataDir);
    const foreign = await issueForeignClientCertificate();
    writeFileSync(first.clientCertificatePath, foreign.certificatePem);
    writeFileSync(first.clientKeyPath, foreign.keyPem, { mode: 0o600 });

    const second = await ensureCredentials(dataDir);

    expect(second.clientCertificatePem).not.toBe(foreign.certificatePem);
    expect(
      new X509Certificate(second.clientCertificatePem).verify(
        new X509Certificate(second.caCertificatePem).publicKey,
      ),
    ).toBe(true);
  });

  it('when a key file was left readable by others, then it is tightened to 0600 on the next start', async () => {
    const first = await ensureCredentials(dataDir);
    chmodSync(first.clientKeyPath, 0o644);

    await ensureCredentials(dataDir);

    expect(mode(first.clientKeyPath)).toBe(0o600);
  });

  it('when two starts race on one directory, then both end with the same matching files', async () => {
    const [a, b] = await Promise.all([ensureCredentials(dataDir), ensureCredentials(dataDir)]);

    expect(pems(a)).toEqual(pems(b));
    expect(pems(await ensureCredentials(dataDir))).toEqual(pems(a));
  });
});

function pems(credentials: EmulatorCredentials): string[] {
  return [
    credentials.caCertificatePem,
    credentials.serverCertificatePem,
    credentials.serverKeyPem,
    credentials.clientCertificatePem,
    credentials.clientKeyPem,
  ];
}
