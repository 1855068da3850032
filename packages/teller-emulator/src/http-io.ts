import { createJsonSender } from 'emulator-kit';

export { BodyTooLargeError, readBody } from 'emulator-kit';

/** Teller's answers say `application/json; charset=utf-8`; `undefined` as the body sends none (204). */
export const send = createJsonSender('application/json; charset=utf-8');
