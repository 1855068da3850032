import type { Fault as KitFault, FaultSpecBase } from 'emulator-kit';
import { errorForStatus, statusForCode, TellerApiError } from './teller-errors';

/**
 * A fault for the next calls to a path, as the Plaid emulator's control API takes them (`path`, `count`,
 * `status`, `error`, `delay_ms`, `drop`, `body`, `headers`), plus `method`, since Teller's paths are
 * shared by GET and DELETE.
 */
export interface FaultSpec extends FaultSpecBase {
  /**
   * A Teller path such as `/accounts`, a pattern whose `:name` segments match any one segment
   * (`/accounts/:account_id/balances`), or `*` for every API call.
   */
  path: string;
  /** Only calls with this method (`GET`, `DELETE`); every method when absent. */
  method?: string;
  /** Teller's error object; its status follows from the code when `status` is absent. */
  error?: { code: string; message?: string };
}

export type Fault = KitFault<FaultSpec>;

/** What a fault is matched against: the call's method and path. */
export interface FaultCall {
  method: string;
  path: string;
}

/** Why a fault spec is unusable, or undefined when it is fine. */
export function faultSpecProblem(spec: Record<string, unknown>): string | undefined {
  if (typeof spec.path !== 'string' || !(spec.path === '*' || spec.path.startsWith('/'))) {
    return 'path is required: a path starting with / (":name" segments match any segment) or *';
  }
  if (spec.method !== undefined && (typeof spec.method !== 'string' || !/^[A-Za-z]+$/.test(spec.method))) {
    return 'method must be an HTTP method such as GET or DELETE';
  }
  if (spec.count !== undefined && !(Number.isInteger(spec.count) && (spec.count as number) > 0)) {
    return 'count must be a positive integer';
  }
  const status = spec.status;
  if (
    status !== undefined &&
    !(Number.isInteger(status) && (status as number) >= 100 && (status as number) <= 599)
  ) {
    return 'status must be an HTTP status (100-599)';
  }
  if (spec.error !== undefined) {
    const error = spec.error as Record<string, unknown> | null;
    if (typeof error !== 'object' || error === null || typeof error.code !== 'string' || error.code === '') {
      return 'error must be an object with a code (and optionally a message)';
    }
    if (error.message !== undefined && typeof error.message !== 'string')
      return 'error.message must be a string';
  }
  if (spec.delay_ms !== undefined && !(typeof spec.delay_ms === 'number' && spec.delay_ms >= 0)) {
    return 'delay_ms must be a number of milliseconds';
  }
  if (spec.drop !== undefined && typeof spec.drop !== 'boolean') return 'drop must be a boolean';
  if (spec.headers !== undefined) {
    const headers = spec.headers as Record<string, unknown> | null;
    if (
      typeof headers !== 'object' ||
      headers === null ||
      Object.values(headers).some((v) => typeof v !== 'string')
    ) {
      return 'headers must be an object of strings';
    }
  }
  return undefined;
}

function pathMatches(pattern: string, path: string): boolean {
  if (pattern === '*' || pattern === path) return true;
  const want = pattern.split('/');
  const have = path.split('/');
  return (
    want.length === have.length &&
    want.every((segment, index) => segment === have[index] || (segment.startsWith(':') && have[index] !== ''))
  );
}

/** A fault affects calls with its method (any when it has none) to a path its pattern matches. */
export function faultMatches(fault: Fault, call: FaultCall): boolean {
  return (fault.method === undefined || fault.method === call.method) && pathMatches(fault.path, call.path);
}

/** Methods are kept in capitals, as calls carry them. */
export function normaliseFault(spec: FaultSpec): FaultSpec {
  return { ...spec, method: spec.method?.toUpperCase() };
}

/** The Teller error a fault answers with, when it asks for one by error object or by status. */
export function errorOfFault(fault: Fault): TellerApiError | undefined {
  if (fault.error) {
    const status = fault.status ?? statusForCode(fault.error.code);
    return new TellerApiError(status, fault.error.code, fault.error.message ?? 'Injected failure.');
  }
  return fault.status !== undefined ? errorForStatus(fault.status) : undefined;
}
