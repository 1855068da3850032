import https from 'node:https';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TellerEmulator, type ConnectSuccess, type TellerEmulatorOptions } from '../../src';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  raw: string;
  /** The parsed JSON body; undefined when there was none. */
  body: unknown;
}

export interface ClientCertificate {
  cert: string;
  key: string;
}

/**
 * One HTTPS request as a Teller client makes it: the emulator's CA trusted, a client certificate when
 * given, the access token as the Basic user name. A fresh connection each time (`agent: false`), so a
 * certificate is never carried over from an earlier request.
 */
export function tellerRequest(
  baseUrl: string,
  options: {
    method?: string;
    path: string;
    ca: string;
    certificate?: ClientCertificate | null;
    token?: string;
    authorization?: string;
    body?: unknown;
    headers?: Record<string, string>;
  },
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) {
    headers.Authorization = `Basic ${Buffer.from(`${options.token}:`).toString('base64')}`;
  }
  if (options.authorization !== undefined) headers.Authorization = options.authorization;
  let payload: string | undefined;
  if (options.body !== undefined) {
    payload = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  return new Promise((resolve, reject) => {
    const request = https.request(
      new URL(options.path, baseUrl),
      {
        method: options.method ?? 'GET',
        headers,
        ca: options.ca,
        cert: options.certificate?.cert,
        key: options.certificate?.key,
        agent: false,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            raw,
            body: raw === '' ? undefined : (JSON.parse(raw) as unknown),
          });
        });
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

/** A control API call (JSON in and out, no client certificate). */
export function control(
  emulator: TellerEmulator,
  method: string,
  path: string,
  body?: unknown,
): Promise<Answer> {
  return tellerRequest(emulator.url, {
    method,
    path: `/__emulator${path}`,
    ca: emulator.credentials.caCertificatePem,
    body,
  });
}

export interface Running {
  emulator: TellerEmulator;
  url: string;
  ca: string;
  /** The client certificate the emulator issued, as the service presents it. */
  certificate: ClientCertificate;
  dataDir: string;
  /** A Teller API call with the emulator's client certificate unless told otherwise. */
  api: (options: {
    method?: string;
    path: string;
    token?: string;
    certificate?: ClientCertificate | null;
    authorization?: string;
  }) => Promise<Answer>;
  connect: (request?: Record<string, unknown>) => Promise<ConnectSuccess>;
  stop: () => Promise<void>;
}

/** An emulator on a free port with its own data directory, removed on stop. */
export async function startEmulator(options: Partial<TellerEmulatorOptions> = {}): Promise<Running> {
  const dataDir = options.dataDir ?? mkdtempSync(path.join(tmpdir(), 'teller-emulator-test-'));
  const emulator = new TellerEmulator({ ...options, dataDir });
  const url = await emulator.listen(0);
  const { caCertificatePem: ca, clientCertificatePem, clientKeyPem } = emulator.credentials;
  const certificate = { cert: clientCertificatePem, key: clientKeyPem };
  return {
    emulator,
    url,
    ca,
    certificate,
    dataDir,
    api: (request) =>
      tellerRequest(url, {
        ...request,
        ca,
        certificate: request.certificate === undefined ? certificate : request.certificate,
      }),
    connect: async (request = {}) => {
      const answer = await control(emulator, 'POST', '/connect/complete', { nonce: 'nonce-1', ...request });
      if (answer.status !== 200) throw new Error(`connect/complete answered ${answer.status}: ${answer.raw}`);
      return answer.body as ConnectSuccess;
    },
    stop: async () => {
      await emulator.close();
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
