// Named one by one (no `export *`): Node finds the names of a CommonJS module loaded with `import()` only
// in this form.
export { EmulatorServer, type EmulatorServerOptions, type RecordedCallBase } from './emulator-server';
export { FaultQueue, playFault } from './fault-queue';
export type { Answer, Fault, FaultQueueOptions, FaultSpecBase, InjectedError } from './fault-queue';
export {
  BodyTooLargeError,
  createJsonSender,
  DEFAULT_MAX_BODY_BYTES,
  readBody,
  type SendJson,
} from './http-io';
export { WebhookOutbox } from './webhook-outbox';
