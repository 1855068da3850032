export { TellerEmulator, CONTROL_PREFIX, TELLER_ENVIRONMENTS } from './teller-emulator';
export type {
  ClientCertificateState,
  RecordedCall,
  TellerEmulatorOptions,
  TellerEnvironment,
  WebhookSent,
  WebhookSettings,
} from './teller-emulator';
export { connectSignatureMessage } from './connect';
export type { ConnectRequest, ConnectSuccess } from './connect';
export { ensureCredentials, issueForeignClientCertificate, CREDENTIALS_FOLDER } from './credentials';
export type { EmulatorCredentials } from './credentials';
export type { EnrollmentStatus, EnrollmentView } from './enrollment-store';
export type { Fault, FaultSpec } from './faults';
export { SANDBOX_INSTITUTIONS } from './sandbox-data';
export type { SandboxInstitution, Product } from './sandbox-data';
export { DISCONNECT_REASONS } from './teller-errors';
export type { DisconnectReason, TellerErrorBody } from './teller-errors';
export type { PublishedSigningKey } from './token-signing';
export { DEFAULT_RETRY_DELAYS_MS } from './webhook-sender';
export type { DeliveryAttempt, SentWebhook } from './webhook-sender';
export { buildWebhookDelivery, tellerSignature } from './webhook-signing';
export type { TellerWebhookEvent, WebhookDelivery } from './webhook-signing';
export { SCHEMAS_DIR } from './schemas-dir';
