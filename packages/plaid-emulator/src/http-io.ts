import { createJsonSender } from 'emulator-kit';

export { readBody } from 'emulator-kit';

/** Plaid's answers say `application/json`, without a charset. */
export const send = createJsonSender('application/json');
