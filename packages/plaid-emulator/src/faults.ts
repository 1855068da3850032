import type { Fault as KitFault, FaultSpecBase } from 'emulator-kit';
import { errorForStatus, PlaidEmulatorError, statusForErrorType } from './plaid-error-bodies';

export interface FaultSpec extends FaultSpecBase {
  /** A Plaid path such as `/accounts/get`, or `*` for every endpoint. */
  path: string;
  error?: { error_type: string; error_code: string; error_message?: string; display_message?: string | null };
}

export type Fault = KitFault<FaultSpec>;

/** A fault affects calls to its path, or to every endpoint (`*`). */
export function faultMatches(fault: Fault, path: string): boolean {
  return fault.path === path || fault.path === '*';
}

/** The Plaid error a fault answers with, when it asks for one by error object or status. */
export function errorOfFault(fault: Fault): PlaidEmulatorError | undefined {
  if (fault.error) {
    return new PlaidEmulatorError(
      fault.status ?? statusForErrorType(fault.error.error_type, fault.error.error_code),
      fault.error.error_type,
      fault.error.error_code,
      fault.error.error_message ?? 'injected failure',
      fault.error.display_message ?? null,
    );
  }
  return fault.status ? errorForStatus(fault.status) : undefined;
}
